"""Sweeps: one run per point of a grid of task, model and training parameters, times seeds.

A sweep is a base preset, a grid (config field -> values, fields addressed as ``--set`` addresses
them: ``K``, ``B``, ``eps``, ``lr``, ``task.N``, ...), overrides applied to every point, and seeds.
Its points are the Cartesian product of the grid's values and the seeds. Every point is validated
before any training starts, and trains into its own run directory under the sweep's folder::

    sweep/
      sweep.json              the sweep: spec and every point's configs (a rerun must match it)
      status.json             how each point last ended (done / failed with the error / interrupted)
      summary.csv             one row per point: grid values, seed, final accuracies, transition
      summary_over_seeds.csv  mean and std over seeds for each grid point
      figures/phase_diagram.{png,pdf,html,csv}
      K=128_B=0_seed=0/       a run directory (docs/CONTRACT.md), one per point
      ...

Running a sweep again resumes it: finished points are skipped, interrupted ones continue from
their resume state (``train(..., resume=True)``), the rest start.

Two conventions of the grid:

- A value that names another config field is a reference: ``{"N": (2, 4, 8), "L": ("N", 32)}``
  gives the points with ``L = N`` and those with ``L = 32`` (the paper's L = N experiment). The
  point's name and the summary keep the name (``L=N``).
- ``B = 0`` means no bursty sequences (docs/science.md section 1): such a point gets
  ``p_B = p_C = 0`` unless the grid itself sets them.

Backends: ``process`` (a local process pool, the default), ``serial`` (in this process, for
debugging) and ``ray`` (a Ray cluster, or a local Ray instance; ``pip install
'induction-cliff[ray]'``). With Ray on several machines the sweep folder must be on a file system
that every node sees, and the package must be installed on every node. ``submitit`` runs them as
SLURM jobs (:mod:`interp.experiments.sweep_slurm`; ``pip install 'induction-cliff[slurm]'``),
requeued at their time limit and resubmitted after a preemption (docs/slurm.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.experiments.sweep_backends import (
    import_ray,
    run_job,
    run_point,
    run_process,
    run_ray,
    run_serial,
    stack_jobs,
    steps_done,
)
from interp.experiments.sweep_slurm import SlurmOptions, check_available, run_submitit
from interp.experiments.sweep_spec import (
    _FREE_TRAIN_FIELDS,
    BACKENDS,
    MANIFEST,
    STATUS,
    SUMMARY,
    SUMMARY_OVER_SEEDS,
    SweepDirectoryError,
    SweepPoint,
    SweepSpec,
    _manifest,
    _read_status,
    load_manifest,
    parse_grid,
    parse_seeds,
    point_dir,
)
from interp.experiments.sweep_summary import (
    aggregate_seeds,
    summarize_sweep,
    write_summary,
    write_sweep_figures,
)
from interp.io import checkpoints
from interp.io.interrupt import Interrupted
from interp.io.paths import check_no_links
from interp.io.rundir import (
    LOCK_NAME,
    RunLock,
    classify,
    read_config,
    remove_run_files,
)
from interp.model.network import canonical_model_dict

_log = logging.getLogger(__name__)

__all__ = [
    "SweepSpec",
    "SweepPoint",
    "SweepDirectoryError",
    "SlurmOptions",
    "BACKENDS",
    "run_sweep",
    "run_point",
    "run_job",
    "stack_jobs",
    "summarize_sweep",
    "aggregate_seeds",
    "write_summary",
    "write_sweep_figures",
    "load_manifest",
    "parse_grid",
    "parse_seeds",
]


def _comparable(configs: Mapping) -> dict:
    train = {k: v for k, v in configs.get("train", {}).items() if k not in _FREE_TRAIN_FIELDS}
    model = canonical_model_dict(configs.get("model"))  # an old config.json's flat rope_* too
    return {"task": configs.get("task"), "model": model, "train": train}


def _first_difference(a: Mapping, b: Mapping) -> str:
    for group in ("task", "model", "train"):
        ga, gb = a.get(group) or {}, b.get(group) or {}
        for k in sorted(set(ga) | set(gb)):
            if ga.get(k) != gb.get(k):
                return f"{group}.{k} {ga.get(k)!r} there, {gb.get(k)!r} here"
    return "the same configs"


def _check_manifest(out: Path, old: dict, new: dict) -> None:
    old_points = {p["name"]: p for p in old.get("points", [])}
    new_points = {p["name"]: p for p in new["points"]}
    spec = old.get("spec", {})
    grid = dict(spec.get("grid", []))
    said = (
        f"{out} holds a different sweep (preset {spec.get('preset')!r}, grid {grid}, "
        f"seeds {spec.get('seeds')}, --set {spec.get('overrides')})"
    )
    hint = (
        "rerun that sweep's command (or `induction-cliff sweep --out DIR`) to resume it, choose "
        "another --out, or pass --overwrite to delete its runs and start again"
    )
    if list(old_points) != list(new_points):
        gone = [n for n in old_points if n not in new_points]
        added = [n for n in new_points if n not in old_points]
        raise SweepDirectoryError(
            f"{said}: its points differ (only there: {gone[:3]}, only here: {added[:3]}); {hint}"
        )
    for name, p in new_points.items():
        if _comparable(old_points[name]) != _comparable(p):
            diff = _first_difference(_comparable(old_points[name]), _comparable(p))
            raise SweepDirectoryError(f"{said}: point {name} differs ({diff}); {hint}")


def _check_run_dirs(out: Path, points: Sequence[SweepPoint]) -> None:
    """Existing run directories must hold the point's run (a resumption changes nothing else)."""
    for p in points:
        run_dir = point_dir(out, p.name)
        what = classify(run_dir)
        if what in ("absent", "empty"):
            continue
        if what != "run":
            raise SweepDirectoryError(
                f"{run_dir} is not a run directory of this sweep ({what}); move it away, or pass "
                "--overwrite to delete the sweep's runs"
            )
        there, _ = read_config(run_dir / "config.json")
        if _comparable(there) != _comparable(p.configs_dict()):
            raise SweepDirectoryError(
                f"{out / p.name} holds a run with a different config "
                f"({_first_difference(_comparable(there), _comparable(p.configs_dict()))}); "
                "pass --overwrite to start the sweep again, or choose another --out"
            )


def _remove_sweep(out: Path, names: Sequence[str]) -> None:
    """Delete what a sweep wrote into ``out``: the run files of its points' run directories (a
    point directory that is not a run is left alone), its own files and its figures. Every name
    is checked by :func:`point_dir` first, so nothing outside ``out`` is touched."""
    dirs = [point_dir(out, name) for name in names]  # all checked before anything is deleted
    for name in (MANIFEST, STATUS, SUMMARY, SUMMARY_OVER_SEEDS, "figures"):
        check_no_links(out, name)  # a link is refused, never followed nor deleted
    for run_dir in dirs:
        if classify(run_dir) in ("run", "broken"):
            remove_run_files(run_dir)
            with contextlib.suppress(OSError):
                if (run_dir / LOCK_NAME).is_file():
                    (run_dir / LOCK_NAME).unlink()
                run_dir.rmdir()  # only if nothing else is left in it
    for name in (MANIFEST, STATUS, SUMMARY, SUMMARY_OVER_SEEDS):
        path = out / name
        if path.is_symlink() or path.is_file():
            path.unlink()
    figures = out / "figures"
    if figures.is_dir() and not figures.is_symlink():
        for p in figures.iterdir():
            if p.name.startswith("phase_diagram") and (p.is_file() or p.is_symlink()):
                p.unlink()
        with contextlib.suppress(OSError):
            figures.rmdir()


def _prepare(out: Path, spec: SweepSpec, points: Sequence[SweepPoint], overwrite: bool) -> None:
    new = _manifest(spec, points)
    if out.exists() and not (out / MANIFEST).exists():
        _prepare_check_foreign(out, points)
    if overwrite and (out / MANIFEST).exists():
        old_names = [p["name"] for p in load_manifest(out).get("points", [])]
        _remove_sweep(out, [*old_names, *(p.name for p in points)])
    elif (out / MANIFEST).exists():
        _check_manifest(out, load_manifest(out), new)
    _check_run_dirs(out, points)
    out.mkdir(parents=True, exist_ok=True)
    checkpoints.write_text_atomic(out / MANIFEST, json.dumps(new, indent=1) + "\n")


def run_sweep(
    spec: SweepSpec,
    out_dir: str | os.PathLike,
    *,
    backend: str = "process",
    workers: int | None = None,
    threads_per_worker: int = 1,
    stack: int = 1,
    ray_address: str | None = None,
    slurm: SlurmOptions | None = None,
    overwrite: bool = False,
    figures: bool = True,
    formats: Sequence[str] = ("png", "pdf", "html"),
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run every point of a sweep that is not finished, then write the summary and the figure.

    Args:
        spec: the sweep.
        out_dir: the sweep folder (one run directory per point inside).
        backend: ``process`` (local process pool), ``serial`` (this process), ``ray`` or
            ``submitit`` (SLURM jobs, see ``slurm``).
        workers: concurrent runs (default ``os.cpu_count() // threads_per_worker``); with Ray,
            the CPUs of the local instance it starts (ignored on an existing cluster).
        threads_per_worker: torch CPU threads of each run (Ray: CPUs reserved per task).
        stack: train up to this many seeds of one config together in one worker
            (:func:`interp.train.training.train_many`; the run directories are the same). On a
            2-core CPU it adds ~5-8% to one-model-per-process workers; on a GPU it is the main lever
            (``benchmarks/bench_many.py``). Configs that cannot stack train alone.
        ray_address: address of a running Ray cluster (default: the one this process is connected
            to, or a new local instance).
        slurm: the jobs of the ``submitit`` backend (default :class:`SlurmOptions()`).
        overwrite: delete what a previous sweep wrote into ``out_dir`` and start again.
        figures: write the phase-diagram figure into ``out_dir/figures``.
        formats: figure formats (static ones fall back to HTML, with a warning, without Chromium).
        log: where progress lines go (default: the ``interp.experiments.sweep`` logger at INFO,
            which the command line shows on standard error).

    Returns:
        The summary (see :func:`summarize_sweep`), also written to ``summary.csv``.

    Raises:
        ValueError: an invalid point (before anything is trained) or argument.
        SweepDirectoryError: ``out_dir`` holds a different sweep and ``overwrite`` is False.
        interp.io.interrupt.Interrupted: on Ctrl-C or SIGTERM (its ``signum``), after every
            running point saved its state and the summary was written; running the sweep again
            resumes it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: allowed values are {BACKENDS}")
    slurm = slurm or SlurmOptions()
    on_cluster = ray_address is not None or (backend == "submitit" and not slurm.local)
    if not on_cluster:  # a cluster's cores are its own, not this machine's
        from interp.train.threads import check_thread_counts

        check_thread_counts(threads_per_worker, workers, threads_name="threads_per_worker")
    elif not (isinstance(threads_per_worker, int) and threads_per_worker >= 1):
        raise ValueError(f"threads_per_worker={threads_per_worker!r} is invalid: must be >= 1")
    if not (isinstance(stack, int) and stack >= 1):
        raise ValueError(f"stack={stack!r} is invalid: must be an integer >= 1")
    if workers is not None and not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is invalid: must be >= 1 or None")
    if backend == "ray":
        import_ray()  # fail before writing anything
    if backend == "submitit":
        check_available(slurm)
    log = log or _log.info  # the CLI shows interp's INFO lines on stderr
    out = Path(out_dir)
    points = spec.points()  # validates every point before any work
    if backend != "ray" and not on_cluster:  # a cluster's nodes may have a device we lack
        from interp.config.train_config import check_device

        for train in {(p.train.device, p.train.backend): p.train for p in points}.values():
            check_device(train)  # once per device and backend
    if stack > 1:
        from interp.model.compiled import compiles_on

        if any(p.train.backend == "compiled" and compiles_on(p.train.device) for p in points):
            raise ValueError(
                f"stack={stack} is invalid here: the points train with backend='compiled' on "
                "the CPU, one model per process; add --set backend=fast to stack them"
            )
    if out.exists() and not out.is_dir():
        raise SweepDirectoryError(f"{out} exists and is not a directory")
    if out.is_dir() and not (out / MANIFEST).exists():
        _prepare_check_foreign(out, points)  # refused before even the lock file is made
    out.mkdir(parents=True, exist_ok=True)
    # One sweep driver per folder; each point's run directory has its own lock too.
    how = _Execution(backend, workers, threads_per_worker, stack, ray_address, slurm)
    with RunLock(out):
        return _run_sweep_locked(spec, out, points, how, overwrite, figures, formats, log)


@dataclass(frozen=True)
class _Execution:
    """Where and how a sweep's points train (the validated arguments of :func:`run_sweep`)."""

    backend: str
    workers: int | None
    threads_per_worker: int
    stack: int
    ray_address: str | None
    slurm: SlurmOptions


def _prepare_check_foreign(out: Path, points: Sequence[SweepPoint] = ()) -> None:
    """Refuse a non-empty folder that is not a sweep: only the lock file and this sweep's own
    point directories (checked by :func:`_check_run_dirs`) may be there already."""
    mine = {p.name for p in points}
    others = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME and p.name not in mine)
    if others:
        raise SweepDirectoryError(
            f"{out} is not empty and is not a sweep folder (no {MANIFEST}; it holds "
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); nothing was "
            "written: choose a new or empty --out"
        )


def _run_sweep_locked(spec, out, points, how: _Execution, overwrite, figures, formats, log):
    _prepare(out, spec, points, overwrite)
    backend, threads_per_worker, stack = how.backend, how.threads_per_worker, how.stack
    workers, ray_address = how.workers, how.ray_address

    todo, n_resume = [], 0
    for p in points:
        if steps_done(out / p.name) >= p.train.steps:
            continue
        todo.append(p)
        n_resume += (out / p.name / "checkpoints" / checkpoints.RESUME_NAME).exists()
    status = _read_status(out)
    for p in points:
        if p not in todo:
            status[p.name] = {"status": "done", "action": "skipped", "error": ""}
    jobs = stack_jobs(todo, stack)
    workers = max(1, workers or (os.cpu_count() or 1) // threads_per_worker)
    if backend == "process":
        workers = min(workers, max(1, len(jobs)))
    where = {
        "process": f"{workers} worker process(es) x {threads_per_worker} thread(s)",
        "serial": "this process",
        "ray": f"Ray ({ray_address or 'local or connected'}), {threads_per_worker} CPU(s) per run",
        "submitit": f"{'local ' if how.slurm.local else ''}SLURM jobs of up to "
        f"{how.slurm.points_per_job} point(s) x {threads_per_worker} CPU(s) (submitit)",
    }[backend]
    log(
        f"sweep {out}: {len(points)} point(s); {len(points) - len(todo)} finished (skipped), "
        f"{n_resume} to resume, {len(todo) - n_resume} to train; on {where}"
        + (f", in {len(jobs)} job(s) of up to {stack} stacked seeds" if stack > 1 else "")
    )

    done_count = 0

    def on_result(result: dict) -> None:
        nonlocal done_count
        done_count += 1
        status[result["name"]] = {k: result[k] for k in ("status", "action", "error", "seconds")}
        checkpoints.write_json_atomic(out / STATUS, status)
        said = {"done": "done", "failed": "FAILED", "interrupted": "interrupted"}[result["status"]]
        extra = f": {result['error']}" if result["error"] else ""
        seconds = result["seconds"]
        took = (
            f" in {seconds:.0f} s" if isinstance(seconds, float) and math.isfinite(seconds) else ""
        )
        if result["status"] == "interrupted":
            said = f"interrupted, state saved (metrics up to step {result['steps_done']})"
        else:
            said = f"{result['action']}, {said} at step {result['steps_done']}{took}{extra}"
        log(f"[{done_count}/{len(todo)}] {result['name']}: {said}")

    checkpoints.write_json_atomic(out / STATUS, status)
    stopped_by = 0  # the signal that stopped the sweep
    if todo:
        if backend == "serial":
            stopped_by = run_serial(jobs, out, threads_per_worker, on_result)
        elif backend == "process":
            stopped_by = run_process(jobs, out, workers, threads_per_worker, on_result)
        elif backend == "submitit":
            stopped_by = run_submitit(jobs, out, threads_per_worker, how.slurm, on_result)
        else:
            stopped_by = run_ray(jobs, out, workers, threads_per_worker, ray_address, on_result)
    summary = summarize_sweep(out)
    written = write_summary(out, summary)
    log(f"wrote {', '.join(str(p) for p in written)}")
    if stopped_by:
        log(
            f"interrupted: every running point saved its state. Resume with the same command "
            f"(or `induction-cliff sweep --out {out}`); finished points are skipped."
        )
        raise Interrupted(stopped_by)
    failed = summary[summary["status"] == "failed"]
    if len(failed):
        log(f"{len(failed)} point(s) failed (the others went on): {list(failed['point'])}")
    if figures:
        for path in write_sweep_figures(out, summary, formats, log=log):
            log(f"wrote {path}")
    return summary


# ---------------------------------------------------------------------------------------------
