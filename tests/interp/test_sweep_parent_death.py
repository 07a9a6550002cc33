"""A sweep killed with SIGKILL (which it cannot catch) stops its workers: each running point
saves its state and its worker exits, and no queued point is started. Replayed with real
processes; every wait polls the files and /proc up to a generous deadline, so a loaded machine
makes the test slower, never wrong."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

ROOT = Path(__file__).resolve().parents[2]


def wait_for(condition, what: str, timeout: float = 600.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} (waited {timeout:g} s)")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _pool_workers(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (_stat(int(entry.name)) or ("", -1))[1] == parent:
            try:
                if b"spawn_main" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _evaluations(metrics: Path) -> int:
    try:
        return max(0, len(metrics.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def test_kill_9_of_a_sweep_stops_its_workers_and_starts_no_queued_point(tmp_path):
    out = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "interp.cli", "sweep", "--preset", "tiny", "--seeds", "0-3"]
    argv += ["--workers", "2", "--set", "steps=100000", "--set", "eval_every=50"]
    argv += ["--set", "n_eval=64", "--no-figures", "--out", str(out)]
    with open(tmp_path / "sweep.log", "w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)
    workers: list[int] = []
    try:
        metrics = [out / f"seed={s}" / "metrics.csv" for s in (0, 1)]
        wait_for(
            lambda: all(_evaluations(m) >= 2 for m in metrics),
            "two evaluations of each running point",
        )
        workers = _pool_workers(proc.pid)
        assert len(workers) == 2, workers
        started = sorted(p.parent.name for p in out.glob("*/config.json"))
        assert started == ["seed=0", "seed=1"]

        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wait_for(
            lambda: not any(_alive(w) for w in workers),
            f"the workers {workers} of the killed sweep to exit",
        )
        assert sorted(p.parent.name for p in out.glob("*/config.json")) == started
        for s in (0, 1):  # each running point saved its state when its worker stopped
            assert (out / f"seed={s}" / "checkpoints" / "resume.pt").is_file()
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
