"""Faults of the outputs beside a run, replayed on a tiny run: links inside a run or sweep
directory, two writers of one run, sizes too large for the machine, damaged inputs, and real
processes killed with SIGKILL at a random moment. Each test asserts what the user sees (one
``error:`` line, the exit code of that kind of failure) and that nothing was lost or written
elsewhere."""

import dataclasses
import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io import atomic, rundir
from interp.io.budget import check_config_memory
from interp.io.errors import ResourceError, UnsafePathError, WriteError
from interp.model.network import ModelConfig
from tests.waits import HANG_S, wait_for

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
# 9 evaluations (a fit needs 8 points), checkpoints at 0, 40 and 80, the per-class IW set.
CFG = TrainConfig(
    optimizer="adam",
    lr=3e-3,
    batch_size=32,
    steps=80,
    eval_every=10,
    checkpoint_every=40,
    n_log_checkpoints=0,
    seed=0,
    per_class_iw=2,
)
TINY = ["--set", "steps=20", "--set", "eval_every=10", "--set", "n_eval=32", "--quiet"]
LLC = ["--chains", "2", "--draws", "5", "--burnin", "0", "--n-batches", "2", "--workers", "1"]
# Every command that writes into a run, and what it writes there.
WRITERS = {
    "measures": (["--n", "16"], "checkpoint_measures.csv"),
    "fit": (["--n-boot", "0"], "fit.json"),
    "evaluate": (["--n-pairs", "4", "--n", "16"], "length_eval.csv"),
    "quanta": ([], "quanta.json"),
    "llc": (LLC, "llc.csv"),
    "report": (["--no-fit", "--sequences", "1"], "report.html"),
    "figures": (["--formats", "html"], "figures"),
}


def argv_of(command: str, run: Path) -> list[str]:
    extra, name = WRITERS[command]
    out = ["--out", str(run / name)] if command == "figures" else []
    return [command, str(run), *extra, *out]


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != rundir.LOCK_NAME
    }


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def cli(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "interp.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    threads = torch.get_num_threads()
    try:
        train(TASK, MODEL, CFG, out, progress=False)
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    return Path(shutil.copytree(base_run, tmp_path / "run"))


# 1. A link anywhere inside a run or sweep directory is refused, for writing and for deleting.
def test_1_linked_checkpoints_are_refused_and_the_other_run_kept(base_run, tmp_path, capsys):
    mine = Path(shutil.copytree(base_run, tmp_path / "mine"))
    theirs = Path(shutil.copytree(base_run, tmp_path / "theirs"))
    shutil.rmtree(mine / "checkpoints")
    (mine / "checkpoints").symlink_to(theirs / "checkpoints")
    before = snapshot(theirs)
    for argv in (
        ["train", "--preset", "tiny", *TINY, "--seed", "1", "--overwrite", "--out", str(mine)],
        ["train", "--resume", "--set", "steps=120", "--out", str(mine), "--quiet"],
    ):
        assert main(argv) == 3
        line = one_error_line(capsys)
        assert "symbolic link" in line and str(mine / "checkpoints") in line, line
    with pytest.raises(UnsafePathError, match="checkpoints is a symbolic link"):
        rundir.remove_run_files(mine)
    assert snapshot(theirs) == before
    assert (mine / "config.json").exists()  # nothing of mine deleted either


def test_1_a_link_on_the_way_to_an_output_is_refused(run, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "figures").symlink_to(elsewhere)
    assert main(["figures", str(run), "--out", str(run / "figures"), "--formats", "html"]) == 3
    assert "symbolic link" in one_error_line(capsys)
    (run / "sub").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="sub is a symbolic link"):
        atomic.write_text_atomic(run / "sub" / "deep" / "x.csv", "x")
    assert list(elsewhere.iterdir()) == []  # nothing written, no folder made there


def test_1_6_a_linked_sweep_figures_folder_and_damaged_sweep_files(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["sweep", "--preset", "tiny", "--grid", "K=16", "--backend", "serial", "--no-figures"]
    args += ["--out", str(out)]
    assert main([*args, "--set", "steps=10", "--set", "eval_every=5", "--set", "n_eval=32"]) == 0
    capsys.readouterr()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "figures").symlink_to(elsewhere)
    assert main(["sweep-summary", str(out), "--formats", "html"]) == 3
    assert "figures is a symbolic link" in one_error_line(capsys)
    assert list(elsewhere.iterdir()) == []
    # 6. damaged sweep files: summary.csv is rewritten from the runs (never read), a damaged
    # sweep.json is one line
    (out / "figures").unlink()
    (out / "summary.csv").write_text("garbage\n")
    assert main(["sweep-summary", str(out), "--no-figures"]) == 0
    assert "ic_acc" in (out / "summary.csv").read_text()
    capsys.readouterr()
    (out / "sweep.json").write_text('{"spec": ')
    assert main(["sweep-summary", str(out), "--no-figures"]) == 3
    assert "sweep.json is not valid JSON" in one_error_line(capsys)


# 2. Every command that writes into a run holds its lock: a second writer is refused.
def test_2_every_writer_is_refused_while_another_process_writes_the_run(run, capsys):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from interp.io.rundir import RunLock; "  # holds until killed
            f"RunLock({str(run)!r}).acquire(); print('locked', flush=True); sys.stdin.read()",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(run)
        for command in WRITERS:
            assert main(argv_of(command, run)) == 4, command
            line = one_error_line(capsys)
            assert f"pid {holder.pid}" in line, (command, line)
        assert main(["train", "--resume", "--set", "steps=120", "--out", str(run), "--quiet"]) == 4
        assert f"pid {holder.pid}" in one_error_line(capsys)
        assert snapshot(run) == before
    finally:
        holder.kill()
        holder.wait()
        holder.stdin.close()
        holder.stdout.close()


def test_2_no_checkpoints_never_replaces_an_output(run, capsys):
    assert main(argv_of("measures", run)) == 0
    capsys.readouterr()
    saved = (run / "checkpoint_measures.csv").read_bytes()
    for p in (run / "checkpoints").glob("step_*.safetensors"):
        p.unlink()
    for command in ("measures", "llc"):
        assert main(argv_of(command, run)) == 3
        assert "holds no weight checkpoints" in one_error_line(capsys)
    assert (run / "checkpoint_measures.csv").read_bytes() == saved
    assert not (run / "llc.csv").exists()


def _edit_checkpoint(run: Path, edit) -> Path:
    path = run / "checkpoints" / "step_00000040.safetensors"
    state = load_file(str(path))
    save_file(edit(state), str(path))
    return path


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda s: {**s, "blocks.0.attn.W_Q": s["blocks.0.attn.W_Q"] * float("nan")},
            "tensor blocks.0.attn.W_Q holds NaN",
        ),
        (lambda s: {k: v.half() for k, v in s.items()}, "is float16, this model's is float32"),
        (
            lambda s: {**s, "blocks.0.attn.W_Q": torch.zeros(3, 3)},
            "tensor blocks.0.attn.W_Q has shape [3, 3]",
        ),
    ],
)
def test_2_4_5_bad_weights_are_refused_naming_file_and_tensor(run, capsys, edit, words):
    assert main(argv_of("measures", run)) == 0
    capsys.readouterr()
    saved = (run / "checkpoint_measures.csv").read_bytes()
    path = _edit_checkpoint(run, edit)
    assert main(argv_of("measures", run)) == 3
    line = one_error_line(capsys)
    assert str(path) in line and words in line, line
    assert (run / "checkpoint_measures.csv").read_bytes() == saved


# 3. Sizes and budgets are refused before any allocation or directory.
@pytest.mark.parametrize(
    "sets, code, words",
    [
        (["batch_size=1000000000"], 5, "--set batch_size=1000000000: the run needs about"),
        (["K=10000000000"], 5, "--set K=10000000000: the run needs about"),
        (["steps=1e30"], 2, "TrainConfig.steps=1000000000000000019884624838656 is invalid"),
        (["momentum=2"], 2, "TrainConfig.momentum=2.0 is invalid: must be in [0, 1)"),
        (["task.K=64", "K=32"], 2, "--set task.K and --set K both set task.K"),
        (["K=64", "K=32"], 2, "--set K=64 and --set K=32 contradict each other"),
    ],
)
def test_3_sizes_are_refused_before_anything_exists(tmp_path, capsys, sets, code, words):
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--out", str(out), "--quiet"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == code
    assert words in one_error_line(capsys)
    assert not out.exists()


def test_3_memory_estimate_and_bootstrap_bound(tmp_path, capsys):
    config = {"task": TASK.to_dict(), "model": MODEL.to_dict(), "train": dataclasses.asdict(CFG)}
    check_config_memory(config, available=10**9)  # the tiny run fits in 1 GB
    big = {**config, "train": {**config["train"], "batch_size": 10**6}}
    with pytest.raises(ResourceError, match=r"train.batch_size=1000000: .* 1 GB are available"):
        check_config_memory(big, available=10**9)
    csv = tmp_path / "c.csv"
    pd.DataFrame({"step": range(0, 200, 10), "ic_loss": [2.0] * 20}).to_csv(csv, index=False)
    assert main(["fit", str(csv), "--n-boot", "1e9"]) == 2
    assert "--n-boot=1000000000 is invalid: must be in [0, 1e+05]" in one_error_line(capsys)
    assert not (tmp_path / "c.fit.json").exists()


# 4. A fit of a curve whose steps repeat or go back, or with NaN or infinite values, is refused.
@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda d: d.assign(step=d["step"].where(d.index != 5, 40)),
            "line 7 (step 40): the step repeats",
        ),
        (
            lambda d: d.assign(step=d["step"].where(d.index != 5, 10)),
            "line 7 (step 10): the step comes",
        ),
        (
            lambda d: d.assign(ic_loss=d["ic_loss"].where(d.index != 3, float("inf"))),
            "line 5 (step 30): column 'ic_loss' is +inf",
        ),
        (
            lambda d: d.assign(ic_loss=d["ic_loss"].where(d.index != 3, float("nan"))),
            "line 5 (step 30): column 'ic_loss' is NaN",
        ),
    ],
)
def test_4_5_fit_names_the_line_and_step_of_a_bad_curve(tmp_path, capsys, edit, words):
    csv = tmp_path / "c.csv"
    curve = pd.DataFrame({"step": range(0, 200, 10), "ic_loss": [2.0 - i / 40 for i in range(20)]})
    edit(curve).to_csv(csv, index=False)
    assert main(["fit", str(csv), "--n-boot", "0"]) == 3  # a damaged curve file
    line = one_error_line(capsys)
    assert f"{csv}: {words}" in line, line
    assert not (tmp_path / "c.fit.json").exists()


# 5. Errors say where: the destination (never a temporary name), before the long computation.
def _os_with(**overrides):
    return types.SimpleNamespace(**{**{k: getattr(os, k) for k in dir(os)}, **overrides})


def test_5_disk_full_names_the_destination(run, capsys, monkeypatch):
    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "os", _os_with(fsync=fsync))
    with pytest.raises(WriteError) as info:
        atomic.write_text_atomic(run / "x.csv", "x")
    assert str(info.value) == f"cannot write {run / 'x.csv'}: No space left on device"
    assert main(argv_of("measures", run)) == 5
    line = one_error_line(capsys)
    assert line == (
        f"error: cannot write {run / 'checkpoint_measures.csv'}: No space left on device"
    )
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


def test_5_read_only_is_refused_before_the_computation(run, capsys, monkeypatch):
    real_open = os.open

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        if str(path).startswith(".write-probe"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    import interp.analysis.over_training as over_training

    def never(*a, **k):
        raise AssertionError("the computation started")

    monkeypatch.setattr(atomic, "os", _os_with(open=open_))
    monkeypatch.setattr(over_training, "measures_over_checkpoints", never)
    assert main(argv_of("measures", run)) == 5
    assert f"cannot write to {run}: Read-only file system" in one_error_line(capsys)


def test_5_too_little_free_space_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    out = tmp_path / "run"
    assert main(["train", "--preset", "tiny", *TINY, "--out", str(out)]) == 5
    line = one_error_line(capsys)
    assert f"cannot write to {tmp_path}: the run writes about" in line and "1 kB are free" in line
    assert not out.exists()


def test_5_unknown_measure_and_damaged_config_same_code_everywhere(run, capsys):
    assert main(["transition", str(run), "--measure", "nosuch"]) == 2
    assert "--measure 'nosuch' is not a column" in one_error_line(capsys)
    (run / "config.json").write_text('{"task": ')
    before = snapshot(run)
    for command in [*WRITERS, "transition"]:
        argv = argv_of(command, run) if command in WRITERS else [command, str(run)]
        assert main(argv) == 3, command
        line = one_error_line(capsys)
        assert "config.json" in line, (command, line)
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "name, damage, command, words",
    [
        ("per_class_iw.csv", "step,c0\n0,1\n", "quanta", "class columns must be"),
        ("llc.csv", "step,llc_mean\n0,1\n", "llc", "is not an llc.csv"),
    ],
)
def test_6_damaged_inputs_are_one_line(run, capsys, name, damage, command, words):
    (run / name).write_text(damage)
    assert main(argv_of(command, run)) == 3
    assert words in one_error_line(capsys)
    assert (run / name).read_text() == damage


def test_6_a_damaged_fit_json_is_one_line(run, tmp_path, capsys):
    (run / "fit.json").write_text('{"model": ')
    assert main(["figures", str(run), "--out", str(tmp_path / "figs"), "--formats", "html"]) == 3
    assert f"{run / 'fit.json'} is not valid JSON" in one_error_line(capsys)


# 6. A real process killed with SIGKILL at a random moment: the rerun equals an uninterrupted one.
def _comparable(run: Path, command: str):
    name = WRITERS[command][1]
    path = run / name
    if command == "figures":  # the data of each figure; file names and traces name the run
        return {
            p.name.replace(run.name, "RUN"): p.read_text().replace(run.name, "RUN")
            for p in sorted(path.glob("*.csv"))
        }
    if command == "llc":
        return pd.read_csv(path).drop(columns=["seconds"])
    if command == "report":
        return path.stat().st_size > 0
    return path.read_text().replace(str(run), "RUN")  # fit.json and quanta.json name the run


def _kill_then_rerun(base_run: Path, tmp_path: Path, command: str, seed: int):
    reference = Path(shutil.copytree(base_run, tmp_path / "reference"))
    assert main(argv_of(command, reference)) == 0
    expected = _comparable(reference, command)
    killed = Path(shutil.copytree(base_run, tmp_path / "killed"))
    proc = cli(*argv_of(command, killed))
    time.sleep(random.Random(seed).uniform(0.5, 4.0))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert main(argv_of(command, killed)) == 0  # a stale lock is taken over
    got = _comparable(killed, command)
    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(got, expected)
    else:
        assert got == expected
    assert not [p for p in killed.rglob("*") if atomic.is_temp_file(p.name)]


@pytest.mark.parametrize("command", ["measures", "fit", "quanta", "llc", "evaluate"])
def test_6_kill_9_then_rerun_equals_uninterrupted(base_run, tmp_path, command, capsys):
    _kill_then_rerun(base_run, tmp_path, command, seed=hash(command) % 1000)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["figures", "report"])
def test_6_kill_9_then_rerun_equals_uninterrupted_slow(base_run, tmp_path, command, capsys):
    _kill_then_rerun(base_run, tmp_path, command, seed=hash(command) % 1000)


@pytest.mark.slow
def test_6_kill_9_of_a_sweep_then_rerun_equals_uninterrupted(tmp_path, capsys):
    args = ["--preset", "tiny", "--seeds", "0-1", "--backend", "serial", "--no-figures"]
    args += ["--set", "steps=100", "--set", "eval_every=20", "--set", "n_eval=32"]
    assert main(["sweep", *args, "--out", str(tmp_path / "reference")]) == 0
    proc = cli("sweep", *args, "--out", str(tmp_path / "killed"))
    time.sleep(random.Random(7).uniform(2.0, 6.0))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert main(["sweep", *args, "--out", str(tmp_path / "killed")]) == 0
    for seed in (0, 1):
        a = rundir.load_run(tmp_path / "reference" / f"seed={seed}").metrics
        b = rundir.load_run(tmp_path / "killed" / f"seed={seed}").metrics
        pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("command", ["measures", "fit"])
def test_6_two_real_processes_write_one_output(run, base_run, tmp_path, command):
    """Two processes released together: both finish or one is refused (code 4, the other's pid
    named); the output equals the one a single process writes."""
    a, b = cli(*argv_of(command, run)), cli(*argv_of(command, run))
    (_, err_a), (_, err_b) = a.communicate(timeout=HANG_S), b.communicate(timeout=HANG_S)
    codes = sorted([a.returncode, b.returncode])
    assert codes in ([0, 0], [0, 4]), (err_a, err_b)
    if codes == [0, 4]:
        loser, winner = (err_a, b) if a.returncode == 4 else (err_b, a)
        assert f"pid {winner.pid}" in loser and "Traceback" not in loser
    reference = Path(shutil.copytree(base_run, tmp_path / "reference"))
    assert main(argv_of(command, reference)) == 0
    assert _comparable(run, command) == _comparable(reference, command)


def test_6_a_report_racing_a_training_is_refused_then_written(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["--set", "steps=100000", "--set", "eval_every=20", "--set", "n_eval=32", "--quiet"]
    proc = cli("train", "--preset", "tiny", *args, "--out", str(run))
    try:
        wait_for(
            lambda: (
                (run / "metrics.csv").exists()
                and len(rundir.read_metrics(run / "metrics.csv").frame) > 0
            ),
            what="the training's first evaluation",
        )
        assert main(["report", str(run), "--no-fit", "--sequences", "1"]) == 4
        assert f"pid {proc.pid}" in one_error_line(capsys)
        assert not (run / "report.html").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=HANG_S)
    assert main(["report", str(run), "--no-fit", "--sequences", "1"]) == 0
    assert (run / "report.html").stat().st_size > 0
