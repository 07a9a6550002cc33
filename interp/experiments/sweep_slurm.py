"""A sweep's points as SLURM jobs, submitted through submitit (``sweep --backend submitit``).

The points (the units of :func:`interp.experiments.sweep_backends.stack_jobs`) are packed into
jobs of ``points_per_job`` points, submitted as one job array (at most ``array_parallelism`` of
them running at once). A job trains its points in turn into their run directories, skipping the
finished ones and resuming the partial ones, and writes one result per point it trained as JSON,
``SWEEP/slurm-jobs/results/POINT.json`` (:func:`write_result`). The sweep reads those through the
toolkit's bounded JSON reader (:func:`read_result`) and never unpickles what a job returns:
submitit's result pickles in that folder are left unread.

- **Time limit.** SLURM sends SIGUSR2 ``signal_delay_s`` seconds before a job's limit
  (``--signal``, set by submitit). The running point stops at its step boundary and saves its
  resume state (:data:`interp.io.interrupt.STOP_SIGNALS`), then the job hands over to submitit's
  handler, which calls :meth:`SweepJob.checkpoint` (the job itself, a ``DelayedSubmission``) and
  requeues it: it starts again where it stopped.
- **Preemption, cancellation, a lost node.** A job that ended (SIGTERM: its running point saved
  its state) or whose state stays ``PREEMPTED`` (read with ``sacct`` through submitit) with
  points unfinished is cancelled if SLURM still holds it, and those points are resubmitted by the
  sweep in a new job, up to :data:`MAX_RESUBMITS` times each.
- **Ctrl-C or SIGTERM to the sweep** cancels its jobs (their running points save their state).

``local=True`` runs the same jobs with submitit's ``LocalExecutor`` on this machine. Every job's
log (which points it started at step 0 and which it resumed) is in ``SWEEP/slurm-jobs``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from interp.experiments.sweep_backends import OnResult, _interrupted, _result, run_job, steps_done
from interp.io import checkpoints
from interp.io.interrupt import signal_of, sigterm_as_ctrl_c

if TYPE_CHECKING:
    from interp.experiments.sweep_spec import SweepPoint

__all__ = [
    "SlurmOptions",
    "SweepJob",
    "check_available",
    "import_submitit",
    "pack",
    "run_submitit",
    "JOBS_DIR",
]

SUBMITIT_HINT = (
    "--backend submitit needs submitit: pip install 'induction-cliff[slurm]' "
    "(or pip install 'submitit>=1.5')"
)
JOBS_DIR = "slurm-jobs"
"""The submitit folder inside the sweep folder: job scripts, pickles and logs."""
RESULTS_DIR = "results"
"""Inside :data:`JOBS_DIR`: each point's result, ``POINT.json``, written by its job."""
RESULT_KEYS = ("name", "status", "action", "error", "seconds", "steps_done")
"""What a point's result holds (:func:`interp.experiments.sweep_backends.run_point`)."""
MAX_RESUBMITS = 3
"""How many times the sweep resubmits a point whose job ended before it finished."""
PREEMPTED_GRACE_S = 60.0
"""How long a job may stay PREEMPTED (SLURM may requeue it) before the sweep resubmits its
points."""
POLL_S = 1.0
# SLURM states of a job that is not over (it may run again).
_ALIVE = {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "CONFIGURING", "RESIZING", "SUSPENDED"}
_ALIVE |= {"REQUEUE_HOLD", "REQUEUE_FED", "READY", "PREEMPTED"}


@dataclass(frozen=True)
class SlurmOptions:
    """Where and how the jobs of a ``--backend submitit`` sweep run.

    Attributes:
        partition: SLURM partition (None: the cluster's default).
        time_min: time limit of each job, in minutes.
        points_per_job: points trained in turn by one job.
        array_parallelism: jobs of the array running at once.
        signal_delay_s: seconds before the limit at which SLURM sends SIGUSR2.
        local: run the jobs on this machine (submitit's LocalExecutor).
    """

    partition: str | None = None
    time_min: int = 60
    points_per_job: int = 1
    array_parallelism: int = 256
    signal_delay_s: int = 120
    local: bool = False

    def check(self) -> None:
        """Raise ValueError naming the first invalid option."""
        for name, flag, low in (
            ("time_min", "--slurm-time", 1),
            ("points_per_job", "--slurm-points-per-job", 1),
            ("array_parallelism", "--slurm-array-parallelism", 1),
            ("signal_delay_s", "--slurm-signal-delay", 0),
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= low):
                raise ValueError(f"{flag}={value!r} is invalid: must be an integer >= {low}")
        if self.signal_delay_s >= self.time_min * 60:
            raise ValueError(
                f"--slurm-signal-delay={self.signal_delay_s} is invalid: must be shorter than "
                f"--slurm-time ({self.time_min} min)"
            )


def import_submitit():
    """The ``submitit`` module, or a RuntimeError that says how to install it."""
    try:
        import submitit
    except ImportError as err:
        raise RuntimeError(SUBMITIT_HINT) from err
    return submitit


def pack(
    units: Sequence[Sequence[SweepPoint]], points_per_job: int
) -> list[list[list[SweepPoint]]]:
    """Group the units (lists of points trained together) into jobs of up to ``points_per_job``
    points, in order (a unit larger than that is a job of its own)."""
    jobs: list[list[list[SweepPoint]]] = []
    size = 0
    for unit in units:
        if not jobs or size + len(unit) > points_per_job:
            jobs.append([])
            size = 0
        jobs[-1].append(list(unit))
        size += len(unit)
    return jobs


def check_available(opts: SlurmOptions) -> None:
    """Raise ValueError naming an invalid option, RuntimeError (one line) without submitit or,
    unless ``opts.local``, without SLURM's ``srun`` on this machine: before anything is written."""
    import shutil

    opts.check()
    import_submitit()
    if not opts.local and shutil.which("srun") is None:
        raise RuntimeError(
            "--backend submitit: no SLURM here (srun not found); pass --slurm-local to run the "
            "jobs on this machine"
        )


def _fresh(run_dir: Path) -> bool:
    return not (run_dir / "checkpoints" / checkpoints.RESUME_NAME).exists()


class SweepJob:
    """One SLURM job of a sweep: trains its units in turn (submitit's ``Checkpointable``
    protocol: :meth:`checkpoint` resubmits the job itself, which skips the finished points and
    resumes the partial ones)."""

    def __init__(
        self,
        units,
        out: str,
        threads: int,
        plugins: Sequence[str] = (),
        driver: int | None = None,
    ) -> None:
        self.units = [list(u) for u in units]
        self.out, self.threads, self.plugins = str(out), threads, tuple(plugins)
        self.driver = driver
        """The sweep command's pid when the job runs on this machine (``--slurm-local``): the job
        stops, its running point saved, when that process is gone, as a pool's workers die with
        their parent. None on a cluster, whose jobs are the scheduler's and outlive the command."""

    def __call__(self) -> int:
        """Train the units; each point's result goes to :func:`write_result`. Returns how many
        results were written (the sweep reads the files, never this value)."""
        import torch

        from interp.io.plugins import load_plugins

        load_plugins(self.plugins)
        if self.driver is not None:
            _stop_when_gone(self.driver)
        out = Path(self.out)
        requeue = _submitit_handler()  # before this job's own handlers replace it
        results: list[dict] = []
        stopped, before = 0, torch.get_num_threads()
        with sigterm_as_ctrl_c():  # between points too: SIGTERM/SIGUSR1/SIGUSR2 stop the job
            try:
                for unit in self.units:
                    unit = [p for p in unit if steps_done(out / p.name) < p.train.steps]
                    for p in unit:
                        start = "starts at step 0" if _fresh(out / p.name) else "resumes"
                        print(f"point {p.name}: {start}", flush=True)
                    try:
                        done = run_job(unit, out, self.threads) if unit else []
                    except KeyboardInterrupt as err:  # its runs saved their state
                        done = [_interrupted(p, out / p.name) for p in unit]
                        stopped = signal_of(err)
                    for r in done:  # as each unit ends: a job killed later keeps them
                        write_result(out, r)
                    results.extend(done)
                    if stopped:
                        break
            except KeyboardInterrupt as err:
                stopped = signal_of(err)
            finally:
                torch.set_num_threads(before)
        if stopped:
            print(f"stopped by {signal.Signals(stopped).name}, state saved", flush=True)
        if stopped in (signal.SIGUSR1, signal.SIGUSR2) and requeue is not None:
            requeue(stopped, None)  # submitit: checkpoint() and requeue this job, then exit
        return len(results)

    def checkpoint(self):
        """The job itself, to be requeued (submitit calls it on the time-limit signal)."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self)


def _result_path(out: Path, name: str) -> Path:
    return Path(out) / JOBS_DIR / RESULTS_DIR / f"{name}.json"


def write_result(out: Path, result: dict) -> None:
    """Write one point's result (a job's side) through the toolkit's atomic writer."""
    import json

    from interp.io.atomic import write_text_atomic

    path = _result_path(out, result["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({k: result[k] for k in RESULT_KEYS}))


def read_result(out: Path, name: str) -> dict | None:
    """A point's result as its job wrote it (None: none written). A file that is not a result
    (damaged, over the reader's limits, a link, keys missing or of the wrong kind) reads as a
    failed result naming it, never as a crash of the sweep."""
    from interp.io.errors import DamagedFileError, UnsafePathError
    from interp.io.inputs import read_json_object

    path = _result_path(out, name)
    try:
        r = read_json_object(path, missing=None, follow_links=False)
    except (DamagedFileError, UnsafePathError) as err:
        return _bad_result(out, name, str(err).splitlines()[0])
    if r is None:
        return None
    if (
        set(r) != set(RESULT_KEYS)
        or r["name"] != name
        or r["status"] not in ("done", "failed", "interrupted")
        or not isinstance(r["error"], str)
    ):
        return _bad_result(out, name, f"{path} is not a result of point {name}")
    return r


def _bad_result(out: Path, name: str, why: str) -> dict:
    return {
        "name": name,
        "status": "failed",
        "action": "failed",
        "error": why,
        "seconds": float("nan"),
        "steps_done": steps_done(Path(out) / name),
    }


def _stop_when_gone(pid: int, every_s: float = 1.0) -> None:
    """Send this process SIGTERM (its running point saves its state at the next step) once the
    process ``pid`` has ended; a daemon thread polls."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(every_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            except PermissionError:  # alive, another user's: cannot be ours
                return

    threading.Thread(target=watch, daemon=True, name="sweep-driver-watch").start()


def _submitit_handler():
    """submitit's checkpoint-and-requeue handler of this process (None outside a submitit job)."""
    if "submitit" not in __import__("sys").modules:
        return None
    from submitit.core.job_environment import JobEnvironment

    handler = signal.getsignal(JobEnvironment._usr_sig())
    return handler if callable(handler) else None


def _executor(submitit, folder: Path, threads: int, opts: SlurmOptions):
    executor = submitit.AutoExecutor(
        folder=folder, cluster="local" if opts.local else "slurm", slurm_max_num_timeout=1000
    )
    params = {"name": "induction-cliff-sweep", "timeout_min": opts.time_min}
    params["cpus_per_task"] = threads
    if not opts.local:  # locally the signal comes 30 s before the limit (submitit's default)
        params["slurm_signal_delay_s"] = opts.signal_delay_s
        params["slurm_array_parallelism"] = opts.array_parallelism
        if opts.partition:
            params["slurm_partition"] = opts.partition
    executor.update_parameters(**params)
    return executor


def _state(job) -> str:
    with contextlib.suppress(Exception):
        return str(job.state).upper().split()[0]
    return "UNKNOWN"


def _outcome(job, units, out: Path, seen_preempted: dict, local: bool) -> list[dict] | None:
    """The results its points' files hold once the job is over (those it wrote; none for a
    point it did not finish), None while it runs. Its own return value, a pickle, is not read.
    A local job is over once its process has ended (and is reaped: ``done`` polls it); a
    cluster job once it left its result or the scheduler says it is done."""
    over = job.done() if local else job.paths.result_pickle.exists() or job.done()
    if not over and _state(job) == "PREEMPTED":
        first = seen_preempted.setdefault(job.job_id, time.monotonic())
        over = time.monotonic() - first > PREEMPTED_GRACE_S
    if not over:
        return None
    found = (read_result(out, p.name) for unit in units for p in unit)
    return [r for r in found if r is not None]


def _make_gone(job, local: bool, timeout: float = 300.0) -> None:
    """Cancel the job if SLURM still holds it (requeued after a preemption), and wait for it to
    be over, so that none of its points trains twice at once (a local job is over once done)."""
    if local or _state_forced(job) not in _ALIVE:
        return
    job.cancel(check=False)
    end = time.monotonic() + timeout
    while _state_forced(job) in _ALIVE - {"PREEMPTED"} and time.monotonic() < end:
        time.sleep(POLL_S)


def _state_forced(job) -> str:
    with contextlib.suppress(Exception):
        return str(job.watcher.get_state(job.job_id, mode="force")).upper().split()[0]
    return "UNKNOWN"


def run_submitit(
    todo: Sequence[Sequence[SweepPoint]],
    out: Path,
    threads: int,
    opts: SlurmOptions,
    on_result: OnResult,
) -> int:
    """Train the units (lists of points, see ``stack_jobs``) as SLURM jobs through submitit
    (see the module docstring), reporting every point's result through ``on_result``.

    Returns:
        The signal that stopped the sweep (0: none; its jobs were cancelled, their running
        points saved their state).
    """
    from interp.io.plugins import loaded_plugins

    submitit = import_submitit()
    executor = _executor(submitit, Path(out) / JOBS_DIR, threads, opts)
    plugins = tuple(loaded_plugins())
    queue = pack(todo, opts.points_per_job)
    active: dict = {}  # job -> its units
    seen_preempted: dict = {}
    resubmits: Counter = Counter()
    limit = opts.array_parallelism if opts.local else len(queue) + 1_000_000
    driver = os.getpid() if opts.local else None  # local jobs end with this command

    def submit() -> None:
        n = min(len(queue), max(0, limit - len(active)))
        if n:
            groups, queue[:n] = queue[:n], []
            for p in (p for g in groups for unit in g for p in unit):
                _result_path(out, p.name).unlink(missing_ok=True)  # an earlier job's
            jobs = executor.submit_array(
                [SweepJob(g, str(out), threads, plugins, driver) for g in groups]
            )
            active.update(zip(jobs, groups))

    def settle(job, units, results: list[dict]) -> None:
        by_name = {r["name"]: r for r in results}
        again = []
        for unit in units:
            left = []
            for p in unit:
                r = by_name.get(p.name)
                if r is not None and r["status"] in ("done", "failed"):
                    on_result(r)
                elif steps_done(out / p.name) >= p.train.steps:
                    on_result(_result(p, out / p.name, "done", "resumed"))
                elif resubmits[p.name] < MAX_RESUBMITS:
                    resubmits[p.name] += 1
                    left.append(p)
                else:
                    on_result(
                        _result(
                            p,
                            out / p.name,
                            "failed",
                            "failed",
                            f"its job {job.job_id} ended unfinished {MAX_RESUBMITS + 1} times "
                            f"(last state {_state(job)}); see {out / JOBS_DIR}",
                        )
                    )
            if left:
                again.append(left)
        if again:
            _make_gone(job, opts.local)
            queue.extend(pack(again, opts.points_per_job))

    with sigterm_as_ctrl_c():
        try:
            submit()
            while active or queue:
                for job, units in list(active.items()):
                    results = _outcome(job, units, out, seen_preempted, opts.local)
                    if results is not None:
                        del active[job]
                        settle(job, units, results)
                submit()
                if active:
                    time.sleep(POLL_S)
        except KeyboardInterrupt as err:
            for job in active:
                job.cancel(check=False)  # SIGTERM: the running points save their state
            for job, units in active.items():
                end = time.monotonic() + 300.0
                while _outcome(job, units, out, seen_preempted, opts.local) is None:
                    if time.monotonic() > end:
                        break
                    time.sleep(POLL_S)
                done = _outcome(job, units, out, seen_preempted, opts.local) or []
                by_name = {r["name"]: r for r in done}
                for p in (p for unit in units for p in unit):
                    on_result(by_name.get(p.name) or _interrupted(p, out / p.name))
            return signal_of(err)
    return 0
