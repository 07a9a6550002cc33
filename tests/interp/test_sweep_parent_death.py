"""A parallel command killed with SIGKILL (which it cannot catch) takes its pool with it: every
worker and multiprocessing's resource tracker exit within seconds, and no point (no point's
folder) starts after the kill. Replayed with real processes (their pids recorded before the kill,
read back from /proc); every wait for the command's progress polls the files and /proc up to a
generous deadline, so a loaded machine makes the test slower, never wrong. The other commands'
tests are in tests/test_pool_mechanism.py and use the helpers here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.waits import alive, wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

ROOT = Path(__file__).resolve().parents[2]

GONE_S = 30.0
"""A pool's processes are gone this soon after their parent's SIGKILL (they are killed by the
kernel at once; the resource tracker exits as soon as it reads the end of its pipe)."""

QUIET_S = 2.0
"""How long the folders are watched after the kill for a point started late."""


def command(*args: str, log: Path) -> subprocess.Popen:
    """``induction-cliff ARGS`` in a new process, its output into ``log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(log, "w") as stream:
        return subprocess.Popen(
            [sys.executable, "-m", "interp.cli", *args],
            cwd=ROOT,
            env=env,
            stdout=stream,
            stderr=stream,
        )


def _parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    return found


def _command_line(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
    except OSError:
        return ""


def pool_of(parent: int) -> dict[int, str]:
    """Every running process below ``parent`` (its pool's workers, their children and the
    resource tracker): pid -> command line."""
    parents, below, frontier = _parents(), set(), {parent}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - below
        below |= frontier
    return {p: _command_line(p) for p in sorted(below) if alive(p)}


def workers_of(parent: int) -> list[int]:
    """The spawned pool workers of ``parent``."""
    return [p for p, cmd in pool_of(parent).items() if "spawn_main" in cmd]


def kill_9_leaves_nothing(proc: subprocess.Popen, listing) -> dict[int, str]:
    """SIGKILL ``proc``; assert that every process of its pool (recorded before the kill, the
    resource tracker among them) is gone within :data:`GONE_S` and that ``listing()`` (the point
    folders) does not change during :data:`QUIET_S` after the kill. Returns the pool."""
    pool = pool_of(proc.pid)
    assert any("spawn_main" in cmd for cmd in pool.values()), pool
    assert any("resource_tracker" in cmd for cmd in pool.values()), pool
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seen = listing()
    wait_for(
        lambda: not any(alive(p) for p in pool),
        f"exit of the killed command's pool {pool}",
        timeout=GONE_S,
    )
    end = time.monotonic() + QUIET_S
    while time.monotonic() < end:
        assert listing() == seen, "a point started after its command was killed"
        time.sleep(0.05)
    return pool


def _evaluations(metrics: Path) -> int:
    try:
        return max(0, len(metrics.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _points(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("seed=*"))


def test_kill_9_of_a_sweep_stops_its_workers_and_starts_no_queued_point(tmp_path):
    out = tmp_path / "sweep"
    args = ["--set", "steps=100000", "--set", "eval_every=50", "--set", "n_eval=64"]
    proc = command(
        *["sweep", "--preset", "tiny", "--seeds", "0-3", "--workers", "2", *args],
        *["--no-figures", "--out", str(out)],
        log=tmp_path / "sweep.log",
    )
    try:
        metrics = [out / f"seed={s}" / "metrics.csv" for s in (0, 1)]
        saved = [out / f"seed={s}" / "checkpoints" / "resume.pt" for s in (0, 1)]
        # an evaluation of each, and the state it saves (written just after its metrics row)
        wait_for(
            lambda: all(_evaluations(m) >= 1 for m in metrics) and all(p.is_file() for p in saved),
            "an evaluation of each and its saved state",
        )
        assert len(workers_of(proc.pid)) == 2
        assert _points(out) == ["seed=0", "seed=1"]
        kill_9_leaves_nothing(proc, lambda: _points(out))
        assert _points(out) == ["seed=0", "seed=1"]
        for s in (0, 1):  # each running point keeps the state saved at its last evaluation
            assert (out / f"seed={s}" / "checkpoints" / "resume.pt").is_file()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(
    "moment", [("seed=0", 0), ("seed=0", 1), ("seed=1", 0)], ids=["start", "first-eval", "next"]
)
def test_kill_9_between_points_starts_no_further_point(tmp_path, moment):
    """A one-worker sweep of three points of a few steps each, killed as a point starts, after
    its first evaluation, or as the next one starts (about when its worker goes from one point to
    the next): no folder appears afterwards."""
    out = tmp_path / "sweep"
    args = ["--set", "steps=40", "--set", "eval_every=20", "--set", "n_eval=32"]
    proc = command(
        *["sweep", "--preset", "tiny", "--seeds", "0-2", "--workers", "1", *args],
        *["--no-figures", "--out", str(out)],
        log=tmp_path / "sweep.log",
    )
    try:
        point, evaluations = moment
        wait_for(
            lambda: (
                (out / point).is_dir() and _evaluations(out / point / "metrics.csv") >= evaluations
            ),
            f"{point} with {evaluations} evaluations",
            every=0.005,
        )
        kill_9_leaves_nothing(proc, lambda: _points(out))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
