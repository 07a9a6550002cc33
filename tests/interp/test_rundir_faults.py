"""Fault injection on the run directory: each numbered finding of the run-directory review,
replayed on a tiny run. Every test asserts that nothing was lost or written elsewhere and that the
user sees one line (``error: ...``) and a non-zero exit, never a traceback.

Real processes are used where the fault is about processes: a concurrent second writer, a lock
left by a ``kill -9``, SIGTERM from a scheduler, and a writer killed mid-write.
"""

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io import atomic, checkpoints, rundir
from interp.io.rundir import RunDirectoryError, RunLock, load_run, read_metrics
from interp.model.network import ModelConfig
from interp.train.training import TrainingDiverged
from tests.waits import HANG_S, alive, descendants, wait_for

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
CFG = TrainConfig(
    optimizer="adam",
    lr=3e-3,
    batch_size=32,
    steps=60,
    eval_every=20,
    checkpoint_every=40,
    n_log_checkpoints=3,
    seed=0,
)
TINY = ["--set", "steps=60", "--set", "eval_every=20", "--set", "n_eval=64", "--quiet"]


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (the lock file aside: it records who held it)."""
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
    assert err.rstrip().splitlines()[-1] == lines[0]
    return lines[0]


def cli(*args: str, env=None, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "interp.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A run stopped at step 40 (resume state there) and the same run uninterrupted."""
    base = tmp_path_factory.mktemp("runs")
    full = train(TASK, MODEL, CFG, base / "full", progress=False)
    train(TASK, MODEL, CFG, base / "part", progress=False, stop_after=40)
    return base, full


def copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


# 1. --resume on a directory whose config.json is gone must refuse, not start the demo over it.
def test_1_resume_without_config_refuses_and_keeps_everything(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "part", tmp_path / "run")
    (run / "config.json").unlink()
    before = snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 3
    assert "no readable config.json" in one_error_line(capsys)
    assert snapshot(run) == before
    # the same with a config that is not JSON any more
    (run / "config.json").write_text('{"task": ')
    before = snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 3
    assert "not valid JSON" in one_error_line(capsys)
    assert snapshot(run) == before


# 2. Point names read from sweep.json never reach outside the sweep folder.
@pytest.mark.parametrize("bad_name", ["../victim", "/ABS/victim", "..", "a/../../victim"])
def test_2_sweep_overwrite_never_deletes_outside(tmp_path, capsys, bad_name):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work")
    (victim / "config.json").write_text(json.dumps({"task": {}, "model": {}, "train": {}}))
    out = tmp_path / "sweep"
    args = ["sweep", "--preset", "tiny", "--grid", "K=16", "--out", str(out), "--no-figures"]
    assert main([*args, "--set", "steps=10", "--set", "eval_every=5", "--set", "n_eval=32"]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["points"][0]["name"] = bad_name.replace("/ABS", str(tmp_path))
    (out / "sweep.json").write_text(json.dumps(manifest))
    before = snapshot(tmp_path / "victim")
    code = main([*args, "--set", "steps=10", "--set", "eval_every=5", "--overwrite"])
    assert code == 3
    assert "is invalid: a point name is one plain folder name" in one_error_line(capsys)
    assert snapshot(tmp_path / "victim") == before


# 3. One writer per run directory (and per sweep folder); a dead holder's lock is taken over.
def test_3_a_second_writer_is_refused_with_pid_and_host(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
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
        assert main(["train", "--preset", "tiny", *TINY, "--out", str(run)]) == 4
        line = one_error_line(capsys)
        assert f"pid {holder.pid}" in line and socket.gethostname() in line
        assert sorted(p.name for p in run.iterdir()) == [rundir.LOCK_NAME]  # nothing written
        sweep_args = ["sweep", "--preset", "tiny", "--grid", "K=16", "--no-figures"]
        assert main([*sweep_args, "--out", str(run)]) == 4
        assert f"pid {holder.pid}" in one_error_line(capsys)
    finally:
        holder.kill()
        holder.wait()
        holder.stdin.close()
        holder.stdout.close()
    # kill -9 left the holder's record in the lock file: the next writer takes over, with a notice
    assert json.loads((run / rundir.LOCK_NAME).read_text())["pid"] == holder.pid
    assert main(["train", "--preset", "tiny", *TINY, "--out", str(run)]) == 0
    assert "stale lock" in capsys.readouterr().err
    assert (run / rundir.LOCK_NAME).read_text() == ""  # released at the end


def test_3_two_real_training_processes_on_one_directory(tmp_path):
    """Two fresh runs released together: exactly one trains, the other is refused, and the run
    directory holds one consistent run (config, weights and metrics of the same seed)."""
    run = tmp_path / "run"
    long = ["--set", "steps=400", "--set", "eval_every=100", "--set", "n_eval=64", "--quiet"]
    long += ["--set", "num_threads=1"]  # the same arithmetic as the reference below
    a = cli("train", "--preset", "tiny", "--seed", "0", *long, "--out", str(run))
    b = cli("train", "--preset", "tiny", "--seed", "1", *long, "--out", str(run))
    (_, err_a), (_, err_b) = a.communicate(timeout=HANG_S), b.communicate(timeout=HANG_S)
    codes = sorted([a.returncode, b.returncode])
    assert codes == [0, 4], (err_a, err_b)
    loser_err = err_a if a.returncode == 4 else err_b
    assert "Traceback" not in loser_err and "error:" in loser_err
    winner_seed = 0 if a.returncode == 0 else 1
    loaded = load_run(run)
    assert loaded.train_config.seed == winner_seed
    threads = torch.get_num_threads()
    try:
        expected = train(
            loaded.task, loaded.model_config, loaded.train_config, None, progress=False
        )
    finally:
        torch.set_num_threads(threads)
    pd.testing.assert_frame_equal(loaded.metrics, expected, check_dtype=False, rtol=1e-6)


# 4. A torn metrics.csv is detected; resume recovers the rows from resume.pt.
def test_4_torn_metrics_detected_and_resume_recovers(interrupted, tmp_path, capsys):
    base, full = interrupted
    run = copy_run(base / "part", tmp_path / "run")
    text = (run / "metrics.csv").read_text()
    (run / "metrics.csv").write_text(text[: len(text) - 25])  # cut inside the last row
    read = read_metrics(run / "metrics.csv")
    assert "cut off" in read.problem
    assert list(read.frame["step"]) == [0, 20]  # rows 0, 20 and 40 were there; 40 is torn
    # no half-read row (train_loss is empty at step 0, the live forecast before 8 rows)
    empty_ok = ["train_loss", "forecast_step", "forecast_low", "forecast_high"]
    assert not read.frame.drop(columns=empty_ok).isna().any().any()
    assert load_run(run).metrics_problem == read.problem
    # resume takes the step and the rows from resume.pt and equals the uninterrupted run
    resumed = train(TASK, MODEL, CFG, run, resume=True, progress=False)
    pd.testing.assert_frame_equal(resumed, full)
    pd.testing.assert_frame_equal(load_run(run).metrics, full, check_dtype=False)
    # a row out of order is reported and dropped
    lines = (run / "metrics.csv").read_text().splitlines()
    (run / "metrics.csv").write_text("\n".join([lines[0], lines[2], lines[1], *lines[3:]]) + "\n")
    assert "not after the previous" in read_metrics(run / "metrics.csv").problem


# 5. A directory that is not a run is never written into, with or without --overwrite.
def test_5_foreign_directory_is_refused_even_with_overwrite(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.csv").write_text("step,my_measure\n0,1.5\n")
    (mine / "notes.txt").write_text("keep me")
    before = snapshot(mine)
    for extra in ([], ["--overwrite"]):
        assert main(["train", "--preset", "tiny", *TINY, "--out", str(mine), *extra]) == 3
        assert "not a run directory" in one_error_line(capsys)
        assert snapshot(mine) == before
        assert not (mine / rundir.LOCK_NAME).exists()
    sweep_args = ["sweep", "--preset", "tiny", "--grid", "K=16", "--no-figures"]
    assert main([*sweep_args, "--out", str(mine), "--overwrite"]) == 3
    assert "not a sweep folder" in one_error_line(capsys)
    assert snapshot(mine) == before


def test_5_overwrite_deletes_only_the_runs_own_files(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "full", tmp_path / "run")
    (run / "my_analysis.ipynb").write_text("{}")
    assert main(["train", "--preset", "tiny", *TINY, "--out", str(run), "--overwrite"]) == 0
    assert (run / "my_analysis.ipynb").read_text() == "{}"
    assert load_run(run).train_config.optimizer == "adam"


# 6. Outputs beside a run never go through a symbolic link.
def test_6_outputs_refuse_symlinks(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "full", tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("precious")
    (run / "checkpoint_measures.csv").symlink_to(elsewhere)
    assert main(["measures", str(run), "--n", "32"]) == 3
    assert "symbolic link" in one_error_line(capsys)
    assert elsewhere.read_text() == "precious"
    (run / "fit.json").symlink_to(elsewhere)
    with pytest.raises(atomic.UnsafeDestinationError):
        load_run(run).write_output("fit.json", {"r2": 1.0})
    assert elsewhere.read_text() == "precious"
    with pytest.raises(RunDirectoryError, match="plain file name"):
        load_run(run).write_output("../escape.json", {})


def test_6_failure_mid_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "metrics.csv"
    atomic.write_text_atomic(path, "step\n0\n")

    def half_then_crash(f):
        f.write(b"step\n0\n10\n")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.write_with_atomic(path, half_then_crash)
    assert path.read_text() == "step\n0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]  # no temp file left


def test_6_kill_9_mid_write_leaves_old_or_new_never_half(tmp_path):
    """A writer killed with SIGKILL at an arbitrary moment, repeatedly replacing a 4 MB file."""
    path = tmp_path / "big.bin"
    payloads = [bytes([i]) * (4 << 20) for i in range(3)]
    atomic.write_bytes_atomic(path, payloads[0])
    code = (
        "import itertools; from interp.io.atomic import write_bytes_atomic; "
        f"p = {str(path)!r}; print('go', flush=True)\n"
        "for i in itertools.cycle([1, 2]): write_bytes_atomic(p, bytes([i]) * (4 << 20))"
    )
    for delay in (0.05, 0.2, 0.45):
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout.readline().strip() == "go"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert path.read_bytes() in payloads
        atomic.clean_temp_files(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["big.bin"]


# 7. A checkpoint is good only if its evaluation is finite.
def test_7_non_finite_evaluation_is_never_written(tmp_path, monkeypatch):
    import interp.analysis.evaluation as evaluation  # the standard evaluation callback's

    real = evaluation.evaluate

    def nan_at_40(model, sets, **kw):
        out = real(model, sets, **kw)
        if nan_at_40.calls == 2:  # the evaluation at step 40
            out["iw_loss"] = float("nan")
        nan_at_40.calls += 1
        return out

    nan_at_40.calls = 0
    monkeypatch.setattr(evaluation, "evaluate", nan_at_40)
    with pytest.raises(
        TrainingDiverged, match=r"iw_loss became nan at step 40.*checkpoint is step 20\."
    ):
        train(TASK, MODEL, CFG, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    assert list(run.metrics["step"]) == [0, 20]
    assert max(run.checkpoint_steps) <= 20  # step 40 (a checkpoint step) was not saved
    state = checkpoints.load_resume(tmp_path / "run" / "checkpoints" / "resume.pt")
    assert state["last_eval_step"] == 20 and len(state["rows"]) == 2


def test_7_real_divergence_names_a_good_checkpoint(tmp_path):
    bad = TrainConfig(optimizer="sgd", lr=1e6, batch_size=32, steps=200, eval_every=20, seed=0)
    with pytest.raises(TrainingDiverged) as info:
        train(TASK, MODEL, bad, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    losses = run.metrics[[c for c in run.metrics if c.endswith("_loss") and c != "train_loss"]]
    assert torch.isfinite(torch.tensor(losses.to_numpy())).all()
    named = int(str(info.value).split("checkpoint is step ")[1].split(".")[0])
    assert named in run.checkpoint_steps and named <= run.metrics["step"].max()
    for step in run.checkpoint_steps:
        assert all(torch.isfinite(v).all() for v in run.load_model(step).state_dict().values())


# 8. SIGTERM (what schedulers send), and SIGUSR2 / SIGUSR1 (SLURM's warning before a time limit),
# stop at a step boundary with the state saved, exiting 128 + the signal.
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR2])
def test_8_sigterm_saves_and_resume_is_exact(tmp_path, sig):
    run = tmp_path / "run"
    args = ["--set", "steps=1000", "--set", "eval_every=50", "--set", "n_eval=64", "--quiet"]
    args += ["--set", "num_threads=1"]  # the same arithmetic in this process below
    proc = cli("train", "--preset", "tiny", *args, "--out", str(run))
    wait_for(lambda: len(read_metrics(run / "metrics.csv").frame) >= 2, what="two evaluations")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 128 + sig, err
    assert f"{sig.name}: stopping after this step" in err and "Traceback" not in err
    state = checkpoints.load_resume(run / "checkpoints" / "resume.pt")
    assert 0 < state["step"] < 1000
    loaded = load_run(run)
    threads = torch.get_num_threads()
    try:
        resumed = train(
            loaded.task, loaded.model_config, loaded.train_config, run, resume=True, progress=False
        )
        full = train(loaded.task, loaded.model_config, loaded.train_config, None, progress=False)
    finally:
        torch.set_num_threads(threads)
    pd.testing.assert_frame_equal(resumed, full)


# 8b. SIGTERM to a sweep's parent stops its workers too: each point saves its state, and none
# trains on orphaned after the parent has gone.
def test_8b_sigterm_to_a_sweep_stops_its_workers(tmp_path):
    out = tmp_path / "sweep"
    args = ["--set", "steps=100000", "--set", "eval_every=50", "--set", "n_eval=64"]
    proc = cli(
        "sweep",
        "--preset",
        "tiny",
        "--seeds",
        "0-1",
        "--workers",
        "2",
        *args,
        "--no-figures",
        "--out",
        str(out),
    )
    metrics = [out / f"seed={s}" / "metrics.csv" for s in (0, 1)]

    def evaluated(path):
        return path.exists() and len(read_metrics(path).frame) >= 2

    wait_for(lambda: all(evaluated(m) for m in metrics), what="two evaluations of each seed")
    workers = descendants(proc.pid)
    assert workers, "the sweep runs its points in worker processes"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted: every running point saved its state" in err and "Traceback" not in err
    sizes = [m.stat().st_size for m in metrics]
    # an orphaned worker would go on training (and evaluating every ~0.1 s): every worker exits
    wait_for(lambda: not any(alive(p) for p in workers), what=f"exit of the workers {workers}")
    assert [m.stat().st_size for m in metrics] == sizes
    for s in (0, 1):
        state = checkpoints.load_resume(out / f"seed={s}" / "checkpoints" / "resume.pt")
        assert 0 < state["step"] < 100000


# 9. Extending a run writes the new length into config.json.
def test_9_extending_a_run_updates_config(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "full", tmp_path / "run")
    assert main(["train", "--resume", "--out", str(run), "--set", "steps=80", "--quiet"]) == 0
    assert json.loads((run / "config.json").read_text())["train"]["steps"] == 80
    assert load_run(run).metrics["step"].max() == 80


# 10. Temporary files of killed writers are cleaned; files follow the umask.
def test_10_temp_files_cleaned_and_umask_respected(interrupted, tmp_path):
    run = copy_run(interrupted[0] / "part", tmp_path / "run")
    left = [run / ".metrics.csv.abc123xy.tmp", run / "checkpoints" / ".resume.pt.q1w2e3r4.tmp"]
    for p in left:
        p.write_bytes(b"half")
    (run / "my.tmp").write_text("not ours")
    old = os.umask(0o022)
    try:
        train(TASK, MODEL, CFG, run, resume=True, progress=False)
        assert not any(p.exists() for p in left)
        assert (run / "my.tmp").exists()
        for name in ("config.json", "metrics.csv", "checkpoints/resume.pt"):
            assert (run / name).stat().st_mode & 0o777 == 0o644, name
        os.umask(0o077)
        atomic.write_text_atomic(tmp_path / "private.txt", "x")
        assert (tmp_path / "private.txt").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


# 11. A minimal-model run is a run like any other.
def test_11_minimal_model_run_reopens(tmp_path, capsys):
    from phenomenology.minimal import MinimalConfig, MinimalInductionHead, train_minimal

    metrics = train_minimal(TASK, steps=40, lr=1.0, eval_every=10, seed=0, out_dir=tmp_path / "m")
    run = load_run(tmp_path / "m")
    assert run.kind == "minimal_induction_head" and isinstance(run.model_config, MinimalConfig)
    model = run.load_model()
    assert isinstance(model, MinimalInductionHead)
    assert float(model.beta1.detach()) == pytest.approx(metrics["beta1"].iloc[-1])
    pd.testing.assert_frame_equal(run.metrics, metrics, check_dtype=False)
    assert main(["transition", str(tmp_path / "m")]) == 0
    assert main(["train", "--resume", "--out", str(tmp_path / "m"), "--quiet"]) == 2
    assert "network runs only" in one_error_line(capsys)


# 12. format_version is checked; format 1 is migrated and marked.
def test_12_format_versions(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "full", tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["format_version"] = 99
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirectoryError, match="format_version 99 is newer"):
        load_run(run)
    assert main(["transition", str(run)]) == 3
    assert "newer" in one_error_line(capsys)
    legacy = {k: v for k, v in config.items() if k not in ("format_version", "kind")}
    legacy["train"] = {k: v for k, v in legacy["train"].items() if k != "backend"}
    (run / "config.json").write_text(json.dumps(legacy))
    loaded = load_run(run)
    assert loaded.train_config.backend == "hooked" and loaded.kind == "induction_net"
    assert any("format version 1" in n for n in loaded.notes)
    assert loaded.load_model(60) is not None


# Errors a user sees: one line naming the field (and the file), nothing written.
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda c: c["train"].update(bogus=1), "unknown field 'bogus'"),
        (lambda c: c["train"].update(lr="0.01"), "field lr='0.01' must be a number"),
        (lambda c: c.update(task=None), "field task must be a JSON object"),
        (lambda c: c["task"].update(K="512"), "field K='512' must be int"),
        (lambda c: c.pop("model"), "'model' is missing"),
    ],
)
def test_bad_config_json_is_one_line_naming_file_and_field(
    interrupted, tmp_path, capsys, edit, words
):
    run = copy_run(interrupted[0] / "full", tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    edit(config)
    (run / "config.json").write_text(json.dumps(config))
    before = snapshot(run)
    for argv in (
        ["transition", str(run)],
        ["measures", str(run)],
        ["train", "--resume", "--out", str(run)],
    ):
        assert main(argv) == 3
        line = one_error_line(capsys)
        assert words in line and "config.json" in line, line
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "sets, words",
    [
        (["seed=-1"], "TrainConfig.seed=-1"),
        (["K=1e400"], "--set K='1e400' is invalid"),
        (["checkpoint_on_jump=-1"], "TrainConfig.checkpoint_on_jump=-1"),
        (["checkpoint_on_jump=nan"], "checkpoint_on_jump"),
        (["device=bogus"], "TrainConfig.device='bogus'"),
        (["lr=abc"], "--set lr='abc' is invalid"),
    ],
)
def test_bad_settings_fail_before_anything_is_written(tmp_path, capsys, sets, words):
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--out", str(out), "--quiet"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    assert words in one_error_line(capsys)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_fails_before_writing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--set", "device=cuda", "--out", str(out)]) == 2
    assert "no CUDA device" in one_error_line(capsys)
    assert not out.exists()
    # A sweep refuses it too, before its folder or any point exists (not one failure per point).
    sweep = tmp_path / "sweep"
    argv = ["sweep", "--preset", "tiny", "--seeds", "0-2", "--set", "device=cuda", "--out"]
    assert main([*argv, str(sweep)]) == 2
    assert "no CUDA device" in one_error_line(capsys)
    assert not sweep.exists()


def test_grid_with_an_empty_value_is_refused(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--preset", "tiny", "--grid", "K=64,,128", "--out", str(out)]) == 2
    assert "value 2 is empty" in one_error_line(capsys)
    assert not out.exists()


def test_read_only_location_is_one_line(tmp_path, capsys, monkeypatch):
    # Tests run as root, which ignores permission bits: the check itself is what is exercised.
    monkeypatch.setattr(rundir.os, "access", lambda path, mode: False)
    assert main(["train", "--preset", "tiny", *TINY, "--out", str(tmp_path / "r")]) == 5
    assert "permission denied" in one_error_line(capsys)
    assert not (tmp_path / "r").exists()


def test_resume_contradictions_name_the_field(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "part", tmp_path / "run")
    before = snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--seed", "3"]) == 2
    assert "contradicts train.seed=0" in one_error_line(capsys)
    assert main(["train", "--resume", "--out", str(run), "--set", "lr=0.5"]) == 2
    assert "contradicts train.lr=0.003" in one_error_line(capsys)
    assert main(["train", "--resume", "--preset", "demo", "--out", str(run)]) == 3
    assert "different config (task." in one_error_line(capsys)
    assert snapshot(run) == before
    # without --preset, the stored config is the reference (not the demo preset's)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 0


def test_damaged_and_foreign_resume_states(interrupted, tmp_path, capsys):
    run = copy_run(interrupted[0] / "part", tmp_path / "run")
    resume = run / "checkpoints" / "resume.pt"
    data = resume.read_bytes()
    resume.write_bytes(data[: len(data) // 2])
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 3
    assert "truncated or corrupted" in one_error_line(capsys)

    class Payload:  # a pickle that would run code on load
        def __reduce__(self):
            return (print, ("owned",))

    with open(resume, "wb") as f:
        torch.save({"x": Payload()}, f, pickle_module=pickle)
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 3
    line = one_error_line(capsys)
    assert "refusing to load" in line and "truncated" not in line


@pytest.mark.parametrize("command", ["measures", "transition", "figures"])
def test_not_a_run_is_one_line(tmp_path, capsys, command):
    extra = ["--out", str(tmp_path / "figs")] if command == "figures" else []
    assert main([command, str(tmp_path / "nothing"), *extra]) == 3
    assert "is not a directory" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main([command, str(tmp_path / "empty"), *extra]) == 3
    assert "not a run directory" in one_error_line(capsys)


def test_lock_object_refuses_in_process_second_holder(tmp_path):
    first = RunLock(tmp_path).acquire()
    try:
        with pytest.raises(rundir.RunLockedError, match=f"pid {os.getpid()}"):
            RunLock(tmp_path).acquire()
    finally:
        first.release()
    with RunLock(tmp_path):
        pass


def test_a_holder_that_has_not_yet_written_its_record_is_still_named(tmp_path):
    """Between taking the flock and writing its record, a holder's lock file is empty: a second
    writer refused then waits for the record instead of naming pid ?."""
    import fcntl
    import threading

    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, with no record yet

    def write_record():
        time.sleep(0.2)
        os.write(fd, json.dumps({"pid": 424242, "host": "h", "since": "s"}).encode())

    writer = threading.Thread(target=write_record)
    writer.start()
    try:
        with pytest.raises(rundir.RunLockedError, match="pid 424242 on host h"):
            RunLock(tmp_path).acquire()
    finally:
        writer.join()
        os.close(fd)


def test_a_holder_that_lets_go_while_refused_is_followed_by_taking_the_lock(tmp_path):
    """A holder empties its record just before letting go: a writer refused then, reading no
    record, tries the lock again and takes it, where it named pid ? and gave up."""
    import fcntl
    import threading

    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held; its record already emptied

    def let_go():
        time.sleep(0.2)
        fcntl.flock(fd, fcntl.LOCK_UN)

    holder = threading.Thread(target=let_go)
    holder.start()
    try:
        lock = RunLock(tmp_path).acquire()
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
        assert lock.took_over is None
        lock.release()
    finally:
        holder.join()
        os.close(fd)
