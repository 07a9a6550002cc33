"""The LLC over a run's checkpoints: ``llc.csv`` (one row per checkpoint, rewritten atomically after
each, so an interrupted estimate resumes where it stopped), which checkpoints, and worker
processes for several checkpoints at once."""

from __future__ import annotations

import errno
import functools
import io
import logging
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from interp.analysis.llc_estimator import (
    LLCConfig,
    LLCEstimate,
    _require_devinterp,
    estimate_llc,
    network_loss,
    run_batches,
)

logger = logging.getLogger("interp.analysis.llc")  # one logger for the LLC modules

LLC_CSV = "llc.csv"

# Columns of llc.csv: results, diagnostics, then the settings that produced them.
SETTINGS = ("epsilon", "nbeta", "localization", "chains", "draws", "burnin", "batch_size")
SETTINGS += ("n_batches", "seed")


def llc_columns(chains: int) -> list[str]:
    """The columns of ``llc.csv`` for ``chains`` chains."""
    return [
        "step",
        "llc_mean",
        "llc_std",
        *(f"llc_chain_{i}" for i in range(chains)),
        "init_loss",
        "mala_acceptance",
        "trace_drift",
        "failed_chains",
        "seconds",
        *SETTINGS,
        "devinterp_version",
        "warning",
    ]


def read_llc_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read ``llc.csv`` (the run directory or the file); empty warnings read as ``""``.

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: the file lacks a column of the format (the message names it and the file).
    """
    path = Path(path)
    if path.is_dir():
        path = path / LLC_CSV
    from interp.io.inputs import read_csv

    df = read_csv(  # limits checked before parsing
        path,
        missing=None,
        keep_default_na=False,
        na_values=["nan", "NaN", ""],
        dtype={"warning": object, "devinterp_version": object},
    )
    if df is None:
        raise FileNotFoundError(errno.ENOENT, f"{path} is missing", str(path))
    needed = ["step", "llc_mean", "llc_std", *SETTINGS, "warning"]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        from interp.io.errors import DamagedFileError

        raise DamagedFileError(f"{path} is not an llc.csv: column(s) {missing} are missing")
    df["warning"] = df["warning"].fillna("").astype(str)
    return df.sort_values("step").reset_index(drop=True)


def write_llc_csv(path: str | os.PathLike, df: pd.DataFrame) -> Path:
    """Write ``llc.csv`` atomically through the run-directory writer (sorted by step)."""
    from interp.io.checkpoints import write_text_atomic

    path = Path(path)
    if path.is_dir():
        path = path / LLC_CSV
    buf = io.StringIO()
    df.sort_values("step").to_csv(buf, index=False, float_format="%.9g")
    write_text_atomic(path, buf.getvalue())
    return path


def parse_steps(text: str | None, available: Sequence[int]) -> list[int]:
    """``"all"`` or ``"a,b,c"`` -> checkpoint steps, checked against the saved ones.

    Raises:
        ValueError: a step is not an integer or has no checkpoint (the message names ``--steps``).
    """
    if text is None or text.strip() == "all":
        return list(available)
    steps = []
    for part in text.split(","):
        part = part.strip()
        try:
            steps.append(int(part))
        except ValueError:
            raise ValueError(f"--steps={text!r} is invalid: {part!r} is not an integer") from None
    missing = [s for s in steps if s not in set(available)]
    if missing:
        raise ValueError(
            f"--steps={text!r} is invalid: no checkpoint at step(s) {missing}; saved: "
            f"{list(available)}"
        )
    return sorted(set(steps))


def _settings_row(cfg: LLCConfig) -> dict:
    return {name: getattr(cfg, name) for name in SETTINGS}


def _check_same_settings(existing: pd.DataFrame, cfg: LLCConfig, path: Path) -> None:
    if existing.empty:
        return
    want = _settings_row(cfg)
    last = existing.iloc[-1]
    for name, value in want.items():
        have = last[name]
        same = math.isclose(float(have), float(value), rel_tol=1e-9, abs_tol=0.0)
        if not same:
            raise ValueError(
                f"{name}={value!r} differs from {path}, which holds estimates with "
                f"{name}={have!r}: use the same settings to resume, or --overwrite"
            )


def llc_over_checkpoints(
    run_dir: str | os.PathLike,
    cfg: LLCConfig = LLCConfig(),  # noqa: B008 (frozen)
    steps: Sequence[int] | None = None,
    *,
    overwrite: bool = False,
    on_result: Callable[[int, LLCEstimate | None], None] | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """Estimate the LLC at checkpoints of a run and record them in ``RUN_DIR/llc.csv``.

    Resumable: steps already in ``llc.csv`` (with the same settings) are skipped; the file is
    rewritten atomically after every checkpoint. Every check (run directory, steps, settings
    against an existing ``llc.csv``, devinterp installed) happens before any sampling.

    Args:
        run_dir: a run directory (:func:`interp.io.rundir.load_run`).
        cfg: SGLD settings.
        steps: checkpoint steps (default: all saved ones).
        overwrite: discard an existing ``llc.csv`` (needed to change settings).
        on_result: called after each checkpoint with ``(step, estimate)``, ``None`` for a skipped
            one (the CLI prints progress and warnings from it).
        workers: checkpoints estimated at once, each in its own spawned process with one torch
            thread (``1``: in this process, with its threads). Each estimate depends only on its
            checkpoint and the settings (the batches and every chain are seeded), so the values
            are those of a one-thread run in this process; results are written as they come,
            ``llc.csv`` sorted by step.

    Returns:
        The whole ``llc.csv`` as a DataFrame.

    Raises:
        ValueError: a bad step, or settings that differ from those in ``llc.csv``.
        ImportError: devinterp is missing.
    """
    from interp.io.rundir import load_run

    run = load_run(run_dir)
    available = run.require_checkpoints()  # none: an error, llc.csv left as it was
    steps = list(available) if steps is None else list(steps)
    bad = [s for s in steps if s not in set(available)]
    if bad:
        raise ValueError(f"steps {bad} have no checkpoint in {run_dir}; saved: {available}")
    cfg = cfg.resolved(run.train_config.batch_size)
    version = _require_devinterp()
    from interp.io.outputs import writing

    # Under the run's lock from before llc.csv is read until its last rewrite: a second llc (or
    # any other writer of the run) is refused with the holder's pid, so no estimate is lost.
    with writing(run_dir):
        return _llc_locked(
            run, run_dir, cfg, steps, available, version, overwrite, on_result, workers
        )


def _llc_locked(run, run_dir, cfg, steps, available, version, overwrite, on_result, workers):
    path = Path(run_dir) / LLC_CSV
    existing = read_llc_csv(path) if path.exists() and not overwrite else pd.DataFrame()
    _check_same_settings(existing, cfg, path)
    chain_cols = [c for c in existing.columns if c.startswith("llc_chain_")]
    if chain_cols and len(chain_cols) != cfg.chains:
        raise ValueError(
            f"chains={cfg.chains} differs from {path}, which holds {len(chain_cols)} chains: use "
            "the same settings to resume, or --overwrite"
        )
    done = set(existing["step"].astype(int)) if not existing.empty else set()
    rows = existing.to_dict("records") if not existing.empty else []
    if isinstance(workers, bool) or not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is invalid: an integer >= 1")
    todo = []
    for step in steps:
        if step in done:
            if on_result is not None:
                on_result(step, None)
        elif step not in todo:
            todo.append(step)

    def record(step: int, est: LLCEstimate) -> None:
        if est.warning:
            logger.warning("LLC at step %d of %s: %s", step, run_dir, est.warning)
        rows.append(_llc_row(step, est, cfg, version))
        rows.sort(key=lambda r: int(r["step"]))
        write_llc_csv(path, pd.DataFrame(rows, columns=llc_columns(cfg.chains)))
        if on_result is not None:
            on_result(step, est)

    # Every checkpoint is read before any estimate: a damaged one fails now, with llc.csv as it was.
    models = {step: run.load_model(step) for step in todo}
    if workers > 1 and len(todo) > 1:
        _estimate_in_pool(run_dir, todo, cfg, min(workers, len(todo)), record)
    else:
        batches = run_batches(run, cfg.batch_size, cfg.n_batches, cfg.seed)
        for step in todo:
            record(step, estimate_llc(models.pop(step), batches, network_loss, cfg))
    return pd.DataFrame(rows, columns=llc_columns(cfg.chains)).sort_values("step")


def _llc_row(step: int, est: LLCEstimate, cfg: LLCConfig, version: str) -> dict:
    """One row of ``llc.csv``."""
    return {
        "step": int(step),
        "llc_mean": est.llc_mean,
        "llc_std": est.llc_std,
        **{f"llc_chain_{i}": v for i, v in enumerate(est.llc_chains)},
        "init_loss": est.init_loss,
        "mala_acceptance": est.mala_acceptance,
        "trace_drift": est.trace_drift,
        "failed_chains": est.failed_chains,
        "seconds": round(est.seconds, 3),
        **_settings_row(cfg),
        "devinterp_version": version,
        "warning": est.warning,
    }


@functools.lru_cache(maxsize=1)
def _worker_run_and_batches(run_dir: str, batch_size: int, n_batches: int, seed: int):
    """A pool worker's run and LLC batches, made once per worker process (the parent's batches)."""
    from interp.io.rundir import load_run

    run = load_run(run_dir)
    return run, run_batches(run, batch_size, n_batches, seed)


def _estimate_at(run_dir: str, step: int, cfg: LLCConfig) -> LLCEstimate:
    """The LLC at one checkpoint, in a pool worker."""
    run, batches = _worker_run_and_batches(run_dir, cfg.batch_size, cfg.n_batches, cfg.seed)
    return estimate_llc(run.load_model(step), batches, network_loss, cfg)


def _estimate_in_pool(run_dir, steps: list[int], cfg: LLCConfig, workers: int, record) -> None:
    """Estimate ``steps`` in a :class:`interp.io.pool.WorkerPool` of ``workers`` one-thread
    processes; ``record`` each result in this process as it arrives. On Ctrl-C or SIGTERM,
    checkpoints not started are cancelled and running ones killed (an interrupted estimate is worth
    nothing; the finished ones are already in ``llc.csv``: run the command again to resume)."""
    from concurrent.futures import as_completed

    from interp.io.pool import WorkerPool

    with WorkerPool(workers, threads=1, on_stop="kill") as pool:
        futures = {pool.submit(_estimate_at, str(run_dir), step, cfg): step for step in steps}
        for future in as_completed(futures):
            record(futures[future], future.result())
