"""The curves the dynamics models are fitted to: a run directory's metrics and task, a curve's
clean columns, the transition seen on it and whether it has a plateau at all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from interp.io.curves import MAX_CURVE_VALUE  # the one curve check's bound

__all__ = [
    "MAX_CURVE_VALUE",
    "MIN_POINTS",
    "MIN_RELATIVE_CHANGE",
    "PAPER_TASK",
    "check_values",
    "read_run",
    "observed_transition",
    "plateau_problem",
]

MIN_POINTS = 8
"""Fewest evaluations a fit accepts (fewer is an error, not a fit)."""

MIN_RELATIVE_CHANGE = 1e-6
"""Least change (range over level, the level at least 1) of a curve to fit: below it, what
moves is rounding noise (a float32 metric's resolution is about 1e-7 of its value)."""

PAPER_TASK = {"L": 32, "N": 8, "B": 2}
"""The paper's task (Fig. 1d / Fig. 3 evaluation sets), the default for a plain curve."""


# ---- curves, run directories and forecasts ----------------------------------------------------


def read_run(run_dir) -> tuple[pd.DataFrame, dict]:
    """Metrics and task of a run directory (opened with :func:`interp.io.rundir.load_run`)
    or of a :class:`~interp.io.rundir.Run` already open.

    Returns:
        ``(metrics, {"L": ..., "N": ..., "B": ...})`` where ``B`` is the evaluation burstiness
        (``TaskConfig.B_eval_effective``).
    """
    from interp.io.rundir import Run, load_run

    run = run_dir if isinstance(run_dir, Run) else load_run(run_dir)
    t = run.task
    return run.metrics, {"L": t.L, "N": t.N, "B": int(t.B_eval_effective)}


def check_values(df: pd.DataFrame, columns: Sequence[str], target: str, source: str) -> None:
    """Refuses, before any fit, a clean curve the models cannot describe: one that
    :func:`interp.io.curves.check_curve` refuses (steps out of order, a value not finite or beyond
    :data:`MAX_CURVE_VALUE`), a fitted column (the first) that does not change or changes by less
    than :data:`MIN_RELATIVE_CHANGE` of its level (rounding noise on a flat line: no transition,
    and a fit would only chase it into overflow), or a loss mostly below 0 (noise may take a loss
    near 0 a little below it).

    Raises:
        ValueError: one line naming ``source``, the column and the step (a
            :class:`~interp.io.errors.DamagedFileError` for what ``check_curve`` refuses).
    """
    from interp.io.curves import check_curve

    check_curve(df, columns, source, bound=MAX_CURVE_VALUE)
    column, v = columns[0], df[columns[0]].to_numpy(dtype=float)
    if v.size and np.ptp(v) == 0:
        raise ValueError(
            f"{source}: column {column!r} does not change (every value is {v[0]:g}): a flat "
            "curve has no transition to fit"
        )
    level = max(1.0, float(np.max(np.abs(v)))) if v.size else 1.0
    if v.size and np.ptp(v) < MIN_RELATIVE_CHANGE * level:
        raise ValueError(
            f"{source}: column {column!r} does not change (it moves by {np.ptp(v):.3g} around "
            f"{np.median(v):g}, less than {MIN_RELATIVE_CHANGE:g} of its level): a flat curve "
            "has no transition to fit"
        )
    if target.endswith("_loss") and v.size and np.median(v) < 0:
        raise ValueError(
            f"{source}: column {column!r} is mostly below 0 (median {np.median(v):g}); a loss "
            "is >= 0"
        )


def _clean(metrics: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in ("step", *columns) if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics is missing columns {missing}")
    df = metrics[["step", *columns]].dropna().sort_values("step")
    return df.drop_duplicates("step").reset_index(drop=True)


def observed_transition(
    metrics: pd.DataFrame, *, column: str = "ic_loss", method: str | None = None
) -> dict[str, Any]:
    """The transition seen on a run's curve, by :func:`interp.analysis.transition.find_transition`
    (method from the column's direction unless given: ``cliff`` on a loss, ``logistic`` otherwise).

    Returns:
        dict with ``transitioned``, ``transition_step`` (None when there is none),
        ``onset_step`` (end of the plateau), ``end_step``, ``plateau_start_step``, ``method``
        and ``reason``.
    """
    from interp.analysis.transition import find_transition, measure_direction

    df = _clean(metrics, [column])
    r = find_transition(
        df["step"].to_numpy(dtype=float),
        df[column].to_numpy(dtype=float),
        method=method,
        direction=measure_direction(column),
    )
    end = None if r.plateau_end is None or r.width is None else r.plateau_end + r.width
    if r.method == "logistic" and r.step is not None and r.width is not None:
        end = r.step + r.width / 2
    return {
        "transitioned": bool(r.transitioned),
        "transition_step": r.step if r.transitioned else None,
        "onset_step": r.plateau_end,
        "end_step": end,
        "plateau_start_step": r.plateau_start,
        "method": r.method,
        "reason": r.reason,
    }


def plateau_problem(steps, values, *, direction: str, window: float = 0.1, tol: float = 0.05):
    """Why a curve shows no plateau (None when it has one).

    A plateau is a stretch of at least ``window`` of the recorded steps over which the (rolling-
    median smoothed) curve moves by at most ``tol`` of its whole range or by four times its
    noise, whichever is larger (the noise: the robust spread of successive differences, so a
    steady trend does not count as noise). A curve that keeps rising or falling at a steady pace
    has none, and no plateau means nothing to forecast a jump from.
    """
    steps = np.asarray(steps, float)
    raw = np.asarray(values, float)
    y = pd.Series(raw).rolling(5, center=True, min_periods=1).median().to_numpy()
    span, rng = steps[-1] - steps[0], float(np.ptp(y))
    if rng == 0:
        return None
    d = np.diff(raw)
    noise = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    allowed = max(tol * rng, 4 * noise)
    for i in range(len(steps)):
        # The shortest stretch ending at point i that covers `window` of the steps.
        j = int(np.searchsorted(steps, steps[i] - window * span, side="right")) - 1
        if j >= 0 and np.ptp(y[j : i + 1]) <= allowed:
            return None
    return (
        f"no plateau: the {direction} curve moves by more than {tol:.0%} of its range (and more "
        f"than its noise) over every stretch of {window:.0%} of the steps"
    )
