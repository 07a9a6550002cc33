"""``sweep --backend submitit``: SLURM jobs through submitit, on this machine (submitit's
LocalExecutor) and through a fake SLURM (``tests/interp/fake_slurm.py``) that requeues a job sent
SIGUSR2 and preempts another; the runs equal the serial and process backends' byte for byte."""

import json
import os
import re
import threading

from interp.cli import main
from interp.experiments import sweep_slurm
from interp.experiments.sweep import SlurmOptions, SweepSpec, run_sweep
from interp.experiments.sweep_backends import steps_done
from tests.interp import fake_slurm
from tests.interp.tiny_runs import FAST_SWEEP as FAST
from tests.waits import HANG_S, wait_for


def spec(ks=(16, 32), seeds=(0,)):
    return SweepSpec(preset="tiny", grid={"K": ks}, overrides=FAST, seeds=seeds)


def silent(line: str) -> None:
    """A sweep's progress log that prints nothing."""


def same_metrics(a, b, names) -> None:
    for name in names:
        assert (a / name / "metrics.csv").read_bytes() == (b / name / "metrics.csv").read_bytes()


def starts_at_zero(out):
    """How many times each point started at step 0, from the jobs' logs."""
    counts = {}
    for log in (out / sweep_slurm.JOBS_DIR).glob("*_log.out"):
        for name in re.findall(r"^point (\S+): starts at step 0$", log.read_text(), re.M):
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_local_executor_sweep_equals_the_serial_one(tmp_path):
    names = [p.name for p in spec().points()]
    lines = []
    local = run_sweep(
        spec(),
        tmp_path / "local",
        backend="submitit",
        slurm=SlurmOptions(local=True, time_min=10),
        figures=False,
        log=lines.append,
    )
    assert "on local SLURM jobs of up to 1 point(s)" in lines[0]
    run_sweep(spec(), tmp_path / "serial", backend="serial", figures=False, log=silent)
    assert local["status"].tolist() == ["done", "done"]
    same_metrics(tmp_path / "local", tmp_path / "serial", names)
    assert starts_at_zero(tmp_path / "local") == dict.fromkeys(names, 1)


def test_fake_slurm_sweep_survives_sigusr2_and_preemption(tmp_path, monkeypatch):
    """12 points in 4 array jobs of 3, 2 at once: job 0 gets SIGUSR2 while its first point
    trains (it saves, submitit requeues the job, which resumes it), job 1 is preempted (SIGTERM:
    it saves; the sweep resubmits its points). Every run equals the process backend's, and no
    point started at step 0 twice."""
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm-state"
    fake_slurm.install(bin_dir)
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    monkeypatch.setattr(sweep_slurm, "POLL_S", 0.2)
    s = spec(ks=(16, 32, 64), seeds=(0, 1, 2, 3))
    points = s.points()
    names = [p.name for p in points]
    out = tmp_path / "slurm"
    done = threading.Event()

    sent = []

    def mid_point(some):
        def condition():
            return done.is_set() or any(0 <= _rows(out / n) < 40 for n in some)

        wait_for(condition, what=f"training of one of {some}", every=0.005)

    def signal_job(index, some, send):
        mid_point(some)
        if not done.is_set():
            (task,) = [p.name[: -len(".pid")] for p in state.glob(f"*_{index}.pid")]
            send(task)
            sent.append(index)

    def usr2(task):
        fake_slurm.subprocess.run(["scancel", "--signal", "USR2", task], check=True)

    def preempt(task):
        (state / f"{task}.preempt").touch()

    injectors = [
        threading.Thread(target=signal_job, args=(0, names[0:1], usr2), daemon=True),
        threading.Thread(target=signal_job, args=(1, names[3:6], preempt), daemon=True),
    ]
    for injector in injectors:
        injector.start()
    try:
        summary = run_sweep(
            s,
            out,
            backend="submitit",
            slurm=SlurmOptions(points_per_job=3, array_parallelism=2, time_min=10),
            figures=False,
            log=silent,
        )
    finally:
        done.set()
        for injector in injectors:
            injector.join(HANG_S)
    assert sorted(sent) == [0, 1]
    assert summary["status"].tolist() == ["done"] * 12
    runs = {p.stem: p.read_text().count("start") for p in state.glob("*.runs")}
    first = min(int(t.split("_")[0]) for t in runs)
    assert runs[f"{first}_0"] == 2  # requeued by submitit after SIGUSR2
    logs = "".join(p.read_text() for p in (out / sweep_slurm.JOBS_DIR).glob("*_log.out"))
    assert len({t.split("_")[0] for t in runs}) >= 2, (runs, logs)  # job 1's points resubmitted
    assert starts_at_zero(out) == dict.fromkeys(names, 1)
    assert "stopped by SIGUSR2, state saved" in logs and "stopped by SIGTERM" in logs
    # the requeued job resumed the point SIGUSR2 stopped: the first of job 0's points, or (on a
    # loaded machine, where the signal can land after that 40-step point ended) a later one
    assert any(f"point {n}: resumes" in logs for n in names[0:3]), logs
    run_sweep(s, tmp_path / "pool", backend="process", workers=2, figures=False, log=silent)
    same_metrics(out, tmp_path / "pool", names)


def _rows(run_dir) -> int:
    """-1 before the run's first evaluation is on disk, else its last step."""
    if not (run_dir / "metrics.csv").exists():
        return -1
    return steps_done(run_dir)


def test_backend_options_are_refused_one_line(tmp_path, capsys, monkeypatch):
    base = ["sweep", "--preset", "tiny", "--no-figures", "--out", str(tmp_path / "s")]
    assert main([*base, "--slurm-partition", "cpu"]) == 2
    assert "--slurm-partition is for --backend submitit" in capsys.readouterr().err
    assert main([*base, "--backend", "submitit", "--slurm-local", "--workers", "2"]) == 2
    assert "--workers is for the process and ray backends" in capsys.readouterr().err
    for flag, value in (("--slurm-points-per-job", "0"), ("--slurm-signal-delay", "6000")):
        assert main([*base, "--backend", "submitit", "--slurm-local", flag, value]) == 2
        err = capsys.readouterr().err.strip().splitlines()  # the refusal alone, no note before
        assert len(err) == 1 and err[0].startswith(f"error: {flag}=") and "is invalid" in err[0]
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert main([*base, "--backend", "submitit"]) == 3
    assert "srun not found" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_missing_submitit_is_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "submitit", None)
    base = ["sweep", "--preset", "tiny", "--no-figures", "--out", str(tmp_path / "s")]
    assert main([*base, "--backend", "submitit", "--slurm-local"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {sweep_slurm.SUBMITIT_HINT}"
    assert not (tmp_path / "s").exists()


def _jobs_of(folder) -> list[int]:
    """Pids of the processes whose command line names ``folder`` (submitit's local jobs)."""
    pids = []
    for proc in os.listdir("/proc"):
        if proc.isdigit():
            try:
                with open(f"/proc/{proc}/cmdline", "rb") as f:
                    if str(folder).encode() in f.read():
                        pids.append(int(proc))
            except OSError:
                continue
    return pids


def test_local_jobs_end_with_the_sweep_command_even_killed(tmp_path):
    """``--slurm-local`` runs jobs on this machine: ``kill -9`` of the sweep command stops them
    (as a pool's workers die with their parent), the running point having saved its state."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "s"
    cmd = [sys.executable, "-m", "interp.cli", "sweep", "--preset", "tiny", "--set", "steps=100000"]
    cmd += ["--backend", "submitit", "--slurm-local", "--no-figures", "--out", str(out)]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: list(out.glob("*/checkpoints/step_00000050.safetensors")), "a checkpoint")
        assert _jobs_of(out / sweep_slurm.JOBS_DIR)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    wait_for(lambda: not _jobs_of(out / sweep_slurm.JOBS_DIR), "the local jobs ending", 30)
    assert list(out.glob("*/checkpoints/resume.pt"))  # the point saved its state on the way out


class _OverJob:
    """A job that is over, whose own return value must never be read (a pickle)."""

    job_id = "7"

    def done(self):
        return True

    def result(self):
        raise AssertionError("the sweep unpickled a job's return value")


def test_a_jobs_results_are_read_from_json_never_from_its_pickle(tmp_path):
    """The results come from the points' JSON files; a damaged one, one over the reader's limits
    and a link to a file elsewhere each read as a failed result naming the file, and a point
    without a file (its job ended before it finished) has none."""
    points = spec(ks=(16, 32, 48, 64), seeds=(0, 1)).points()
    good = {
        "name": points[0].name,
        "status": "done",
        "action": "trained",
        "error": "",
        "seconds": 1.5,
        "steps_done": 0,
    }
    sweep_slurm.write_result(tmp_path, good)
    folder = tmp_path / sweep_slurm.JOBS_DIR / sweep_slurm.RESULTS_DIR
    (folder / f"{points[1].name}.json").write_text("{not json")
    (folder / f"{points[2].name}.json").write_text("[" * 10_000 + "]" * 10_000)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"name": "x"}')
    (folder / f"{points[3].name}.json").symlink_to(elsewhere)
    (folder / f"{points[4].name}.json").write_text(json.dumps({"name": points[4].name}))
    units = [[p] for p in points[:6]]
    got = {r["name"]: r for r in sweep_slurm._outcome(_OverJob(), units, tmp_path, {}, True)}
    assert got[points[0].name] == good
    for p in points[1:5]:
        assert got[p.name]["status"] == "failed" and p.name in got[p.name]["error"]
    assert "symbolic link" in got[points[3].name]["error"]
    assert f"is not a result of point {points[4].name}" in got[points[4].name]["error"]
    assert points[5].name not in got  # no file: its job ended before it finished
    assert elsewhere.read_text() == '{"name": "x"}'
