"""Every setting a user gives is judged where it enters (the ``--set`` parser, the config's
validation, the memory budget, the thread counts), before any folder or file is created: a refusal
is one line naming the field the user set, with exit 2 (invalid) or 5 (the machine lacks it), and
the working folder is left exactly as it was."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.config.train_config import check_device_here
from interp.experiments.sweep_spec import SweepSpec
from interp.io.budget import check_config_memory
from interp.io.errors import ResourceError
from interp.train import threads
from interp.train.overrides import build_configs

ROOT = Path(__file__).resolve().parents[2]


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _refused(
    capsys, tmp_path: Path, argv: list[str], code: int, *names: str, started: bool = False
) -> str:
    """Run ``argv`` in ``tmp_path``; assert exit ``code``, one stderr line naming every one of
    ``names`` (one error line after the run's opening notes if it ``started``), and nothing
    created there. Returns the line."""
    before = _listing(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(argv) == code, capsys.readouterr().err
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    if started:
        lines = [line for line in lines if line.startswith("error")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for name in names:
        assert name in lines[0], lines[0]
    assert _listing(tmp_path) == before
    return lines[0]


# -- the device ----------------------------------------------------------------------------------


def test_a_meta_device_is_refused_before_the_run_folder(tmp_path, capsys):
    line = _refused(
        capsys, tmp_path, ["train", "--preset", "tiny", "--set", "device=meta", "--out", "r"], 2
    )
    assert "device='meta'" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused_naming_device(tmp_path, capsys):
    argv = ["train", "--preset", "tiny", "--set", "device=cuda", "--out", "r"]
    line = _refused(capsys, tmp_path, argv, 2, "device='cuda'", started=True)
    assert "no CUDA device" in line


def test_a_cuda_index_beyond_the_devices_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_device_here("cuda:0")  # the one device there is
    argv = ["train", "--preset", "tiny", "--set", "device=cuda:1", "--out", "r"]
    line = _refused(capsys, tmp_path, argv, 2, "device='cuda:1'", started=True)
    assert "torch sees 1 cuda device(s), cuda:0 to cuda:0" in line


# -- thread and worker counts --------------------------------------------------------------------


def test_a_sweep_with_more_threads_than_the_machine_is_refused(tmp_path, capsys):
    argv = ["sweep", "--preset", "tiny", "--threads-per-worker", "100000", "--out", "s"]
    _refused(capsys, tmp_path, argv, 2, "--threads-per-worker=100000", "core")


def test_a_sweep_with_more_workers_than_the_machine_is_refused(tmp_path, capsys):
    argv = ["sweep", "--preset", "tiny", "--workers", "100000", "--out", "s"]
    _refused(capsys, tmp_path, argv, 2, "--workers=100000", "core")


def test_num_threads_beyond_the_machine_is_refused_naming_it(tmp_path, capsys):
    argv = ["train", "--preset", "tiny", "--set", "num_threads=100000", "--out", "r"]
    _refused(capsys, tmp_path, argv, 2, "--set num_threads=100000")


def test_thread_counts_are_bounded_by_four_per_usable_core(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert threads.usable_cores() == 2
    threads.check_thread_counts(8)  # 4 per core: the bound itself
    threads.check_thread_counts(4, 2)
    with pytest.raises(ValueError, match=r"^num_threads=9 is invalid: .* 2 usable core"):
        threads.check_thread_counts(9)
    with pytest.raises(ValueError, match=r"^workers=3 with num_threads=3 is invalid: 9 threads"):
        threads.check_thread_counts(3, 3)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=r"must be an integer >= 1"):
            threads.check_thread_counts(bad)


# -- a grid axis and an override of one field -----------------------------------------------------


@pytest.mark.parametrize("axis", ["K=32", "task.K=32"])
def test_a_grid_axis_that_an_override_fixes_is_refused_naming_both(tmp_path, capsys, axis):
    argv = ["sweep", "--preset", "tiny", "--grid", axis, "--set", "K=64", "--out", "s"]
    _refused(capsys, tmp_path, argv, 2, f"--grid {axis}", "--set K=64")


def test_a_spec_with_one_field_in_grid_and_overrides_is_refused():
    with pytest.raises(ValueError, match=r"SweepSpec.grid K=16 and SweepSpec.overrides K=32"):
        SweepSpec(preset="tiny", grid={"K": [16]}, overrides={"K": "32"})


def test_an_override_still_drops_the_presets_own_axis():
    spec = SweepSpec.from_preset("fig2-kb-quick", overrides={"K": "128"})
    assert "K" not in spec.grid and "B" in spec.grid


# -- counts and numbers of other commands --------------------------------------------------------


def test_report_sequences_are_bounded(tmp_path, capsys):
    argv = ["report", "nothing", "--sequences", "100000000"]
    _refused(capsys, tmp_path, argv, 2, "--sequences=100000000", "256")
    assert main(["report", str(tmp_path / "nothing"), "--sequences", "256"]) == 3  # the bound
    assert "--sequences" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "name"),
    [
        (["--set", "B=nan"], "--set B"),
        (["--set", "B=inf"], "--set B"),
        (["--set", "L=nan"], "--set L"),
        (["--until", "nan"], "--until"),
        (["--until", "inf"], "--until"),
        (["--fraction", "nan"], "--fraction"),
    ],
)
def test_fit_refuses_nan_and_infinity_naming_the_field(tmp_path, capsys, flags, name):
    rows = "\n".join(f"{s},{3 - s / 100}" for s in range(0, 1000, 50))
    (tmp_path / "c.csv").write_text(f"step,ic_loss\n{rows}\n")
    line = _refused(capsys, tmp_path, ["fit", "c.csv", *flags], 2, name)
    assert "finite" in line


@pytest.mark.parametrize("scale", ["-1", "0", "nan", "inf"])
def test_evaluate_refuses_a_rope_scale_that_is_not_positive(tmp_path, capsys, scale):
    argv = ["evaluate", "nothing", "--rope-scaling", "pi", "--rope-scale", scale]
    _refused(capsys, tmp_path, argv, 2, "--rope-scale")


def test_evaluate_refuses_a_rope_scale_without_a_rescaling(tmp_path, capsys):
    argv = ["evaluate", "nothing", "--rope-scale", "2"]
    _refused(capsys, tmp_path, argv, 2, "--rope-scale", "--rope-scaling")


def test_a_small_positive_rope_scale_is_accepted(tmp_path, capsys):
    argv = ["evaluate", str(tmp_path / "nothing"), "--rope-scaling", "pi", "--rope-scale", "1e-3"]
    assert main(argv) == 3  # judged valid: the missing run is what fails
    assert "--rope-scale" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "ok"), [("0", True), ("0.999", True), ("1", False), ("2", False), ("inf", False)]
)
def test_momentum_is_in_zero_to_one(value, ok):
    if ok:
        assert build_configs("tiny", {"momentum": value}, None)[2].momentum == float(value)
    else:
        with pytest.raises(ValueError, match="momentum"):
            build_configs("tiny", {"momentum": value}, None)


@pytest.mark.parametrize("key", ["lr", "weight_decay", "eps", "p_B"])
def test_an_infinite_float_is_refused_naming_its_key(key):
    with pytest.raises(ValueError, match=rf"^--set {key}='inf' is invalid: expected a finite"):
        build_configs("tiny", {key: "inf"}, None)


# -- memory ---------------------------------------------------------------------------------------


def test_a_size_too_large_names_the_field_the_user_set(tmp_path, capsys):
    argv = ["train", "--preset", "tiny", "--set", "N_max=1e9", "--out", "r"]
    line = _refused(capsys, tmp_path, argv, 5, "--set N_max=1e9", "lower N_max")
    assert "n_eval" not in line


def test_the_refusal_blames_the_setting_whose_absence_shrinks_the_run_most():
    config = {"task": {"K": 512}, "model": {}, "train": {"batch_size": 10**7}}
    alternatives = {
        "K=512": {"task": {}, "model": {}, "train": {"batch_size": 10**7}},
        "batch_size=1e7": {"task": {"K": 512}, "model": {}, "train": {}},
    }
    with pytest.raises(ResourceError, match=r"^--set batch_size=1e7: .*lower batch_size$"):
        check_config_memory(config, 10**9, alternatives=lambda: alternatives)
    with pytest.raises(ResourceError, match=r"^train.batch_size=10000000: "):
        check_config_memory(config, 10**9)  # nothing given: the dominant field itself


def _limited_run(tmp_path: Path, limit_gib: float, *argv: str) -> subprocess.CompletedProcess:
    """``induction-cliff ARGV`` in ``tmp_path`` under an address-space limit (``ulimit -v``)."""
    limit = int(limit_gib * 2**30)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "interp.cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )


def _vm_size_after_import() -> float:
    """GiB of address space a process maps once it imported the command line and torch."""
    code = (
        "import interp.cli, interp.train.overrides, torch\n"
        "line = [x for x in open('/proc/self/status') if x.startswith('VmSize')][0]\n"
        "print(int(line.split()[1]) / 2**20)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return float(out.stdout.strip())


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_a_run_beyond_the_address_space_limit_is_refused_with_exit_5(tmp_path):
    # About 0.7 GiB left under the limit; a batch of 50000 needs about 1.2 GB.
    limit = _vm_size_after_import() + 0.7
    argv = ["train", "--preset", "tiny", "--set", "batch_size=50000", "--out", "r"]
    done = _limited_run(tmp_path, limit, *argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 5, done.stderr
    assert len(lines) == 1 and "--set batch_size=50000" in lines[0], done.stderr
    assert "available" in lines[0]
    assert _listing(tmp_path) == []


def test_out_of_memory_while_building_a_new_run_leaves_nothing(tmp_path, capsys, monkeypatch):
    import interp.train.training as training

    def no_memory(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:121] DefaultCPUAllocator: can't "
            "allocate memory: you tried to allocate 1000000 bytes"
        )

    monkeypatch.setattr(training, "make_generator", no_memory)
    argv = ["train", "--preset", "tiny", "--set", "steps=2", "--out", "runs/r"]
    line = _refused(
        capsys, tmp_path, argv, 5, "out of memory", "nothing of the run was kept", started=True
    )
    assert "lower " in line
    # A folder that was there (empty) stays; only what the command made goes.
    (tmp_path / "given").mkdir()
    argv = ["train", "--preset", "tiny", "--set", "steps=2", "--out", "given"]
    _refused(capsys, tmp_path, argv, 5, "out of memory", started=True)
    assert list((tmp_path / "given").iterdir()) == []
