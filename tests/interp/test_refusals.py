"""Refusals replayed on a tiny run: lock files that are not the run's own regular file (a hard
link to a file elsewhere, a FIFO, a directory), a lock record that cannot be written, a resume
with nothing to resume, empty flags, counts and fields out of range, and damaged run files. Each
test asserts the one ``error:`` line the user sees, its exit code (docs/run-format.md, "Exit
codes") and that nothing outside the run was touched."""

import errno
import os
import shutil
import types
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io import lock
from interp.model.network import ModelConfig

pytestmark = pytest.mark.faults

TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
# 9 evaluations (a fit needs 8 points), checkpoints at 0, 40 and 80.
CFG = TrainConfig(
    optimizer="adam",
    lr=3e-3,
    batch_size=32,
    steps=80,
    eval_every=10,
    checkpoint_every=40,
    n_log_checkpoints=0,
    seed=0,
)
TINY = ["--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10", "--quiet"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


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


# A lock file must be the run's own regular file: a hard link would empty the file it shares.
@pytest.mark.parametrize(
    "argv",
    [["fit", "{run}", "--n-boot", "0"], ["train", "--resume", "--out", "{run}", "--quiet"]],
    ids=["fit", "train-resume"],
)
def test_a_hard_linked_lock_is_refused_and_its_victim_kept(run, tmp_path, capsys, argv):
    victim = tmp_path / "victim.txt"
    victim.write_text("data outside the run\n")
    (run / ".lock").unlink(missing_ok=True)  # the empty lock file a finished writer leaves
    os.link(victim, run / ".lock")
    before = sorted(p.name for p in run.rglob("*"))
    assert main([a.format(run=run) for a in argv]) == 3
    line = one_error_line(capsys)
    assert str(run / ".lock") in line and "hard links" in line
    assert victim.read_text() == "data outside the run\n"
    assert sorted(p.name for p in run.rglob("*")) == before


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_lock_that_is_not_a_regular_file_is_refused_naming_it(run, capsys, kind):
    (run / ".lock").unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(run / ".lock")
    else:
        (run / ".lock").mkdir()
    assert main(["fit", str(run), "--n-boot", "0"]) == 3
    line = one_error_line(capsys)
    assert line == (
        f"error: {run / '.lock'} is not a regular file; refusing to lock with it (remove it)"
    )
    assert not (run / "fit.json").exists()


def test_a_lock_record_that_cannot_be_written_names_the_lock(run, capsys, monkeypatch):
    def write(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    fake = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os)})
    fake.write = write
    monkeypatch.setattr(lock, "os", fake)
    assert main(["fit", str(run), "--n-boot", "0"]) == 5
    assert one_error_line(capsys) == (
        f"error: cannot write the lock {run / '.lock'}: No space left on device"
    )
    assert not (run / "fit.json").exists()
    assert not lock.held(run)


# --resume resumes or refuses; an empty flag is refused naming it.
@pytest.mark.parametrize("state", ["absent", "only-a-lock"])
def test_resume_with_nothing_to_resume_is_refused(tmp_path, capsys, state):
    out = tmp_path / "run"
    if state == "only-a-lock":  # a train killed before its config.json existed
        out.mkdir()
        (out / ".lock").write_text("")
    assert main(["train", "--resume", "--out", str(out), "--quiet"]) == 3
    assert one_error_line(capsys) == (
        f"error: nothing to resume in {out}: it holds no run (no config.json); start it "
        "without --resume"
    )
    assert not (out / "config.json").exists() and not (out / "metrics.csv").exists()


@pytest.mark.parametrize("flag", ["--preset", "--out"])
def test_an_empty_preset_or_out_is_refused_naming_the_flag(tmp_path, capsys, monkeypatch, flag):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--quiet", flag, ""]
    if flag == "--preset":
        argv += ["--out", str(tmp_path / "run")]
    assert main(argv) == 2
    assert one_error_line(capsys) == (
        f"error: {flag} is empty: give a {flag[2:]} name (or leave the flag out)"
    )
    assert list(tmp_path.iterdir()) == []


# Counts are range-checked, and the memory they need estimated, before anything is allocated.
@pytest.mark.parametrize("command", ["measures", "evaluate"])
def test_an_evaluation_count_out_of_range_is_refused_first(run, capsys, command):
    for n in ("-5", "0", "1000000000"):
        # a bad --n-pairs too: --n is judged first
        extra = ["--n-pairs", "x"] if command == "evaluate" else []
        assert main([command, str(run), "--n", n, *extra]) == 2
        assert one_error_line(capsys) == (f"error: --n={int(n)} is invalid: must be in [1, 1e+07]")
    assert not (run / "checkpoint_measures.csv").exists()
    assert not (run / "length_eval.csv").exists()


def test_an_evaluation_count_too_large_for_memory_is_refused_naming_it(run, capsys, monkeypatch):
    from interp.io import budget

    monkeypatch.setattr(budget, "available_memory", lambda: 10**8)
    assert main(["measures", str(run), "--n", "5000000"]) == 5
    line = one_error_line(capsys)
    assert line.startswith(f"error: --n 5000000 (for {run}): task.n_eval=5000000: the run needs")
    assert not (run / "checkpoint_measures.csv").exists()


# Fields, counts and names accepted without a word before are refused before anything exists.
@pytest.mark.parametrize(
    "setting, words",
    [
        ("device=cpu:7", "TrainConfig.device='cpu:7' is invalid: there is one CPU device (cpu)"),
        ("eps=1e300", "eps=1e+300 is invalid: must be in [0, 1e+06]"),
        ("n_layers=100000", "ModelConfig.n_layers=100000 is invalid: must be in [1, 1024]"),
    ],
)
def test_a_field_out_of_range_is_refused_before_the_run_folder(tmp_path, capsys, setting, words):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--set", setting, "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert words in line, line
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["--grid", "K=16", "--grid", "K=32"],
            "--grid K is given twice: give all its values once (--grid K=a,b,...)",
        ),
        (["--seeds", "0-1000000"], "--seeds '0-1000000' is invalid: a sweep has at most 10000"),
    ],
    ids=["grid-twice", "seeds"],
)
def test_a_sweep_asking_too_much_or_twice_is_refused(tmp_path, capsys, args, words):
    out = tmp_path / "sweep"
    argv = ["sweep", "--preset", "tiny", *args, "--set", "steps=20", "--out", str(out)]
    assert main(argv) == 2
    assert words in one_error_line(capsys)
    assert not out.exists()


def test_a_report_under_a_name_that_is_not_html_is_refused(run, tmp_path, capsys):
    out = tmp_path / "o.pdf"
    assert main(["report", str(run), "--out", str(out), "--no-fit"]) == 2
    assert one_error_line(capsys) == (
        f"error: --out {out} is invalid: a report is one HTML file; give a name ending in .html"
    )
    assert not out.exists()


# A damaged metrics.csv is a damaged run file (exit 3) named by path; a link is called a link.
@pytest.mark.parametrize(
    "damage, words",
    [
        ("empty", "metrics.csv is empty: a damaged run file (it always has a header)"),
        ("text", "metrics.csv: line 3, column 'ic_loss' holds 'abc', not a number"),
        ("link", "metrics.csv is a symbolic link; refusing to read a run's metrics through it"),
    ],
)
@pytest.mark.parametrize("command", ["fit", "transition"])
def test_a_damaged_or_linked_metrics_csv_is_a_damaged_run_file(
    run, tmp_path, capsys, damage, words, command
):
    metrics = run / "metrics.csv"
    if damage == "empty":
        metrics.write_text("")
    elif damage == "text":
        lines = metrics.read_text().splitlines()
        header = lines[0].split(",")
        row = lines[2].split(",")
        row[header.index("ic_loss")] = "abc"
        metrics.write_text("\n".join([*lines[:2], ",".join(row), *lines[3:]]) + "\n")
    else:
        elsewhere = tmp_path / "elsewhere.csv"
        metrics.rename(elsewhere)
        metrics.symlink_to(elsewhere)
    argv = [command, str(run)] + (["--n-boot", "0"] if command == "fit" else [])
    assert main(argv) == 3
    line = one_error_line(capsys)
    assert f"{metrics}{words[len('metrics.csv') :]}" in line, line
    assert not (run / "fit.json").exists()


def test_a_finished_sweep_point_with_an_emptied_metrics_csv_is_damaged(tmp_path):
    from interp.experiments.sweep import SweepSpec, run_sweep
    from interp.experiments.sweep_summary import summarize_sweep

    overrides = {"steps": "20", "eval_every": "10", "n_eval": "32", "checkpoint_every": "20"}
    spec = SweepSpec(preset="tiny", grid={}, overrides=overrides, seeds=(0, 1))
    out = tmp_path / "sweep"
    run_sweep(spec, out, backend="serial", formats=(), log=lambda line: None)
    (out / "seed=0" / "metrics.csv").write_text("")
    header = (out / "seed=1" / "metrics.csv").read_text().splitlines()[0]
    (out / "seed=1" / "metrics.csv").write_text(header + "\n")
    summary = summarize_sweep(out).set_index("point")
    assert summary["status"].tolist() == ["damaged", "damaged"]
    assert summary.loc["seed=0", "error"] == (
        f"{out / 'seed=0' / 'metrics.csv'} is empty: a damaged run file (it always has a header)"
    )
    assert summary.loc["seed=1", "error"] == (
        f"{out / 'seed=1' / 'metrics.csv'} has no rows, yet the point finished"
    )


@pytest.mark.parametrize("command", ["figures", "report"])
@pytest.mark.parametrize(
    "field, value, kind",
    [("until_step", "abc", "a number"), ("aux", "ic_acc", "a list"), ("options", [1], "an object")],
)
def test_a_fit_json_with_wrongly_typed_values_is_a_damaged_file(
    run, tmp_path, capsys, command, field, value, kind
):
    import json

    (run / "fit.json").write_text(json.dumps({"model": "nested-logit", field: value}))
    out = tmp_path / ("figs" if command == "figures" else "r.html")
    extra = ["--formats", "html"] if command == "figures" else ["--sequences", "1"]
    assert main([command, str(run), "--out", str(out), *extra]) == 3
    assert one_error_line(capsys) == (
        f"error: {run / 'fit.json'}: field {field!r} is {value!r}, not {kind}: a damaged fit.json"
    )
    assert not out.exists()


def test_a_resume_state_of_another_shape_is_refused_before_config_json_changes(run, capsys):
    """A ``resume.pt`` whose weights do not fit the run's model (damaged, or copied from another
    network) is refused naming it, exit 3, and ``config.json`` keeps its bytes although the resume
    asked for more steps (the file used to be rewritten before the load failed)."""
    resume = run / "checkpoints" / "resume.pt"
    state = torch.load(resume, weights_only=True)
    name = next(k for k, v in state["model"].items() if v.ndim == 2)
    state["model"][name] = torch.zeros(3, 5)
    torch.save(state, resume)
    before = (run / "config.json").read_bytes()
    argv = ["train", "--resume", "--out", str(run), "--set", "steps=120", "--quiet"]
    assert main(argv) == 3
    line = one_error_line(capsys)
    assert str(resume) in line and "do not fit" in line and name in line
    assert (run / "config.json").read_bytes() == before
