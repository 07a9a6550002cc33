"""One process pool for every parallel command (:class:`interp.io.pool.WorkerPool`): nothing in the
package or the checkout's experiments starts worker processes another way, and each parallel
command killed with SIGKILL mid-run leaves no worker or resource tracker behind and starts no run
afterwards (the sweep's own replays are in tests/interp/test_sweep_parent_death.py, whose helpers
these tests use)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.interp.test_sweep_parent_death import command, kill_9_leaves_nothing, workers_of
from tests.waits import wait_for

ROOT = Path(__file__).resolve().parents[1]
POOL_MODULE = ROOT / "interp" / "io" / "pool.py"
SCANNED = ("interp", "phenomenology", "experiments")

_STARTERS = {"ProcessPoolExecutor", "Pool", "Process", "get_context"}
"""Names that start worker processes (or choose how): concurrent.futures' and multiprocessing's."""


def process_starters(source: str) -> list[str]:
    """``line: name`` of every use of a :data:`_STARTERS` name in ``source``: imported from
    ``concurrent.futures`` or ``multiprocessing``, called or read as an attribute (``mp.Pool``,
    ``ctx.Process``, ``multiprocessing.get_context``) or by a bare name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "concurrent",
            "multiprocessing",
        ):
            found += [f"{node.lineno}: {a.name}" for a in node.names if a.name in _STARTERS]
        elif isinstance(node, ast.Attribute) and node.attr in _STARTERS:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in _STARTERS:
            found.append(f"{node.lineno}: {node.id}")
    return found


def test_the_scan_finds_every_way_to_start_a_pool():
    source = """
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import Pool, Process
mp.get_context("spawn").Pool(2)
mp.Process(target=print)
pool = ProcessPoolExecutor
from concurrent.futures import as_completed, ThreadPoolExecutor
import multiprocessing.util
"""
    assert sorted(process_starters(source)) == [
        "3: ProcessPoolExecutor",
        "4: Pool",
        "4: Process",
        "5: .Pool",
        "5: .get_context",
        "6: .Process",
        "7: ProcessPoolExecutor",
    ]


def test_no_process_pool_outside_the_pool_module():
    offenders = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != POOL_MODULE:
                rel = path.relative_to(ROOT)
                offenders += [f"{rel}:{hit}" for hit in process_starters(path.read_text())]
    assert offenders == []


def _listing(folder: Path):
    return lambda: sorted(p.name for p in folder.glob("*")) if folder.is_dir() else []


def _run_folders(folder: Path) -> list[Path]:
    return [p for p in folder.glob("*") if p.is_dir()] if folder.is_dir() else []


@pytest.mark.faults
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("experiment", ["cope-tasks", "transition-law"])
def test_kill_9_of_reproduce_with_workers_leaves_no_worker_and_starts_no_run(tmp_path, experiment):
    """``reproduce cope-tasks`` (token-task grid) and ``reproduce transition-law`` (the transition
    grid), two workers, killed once both train a run."""
    grid = tmp_path / "runs" / experiment / "quick"
    proc = command(
        *["reproduce", experiment, "--tier", "quick", "--workers", "2", "--no-figures"],
        *["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "results")],
        log=tmp_path / "reproduce.log",
    )
    try:
        wait_for(lambda: len(_run_folders(grid)) >= 2, "two runs in training")
        assert len(workers_of(proc.pid)) == 2
        kill_9_leaves_nothing(proc, _listing(grid))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.faults
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_llc_with_workers_leaves_no_worker_and_writes_no_estimate(tmp_path):
    from tests.interp.tiny_runs import tiny_run

    run = tiny_run(tmp_path / "run")  # checkpoints at 0, 10, ..., 40
    args = ["--chains", "2", "--draws", "100000", "--burnin", "0", "--n-batches", "4"]
    proc = command("llc", str(run), *args, "--workers", "2", log=tmp_path / "llc.log")
    try:
        wait_for(lambda: len(workers_of(proc.pid)) == 2, "two llc workers")
        kill_9_leaves_nothing(proc, lambda: (run / "llc.csv").exists())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
