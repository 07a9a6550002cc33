"""How a sweep's points run: in this process, in a local process pool, or as Ray tasks.

Each backend trains a list of jobs into their run directories with :func:`run_job` (a job is one
:class:`interp.experiments.sweep.SweepPoint`, or several seeds of one config trained stacked in one
process, see :func:`stack_jobs`), reports every result through a callback as it comes, and returns
whether the sweep was interrupted (Ctrl-C). A point that fails is reported as failed and the others
go on. On Ctrl-C every running point saves its resume state (:func:`interp.train.training.train`
does that on KeyboardInterrupt) before the backend returns; points not yet started are left alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import json
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

from interp.io import checkpoints
from interp.io.interrupt import sigterm_as_ctrl_c
from interp.io.plugins import load_plugins, loaded_plugins

if TYPE_CHECKING:
    from interp.experiments.sweep_spec import SweepPoint

OnResult = Callable[[dict], None]

__all__ = [
    "run_point",
    "run_job",
    "stack_jobs",
    "run_serial",
    "run_process",
    "run_ray",
    "import_ray",
    "steps_done",
]

RAY_HINT = (
    "the ray backend needs Ray: pip install 'induction-cliff[ray]' (or pip install 'ray>=2.9')"
)


def steps_done(run_dir: Path) -> int:
    """The last step in ``run_dir/metrics.csv`` (0 without metrics)."""
    from interp.io.rundir import RunDirectoryError, read_metrics

    try:
        frame = read_metrics(Path(run_dir) / "metrics.csv").frame
    except RunDirectoryError:
        return 0
    return int(frame["step"].max()) if len(frame) else 0


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
        KeyboardInterrupt: on Ctrl-C, after :func:`interp.train.training.train` saved the state.
    """
    from interp.experiments.standard import train

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


def run_job(job: Sequence[SweepPoint], out: str | os.PathLike, threads: int = 1) -> list[dict]:
    """Train (or resume) a job: one point, or several seeds of one config trained together with
    :func:`interp.train.training.train_many` (see :func:`stack_jobs`); never raises for a failed
    run.

    Stacked points that cannot train together (their resume states stand at different steps) are
    trained one after the other instead.

    Returns:
        One result per point (as :func:`run_point`).

    Raises:
        KeyboardInterrupt: on Ctrl-C, after every run of the job saved its state.
    """
    from interp.experiments.standard import train_many
    from interp.io.rundir import RunDirectoryError

    out = Path(out)
    if len(job) == 1:
        return [run_point(job[0], out / job[0].name, threads)]
    first = job[0]
    dirs = [out / p.name for p in job]
    resuming = [(d / "checkpoints" / checkpoints.RESUME_NAME).exists() for d in dirs]
    cfg = dataclasses.replace(first.train, num_threads=threads)
    start = time.monotonic()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            train_many(
                first.task,
                first.model,
                cfg,
                [p.seed for p in job],
                dirs,
                resume=True,
                progress=False,
            )
    except KeyboardInterrupt:
        raise
    except RunDirectoryError as err:
        if "different steps" not in str(err):
            return [_failed(p, d, err) for p, d in zip(job, dirs)]
        return [run_point(p, d, threads) for p, d in zip(job, dirs)]
    except Exception as err:  # a failed job is recorded, the others go on
        return [_failed(p, d, err) for p, d in zip(job, dirs)]
    seconds = round(time.monotonic() - start, 1)
    return [
        _result(p, d, "done", "resumed" if r else "trained", "", seconds)
        for p, d, r in zip(job, dirs, resuming)
    ]


def stack_jobs(points: Sequence[SweepPoint], stack: int) -> list[list[SweepPoint]]:
    """Group the points into jobs of up to ``stack`` seeds of the same config that
    :func:`interp.train.training.train_many` can train together (others stay alone)."""
    from interp.model.backends import stacks
    from interp.model.network import InductionNet
    from interp.model.stacked import supports_stacking

    if stack <= 1:
        return [[p] for p in points]
    groups: dict[str, list[SweepPoint]] = {}
    jobs: list[list[SweepPoint]] = []
    for p in points:
        stackable = (
            stacks(p.train.backend, p.train.device)
            and p.train.intervention is None
            and supports_stacking(InductionNet(p.model, seed=None))
        )
        if not stackable:
            jobs.append([p])
            continue
        key = json.dumps(
            {**p.configs_dict(), "train": {**p.configs_dict()["train"], "seed": None}},
            sort_keys=True,
            default=str,
        )
        groups.setdefault(key, []).append(p)
    for group in groups.values():
        jobs.extend(group[i : i + stack] for i in range(0, len(group), stack))
    return jobs


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


def run_serial(
    todo: Sequence[Sequence[SweepPoint]], out: Path, threads: int, on_result: OnResult
) -> bool:
    """Train the jobs (lists of points, see :func:`stack_jobs`) one after the other in this
    process (torch's thread count is restored).

    Returns:
        Whether Ctrl-C stopped the sweep (the running point saved its state).
    """
    import torch

    before = torch.get_num_threads()
    try:
        for job in todo:
            try:
                for result in run_job(job, out, threads):
                    on_result(result)
            except KeyboardInterrupt:
                for p in job:
                    on_result(_interrupted(p, out / p.name))
                return True
    finally:
        torch.set_num_threads(before)
    return False


# Process-pool workers ignore Ctrl-C while idle and turn the first one into KeyboardInterrupt
# while training (train() then saves its state); the parent stops them through a shared event
# and SIGINT, so that a Ctrl-C in the terminal and a SIGINT to the parent alone both work.
# A worker also dies with its parent, even one killed with SIGKILL that stops nothing: the kernel
# sends it SIGINT (Linux), its running point saves its state, and it exits instead of training
# the points still queued; it checks its parent before starting each point too.
_STOP = None
_PARENT: int | None = None
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _orphaned() -> bool:
    """Whether the sweep process that started this worker has died."""
    return _PARENT is not None and os.getppid() != _PARENT


def _idle_sigint(signum, frame) -> None:
    if _orphaned():
        os._exit(1)  # the sweep died: nothing runs here, nobody waits for a result


def _die_with_parent(parent: int) -> None:
    global _PARENT
    _PARENT = parent
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)
    if _orphaned():  # the parent died before the request above
        os._exit(1)


def _init_pool_worker(stop, pids, plugins=(), parent: int | None = None) -> None:
    global _STOP
    signal.signal(signal.SIGINT, _idle_sigint)
    if parent is not None:
        _die_with_parent(parent)
    load_plugins(plugins)  # the parent's --plugin modules: their encodings and configs unpickle
    _STOP = stop
    pids.put(os.getpid())


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one does not cut the saving short
    raise KeyboardInterrupt


_INTERRUPTED = False  # this worker was sent SIGINT: it starts no further point


def _pool_run_job(job: list[SweepPoint], out: str, threads: int) -> list[dict]:
    global _INTERRUPTED
    if _orphaned():
        os._exit(1)  # never start a point of a sweep that died
    signal.signal(signal.SIGINT, _interrupt_once)
    try:
        if _INTERRUPTED or (_STOP is not None and _STOP.is_set()):
            return []  # the sweep was interrupted before this job started
        return run_job(job, out, threads)
    except KeyboardInterrupt:
        # Ctrl-C or the sweep's death. The kernel signals a dying parent's children when its
        # first thread ends, while its other threads may still hold it alive for a moment (the
        # parent pid is unchanged then): so an interrupted worker never starts another point.
        _INTERRUPTED = True
        return [_interrupted(p, Path(out) / p.name) for p in job]
    finally:
        signal.signal(signal.SIGINT, _idle_sigint)
        if _orphaned():
            os._exit(1)  # its state is saved; the points still queued are not started


def _future_results(future, job: list[SweepPoint], out: Path) -> list[dict]:
    try:
        return future.result()
    except CancelledError:
        return []
    except Exception as err:  # the worker process died (BrokenProcessPool) or could not start
        return [_failed(p, out / p.name, err) for p in job]


def run_process(
    todo: Sequence[Sequence[SweepPoint]],
    out: Path,
    workers: int,
    threads: int,
    on_result: OnResult,
) -> bool:
    """Train the jobs (lists of points, see :func:`stack_jobs`) in a pool of ``workers`` spawned
    processes, ``threads`` torch threads each.

    Returns:
        Whether Ctrl-C (in the terminal, or SIGINT to this process) or SIGTERM to this process
        stopped the sweep: running points saved their state, points not started were cancelled.
    """
    with sigterm_as_ctrl_c():
        return _run_pool(todo, out, workers, threads, on_result)


def _run_pool(todo, out: Path, workers: int, threads: int, on_result: OnResult) -> bool:
    ctx = multiprocessing.get_context("spawn")
    stop, pids = ctx.Event(), ctx.Queue()
    executor = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=ctx,
        initializer=_init_pool_worker,
        initargs=(stop, pids, tuple(loaded_plugins()), os.getpid()),
    )
    futures = {executor.submit(_pool_run_job, list(j), str(out), threads): j for j in todo}
    reported = set()
    interrupted = False
    try:
        try:
            for future in as_completed(futures):
                reported.add(future)
                for result in _future_results(future, futures[future], out):
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
            for future, job in futures.items():  # running jobs save their state and return
                if future not in reported:
                    for result in _future_results(future, job, out):
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


def _ray_run_job(job: list[SweepPoint], out: str, threads: int) -> list[dict]:
    try:
        return run_job(job, out, threads)
    except KeyboardInterrupt:  # ray.cancel() interrupts a running task this way
        return [_interrupted(p, Path(out) / p.name) for p in job]


def run_ray(
    todo: Sequence[Sequence[SweepPoint]],
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
    remote = ray.remote(num_cpus=threads, max_retries=0)(_ray_run_job)
    pending = {remote.remote(list(j), str(out), threads): j for j in todo}

    def results_of(ref, job):
        try:
            return ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return [_interrupted(p, out / p.name) for p in job]
        except Exception as err:  # a worker died or the task could not run
            return [_failed(p, out / p.name, err) for p in job]

    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                for result in results_of(ref, pending.pop(ref)):
                    on_result(result)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)
        for ref, job in pending.items():
            for result in results_of(ref, job):
                on_result(result)
        return True
    finally:
        if started:
            ray.shutdown()
    return False
