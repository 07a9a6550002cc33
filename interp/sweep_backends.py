"""How a sweep's points run: in this process, in a local process pool, or as Ray tasks.

Each backend trains a list of :class:`interp.sweep.SweepPoint` into their run directories with
:func:`run_point`, reports every result through a callback as it comes, and returns whether the
sweep was interrupted (Ctrl-C). A point that fails is reported as failed and the others go on.
On Ctrl-C every running point saves its resume state (:func:`interp.training.train` does that on
KeyboardInterrupt) before the backend returns; points not yet started are left alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from interp import checkpoints

if TYPE_CHECKING:
    from interp.sweep import SweepPoint

OnResult = Callable[[dict], None]

__all__ = ["run_point", "run_serial", "run_process", "run_ray", "import_ray", "steps_done"]

RAY_HINT = (
    "the ray backend needs Ray: pip install 'induction-cliff[ray]' (or pip install 'ray>=2.9')"
)


def steps_done(run_dir: Path) -> int:
    """The last step in ``run_dir/metrics.csv`` (0 without metrics)."""
    path = run_dir / "metrics.csv"
    if not path.exists():
        return 0
    try:
        steps = pd.read_csv(path, usecols=["step"])["step"]
    except (ValueError, pd.errors.EmptyDataError):
        return 0
    return int(steps.max()) if len(steps) else 0


def run_point(point: SweepPoint, run_dir: str | os.PathLike, threads: int = 1) -> dict:
    """Train (or resume) one point into ``run_dir``; never raises for a failed run.

    Args:
        point: the point.
        run_dir: its run directory.
        threads: torch CPU threads for this run (``TrainConfig.num_threads``).

    Returns:
        ``{"name", "status": "done"|"failed", "action": "trained"|"resumed", "error", "seconds",
        "steps_done"}``.

    Raises:
        KeyboardInterrupt: on Ctrl-C, after :func:`interp.training.train` saved the state.
    """
    from interp.training import train

    run_dir = Path(run_dir)
    resuming = (run_dir / "checkpoints" / checkpoints.RESUME_NAME).exists()
    action = "resumed" if resuming else "trained"
    cfg = dataclasses.replace(point.train, num_threads=threads)
    start = time.monotonic()
    status, error = "done", ""
    # train() tells how to resume a single run on Ctrl-C; a sweep resumes differently (rerun it).
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            train(point.task, point.model, cfg, run_dir, resume=True, progress=False)
    except KeyboardInterrupt:
        raise
    except Exception as err:  # a failed point is recorded, the others go on
        status, error = "failed", f"{type(err).__name__}: {err}"
    return _result(point, run_dir, status, action, error, round(time.monotonic() - start, 1))


def _result(
    point: SweepPoint,
    run_dir: Path,
    status: str,
    action: str,
    error: str = "",
    seconds: float = float("nan"),
) -> dict:
    return {
        "name": point.name,
        "status": status,
        "action": action,
        "error": error,
        "seconds": seconds,
        "steps_done": steps_done(Path(run_dir)),
    }


def _interrupted(point: SweepPoint, run_dir: Path) -> dict:
    return _result(point, run_dir, "interrupted", "interrupted")


def _failed(point: SweepPoint, run_dir: Path, err: BaseException) -> dict:
    return _result(point, run_dir, "failed", "failed", f"{type(err).__name__}: {err}")


def run_serial(todo: Sequence[SweepPoint], out: Path, threads: int, on_result: OnResult) -> bool:
    """Train the points one after the other in this process (torch's thread count is restored).

    Returns:
        Whether Ctrl-C stopped the sweep (the running point saved its state).
    """
    import torch

    before = torch.get_num_threads()
    try:
        for p in todo:
            try:
                on_result(run_point(p, out / p.name, threads))
            except KeyboardInterrupt:
                on_result(_interrupted(p, out / p.name))
                return True
    finally:
        torch.set_num_threads(before)
    return False


# Process-pool workers ignore Ctrl-C while idle and turn the first one into KeyboardInterrupt
# while training (train() then saves its state); the parent stops them through a shared event
# and SIGINT, so that a Ctrl-C in the terminal and a SIGINT to the parent alone both work.
_STOP = None


def _init_pool_worker(stop, pids) -> None:
    global _STOP
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _STOP = stop
    pids.put(os.getpid())


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _pool_run_point(point: SweepPoint, run_dir: str, threads: int) -> dict | None:
    signal.signal(signal.SIGINT, _interrupt_once)
    try:
        if _STOP is not None and _STOP.is_set():
            return None  # the sweep was interrupted before this point started
        return run_point(point, run_dir, threads)
    except KeyboardInterrupt:
        return _interrupted(point, Path(run_dir))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _future_result(future, point: SweepPoint, out: Path) -> dict | None:
    try:
        return future.result()
    except CancelledError:
        return None
    except Exception as err:  # the worker process died (BrokenProcessPool) or could not start
        return _failed(point, out / point.name, err)


def run_process(
    todo: Sequence[SweepPoint], out: Path, workers: int, threads: int, on_result: OnResult
) -> bool:
    """Train the points in a pool of ``workers`` spawned processes, ``threads`` torch threads each.

    Returns:
        Whether Ctrl-C (in the terminal, or SIGINT to this process) stopped the sweep: running
        points saved their state, points not started were cancelled.
    """
    ctx = multiprocessing.get_context("spawn")
    stop, pids = ctx.Event(), ctx.Queue()
    executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init_pool_worker, initargs=(stop, pids)
    )
    futures = {executor.submit(_pool_run_point, p, str(out / p.name), threads): p for p in todo}
    reported = set()
    interrupted = False
    try:
        try:
            for future in as_completed(futures):
                reported.add(future)
                result = _future_result(future, futures[future], out)
                if result is not None:
                    on_result(result)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for future in futures:
                future.cancel()
            while True:
                try:
                    pid = pids.get_nowait()
                except queue.Empty:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
            for future, p in futures.items():  # running points save their state and return
                if future not in reported:
                    result = _future_result(future, p, out)
                    if result is not None:
                        on_result(result)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        pids.close()
    return interrupted


def import_ray():
    """The ``ray`` module, or a RuntimeError that says how to install it."""
    try:
        import ray
    except ImportError as err:
        raise RuntimeError(RAY_HINT) from err
    return ray


def _ray_run_point(point: SweepPoint, run_dir: str, threads: int) -> dict:
    try:
        return run_point(point, run_dir, threads)
    except KeyboardInterrupt:  # ray.cancel() interrupts a running task this way
        return _interrupted(point, Path(run_dir))


def run_ray(
    todo: Sequence[SweepPoint],
    out: Path,
    workers: int,
    threads: int,
    address: str | None,
    on_result: OnResult,
) -> bool:
    """Train the points as Ray tasks of ``threads`` CPUs each.

    Uses the cluster this process is connected to, else the one at ``address``, else a local
    instance of ``workers * threads`` CPUs (shut down afterwards). The run directories must be
    on a file system that every node sees.

    Returns:
        Whether Ctrl-C stopped the sweep (running tasks were cancelled, which interrupts their
        training and so saves their state).
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address)
        else:
            ray.init(num_cpus=workers * threads, include_dashboard=False)
        started = True
    remote = ray.remote(num_cpus=threads, max_retries=0)(_ray_run_point)
    pending = {remote.remote(p, str(out / p.name), threads): p for p in todo}

    def result_of(ref, p):
        try:
            return ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return _interrupted(p, out / p.name)
        except Exception as err:  # a worker died or the task could not run
            return _failed(p, out / p.name, err)

    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                on_result(result_of(ref, pending.pop(ref)))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)
        for ref, p in pending.items():
            on_result(result_of(ref, p))
        return True
    finally:
        if started:
            ray.shutdown()
    return False
