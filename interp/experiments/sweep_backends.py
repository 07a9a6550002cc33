"""How a sweep's points run: in this process, in a local process pool, or as Ray tasks.

Each backend trains a list of jobs into their run directories with :func:`run_job` (a job is one
:class:`interp.experiments.sweep.SweepPoint`, or several seeds of one config trained stacked in one
process, see :func:`stack_jobs`), reports every result through a callback as it comes, and returns
the signal that stopped the sweep (0: none; SIGINT for Ctrl-C, SIGTERM). A point that fails is
reported as failed and the others go on. On Ctrl-C or SIGTERM every running point saves its resume
state (:func:`interp.train.training.train` does that on KeyboardInterrupt) before the backend
returns; points not yet started are left alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

from interp.io import checkpoints
from interp.io.pool import NotStarted, WorkerPool, check_start, signal_of

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
    check_start()  # in a pool worker: its parent alive and no stop asked, before any folder
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
    check_start()  # in a pool worker: its parent alive and no stop asked, before any folder
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
) -> int:
    """Train the jobs (lists of points, see :func:`stack_jobs`) one after the other in this
    process (torch's thread count is restored).

    Returns:
        The signal that stopped the sweep (0: none; the running point saved its state).
    """
    import torch

    before = torch.get_num_threads()
    try:
        for job in todo:
            try:
                for result in run_job(job, out, threads):
                    on_result(result)
            except KeyboardInterrupt as err:
                for p in job:
                    on_result(_interrupted(p, out / p.name))
                return signal_of(err)
    finally:
        torch.set_num_threads(before)
    return 0


def _future_results(future, job: list[SweepPoint], out: Path) -> list[dict]:
    try:
        return future.result()
    except (CancelledError, NotStarted):
        return []  # the sweep stopped before this job started: its points are left alone
    except KeyboardInterrupt:  # the job's runs saved their state
        return [_interrupted(p, out / p.name) for p in job]
    except Exception as err:  # the worker process died (BrokenProcessPool) or could not start
        return [_failed(p, out / p.name, err) for p in job]


def run_process(
    todo: Sequence[Sequence[SweepPoint]],
    out: Path,
    workers: int,
    threads: int,
    on_result: OnResult,
) -> int:
    """Train the jobs (lists of points, see :func:`stack_jobs`) in a
    :class:`interp.io.pool.WorkerPool` of ``workers`` processes, ``threads`` torch threads each
    (its workers die with this process and start no point after it is gone).

    Returns:
        The signal that stopped the sweep (0: none): Ctrl-C (in the terminal, or SIGINT to this
        process) or SIGTERM to this process. Running points saved their state, points not started
        were not started.
    """
    with WorkerPool(workers, threads=threads) as pool:
        futures = {pool.submit(run_job, list(j), str(out), threads): j for j in todo}
        reported = set()
        try:
            for future in as_completed(futures):
                reported.add(future)
                for result in _future_results(future, futures[future], out):
                    on_result(result)
        except KeyboardInterrupt as err:
            pool.stop()
            for future, job in futures.items():  # running jobs save their state and return
                if future not in reported:
                    for result in _future_results(future, job, out):
                        on_result(result)
            return signal_of(err)
    return 0


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
) -> int:
    """Train the points as Ray tasks of ``threads`` CPUs each.

    Uses the cluster this process is connected to, else the one at ``address``, else a local
    instance of ``workers * threads`` CPUs (shut down afterwards). The run directories must be
    on a file system that every node sees.

    Returns:
        The signal that stopped the sweep (0: none; running tasks were cancelled, which
        interrupts their training and so saves their state).
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
    except KeyboardInterrupt as err:
        for ref in pending:
            ray.cancel(ref)
        for ref, job in pending.items():
            for result in results_of(ref, job):
                on_result(result)
        return signal_of(err)
    finally:
        if started:
            ray.shutdown()
    return 0
