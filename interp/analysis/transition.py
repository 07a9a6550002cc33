"""Plateau and transition detection on training curves, for one run or across seeds.

A curve (IC accuracy by default) is summarised by a four-parameter logistic in step,
``y = low + (high - low) * sigmoid((step - step_mid) / scale)``, fitted by least squares from a
start found on a rolling-median-smoothed copy (the steepest smoothed rise). From the fit:

- ``step``: the transition step, the logistic's midpoint;
- ``width``: 10%-to-90% rise time, ``2 ln 9 * scale``;
- ``plateau_level``: ``low``; ``plateau_end``: the 10% point; ``plateau_length``: from the first
  recorded step to the 10% point;
- ``plateau_measured``: the measured level at the end of the slow phase, the median of the raw
  curve over the last 20% of the plateau (the fitted ``low`` is the logistic's asymptote, which on
  a plateau that drifts upward lies below every measured point);
- ``final_level``: ``high``.

A curve counts as transitioned when its fitted rise ``high - low`` is at least ``min_rise``, the
midpoint lies inside the recorded steps, and the fit explains the curve (R^2 >= ``min_r2``).
Otherwise the report says so (``transitioned=False``, ``step=None``) instead of inventing a step.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

__all__ = [
    "detect_run_transition",
    "METHODS",
    "Transition",
    "TransitionResult",
    "detect_transition",
    "find_transition",
    "measure_direction",
    "event_order",
    "transition_report",
    "summarize_seeds",
    "logistic",
    "smooth",
    "smooth_symmetric",
]

_LN9 = math.log(9.0)


def logistic(step, low, high, step_mid, scale):
    """``low + (high - low) * sigmoid((step - step_mid) / scale)``."""
    z = np.clip((np.asarray(step, float) - step_mid) / scale, -60, 60)
    return low + (high - low) / (1.0 + np.exp(-z))


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median (robust to outliers), same length as ``values``."""
    if window <= 1:
        return np.asarray(values, float)
    return pd.Series(values).rolling(window, center=True, min_periods=1).median().to_numpy()


def smooth_symmetric(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median whose window shrinks symmetrically at the ends (the last point is
    itself, the one before it the median of three, ...), same length as ``values``.

    :func:`smooth` truncates the window on one side at the ends, so its last points are medians
    of points that lie before them: a curve whose last evaluations fall 3.01 -> 0.82 -> 0.12
    smooths to 3.0 -> 1.9 -> 0.82, which puts the steepest drop at the last point. Here it stays
    3.0 -> 0.82 -> 0.12, and the drop stays where it happened."""
    y = np.asarray(values, float)
    half, n = max(int(window) // 2, 0), len(y)
    out = pd.Series(y).rolling(2 * half + 1, center=True).median().to_numpy().copy()
    for i in list(range(min(half, n))) + list(range(max(n - half, 0), n)):
        h = min(i, n - 1 - i, half)
        out[i] = float(np.median(y[i - h : i + h + 1]))
    return out


@dataclass(frozen=True)
class TransitionResult:
    """What :func:`detect_transition` found.

    Attributes:
        transitioned: whether the curve has an abrupt rise.
        step: transition step (logistic midpoint), or None.
        width: 10%-90% rise time in steps, or None.
        plateau_level: level before the rise (the fitted ``low``; the curve's start if no rise).
        plateau_end: step of the 10% point (None if no transition).
        plateau_length: ``plateau_end`` minus the first recorded step (None if no transition).
        final_level: level after the rise (fitted ``high``; the curve's end if no rise).
        r2: R^2 of the logistic fit on the raw curve.
        reason: why a curve did not count as transitioned ('' when it did).
        plateau_measured: median of the measured values over the last 20% of the plateau
            (between ``plateau_end - 0.2 * plateau_length`` and ``plateau_end``); NaN without a
            transition.
    """

    transitioned: bool
    step: float | None
    width: float | None
    plateau_level: float
    plateau_end: float | None
    plateau_length: float | None
    final_level: float
    r2: float
    reason: str = ""
    plateau_measured: float = float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


def _clean_curve(steps: Sequence[float], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` and ``values`` as float arrays sorted by step, rows with a non-finite entry
    dropped; a ValueError when their shapes differ."""
    steps = np.asarray(steps, float)
    values = np.asarray(values, float)
    if steps.shape != values.shape:
        raise ValueError(
            f"steps and values must have the same shape, got {steps.shape} and {values.shape}"
        )
    ok = np.isfinite(steps) & np.isfinite(values)
    order = np.argsort(steps[ok])
    return steps[ok][order], values[ok][order]


def _too_few_points(values: np.ndarray) -> dict:
    """The fields of a result for a curve of fewer than 5 points: no transition, its two ends."""
    return dict(
        transitioned=False,
        step=None,
        width=None,
        plateau_level=float(values[0]) if len(values) else float("nan"),
        plateau_end=None,
        plateau_length=None,
        final_level=float(values[-1]) if len(values) else float("nan"),
        r2=float("nan"),
        reason=f"too few points ({len(values)} < 5) to detect a transition",
    )


def _no_transition(smoothed: np.ndarray, reason: str, r2: float = float("nan")) -> TransitionResult:
    """No transition: the levels are the means of the smoothed curve's first and last tenths."""
    k = max(1, len(smoothed) // 10)
    head, tail = float(smoothed[:k].mean()), float(smoothed[-k:].mean())
    return TransitionResult(False, None, None, head, None, None, tail, r2, reason)


def _fit_logistic(
    steps: np.ndarray, values: np.ndarray, smoothed: np.ndarray, min_rise: float
) -> tuple[np.ndarray | None, str]:
    """Least-squares logistic started at the smoothed curve's steepest rise, its levels from the
    smoothed curve on either side: ``(popt, "")``, or ``(None, reason)`` when the smoothed rise is
    under ``min_rise`` or the fit fails."""
    span = steps[-1] - steps[0]
    grad = np.gradient(smoothed, steps)
    i_mid = int(np.argmax(grad))
    low0, high0 = float(np.min(smoothed[: i_mid + 1])), float(np.max(smoothed[i_mid:]))
    if high0 - low0 < min_rise:
        return None, f"rise {high0 - low0:.3g} < min_rise {min_rise}"
    slope = grad[i_mid]
    scale0 = max((high0 - low0) / (4 * slope) if slope > 0 else span / 10, span / len(steps) / 4)
    p0 = [low0, high0, steps[i_mid], scale0]
    lo = [min(values) - 1, min(values) - 1, steps[0] - span, span / len(steps) / 20]
    hi = [max(values) + 1, max(values) + 1, steps[-1] + span, 10 * span]
    from scipy.optimize import OptimizeWarning, curve_fit  # here: 0.3 s to import

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            popt, _ = curve_fit(logistic, steps, values, p0=p0, bounds=(lo, hi), maxfev=20000)
    except (RuntimeError, ValueError) as err:
        return None, f"logistic fit failed ({err})"
    return popt, ""


def _logistic_reason(
    steps: np.ndarray, popt: np.ndarray, r2: float, min_rise, min_r2, max_width_fraction
) -> str:
    """Why a fitted logistic does not count as a transition ("" when it does)."""
    low, high, mid, scale = (float(x) for x in popt)
    span = steps[-1] - steps[0]
    if high - low < min_rise:
        return f"fitted rise {high - low:.3g} < min_rise {min_rise}"
    if not steps[0] <= mid <= steps[-1]:
        return f"fitted midpoint {mid:.0f} outside the recorded steps"
    if r2 < min_r2:
        return f"logistic R^2 {r2:.2f} < {min_r2}"
    if 2 * _LN9 * scale > max_width_fraction * span:
        return (
            f"gradual rise: 10-90% width {2 * _LN9 * scale:.0f} steps > {max_width_fraction:g} of "
            f"the recorded span ({span:.0f})"
        )
    return ""


def detect_transition(
    steps: Sequence[float],
    values: Sequence[float],
    *,
    min_rise: float = 0.3,
    min_r2: float = 0.8,
    max_width_fraction: float = 0.5,
    smooth_window: int | None = None,
) -> TransitionResult:
    """Find the plateau and the abrupt rise of a training curve.

    Args:
        steps: training steps, ascending.
        values: the measure at those steps (IC accuracy, ILA1, ...). NaNs are dropped.
        min_rise: smallest fitted rise that counts as a transition (in the measure's units).
        min_r2: smallest R^2 of the logistic fit that counts.
        max_width_fraction: largest 10-90% rise time, as a fraction of the recorded span, that
            counts as abrupt; a slower rise is a gradual climb, not a transition.
        smooth_window: rolling-median window for the starting guess (default ~5% of the points).

    Returns:
        A :class:`TransitionResult`.
    """
    steps, values = _clean_curve(steps, values)
    if len(steps) < 5:
        return TransitionResult(**_too_few_points(values))
    smoothed = smooth(values, smooth_window or max(3, len(steps) // 20))
    popt, reason = _fit_logistic(steps, values, smoothed, min_rise)
    if popt is None:
        return _no_transition(smoothed, reason)
    ss_res = float(np.sum((values - logistic(steps, *popt)) ** 2))
    ss_tot = float(np.sum((values - values.mean()) ** 2)) or 1e-300
    r2 = 1.0 - ss_res / ss_tot
    reason = _logistic_reason(steps, popt, r2, min_rise, min_r2, max_width_fraction)
    if reason:
        return _no_transition(smoothed, reason, r2)
    low, high, mid, scale = (float(x) for x in popt)
    plateau_end = mid - _LN9 * scale
    plateau_length = max(0.0, plateau_end - steps[0])
    return TransitionResult(
        transitioned=True,
        step=mid,
        width=2 * _LN9 * scale,
        plateau_level=low,
        plateau_end=plateau_end,
        plateau_length=plateau_length,
        final_level=high,
        r2=r2,
        plateau_measured=_plateau_median(steps, values, plateau_end, plateau_length),
    )


def _plateau_median(steps: np.ndarray, values: np.ndarray, end: float, length: float) -> float:
    """Median of ``values`` over the last 20% of a plateau ending at ``end`` (at least the one
    evaluation nearest before ``end``); NaN if no evaluation lies on the plateau."""
    inside = (steps >= end - 0.2 * length) & (steps <= end)
    if not inside.any():
        before = np.nonzero(steps <= end)[0]
        if not len(before):
            return float("nan")
        inside = np.zeros_like(inside)
        inside[before[-1]] = True
    return float(np.median(values[inside]))


METHODS = ("logistic", "cliff")
"""Transition detectors of :func:`find_transition`: ``logistic`` for a rising measure (a
four-parameter logistic in step, :func:`detect_transition`), ``cliff`` for a falling one (the
steepest drop in log-step, :func:`interp.analysis.cliff.detect_cliff`)."""


@dataclass(frozen=True)
class Transition(TransitionResult):
    """:class:`TransitionResult` plus how it was found (returned by :func:`find_transition`).

    Attributes:
        method: ``"logistic"`` or ``"cliff"``.
        direction: ``"rising"`` or ``"falling"``.
        plateau_start: first step of the plateau (the first recorded step for ``logistic``).
    """

    method: str = "logistic"
    direction: str = "rising"
    plateau_start: float | None = None


def measure_direction(name: str) -> str:
    """``"falling"`` for a loss (a name ending in ``loss``), ``"rising"`` for anything else."""
    return "falling" if str(name).endswith("loss") else "rising"


def _no_cliff_reason(c, drop: float, need: float, last_step: float, max_width_ratio: float) -> str:
    """Why a detected cliff does not count as a transition ("" when it does)."""
    reason = ""
    if not drop > need:
        reason = f"drop {drop:.3g} from the plateau <= {need:.3g}"
    elif c.transition >= last_step:
        reason = "the steepest drop is at the last point: the curve may still be falling"
    elif c.plateau_length < 0.2 * c.transition:
        reason = (
            f"no plateau before the drop: {c.plateau_length:.0f} steps, under 20% of the "
            f"transition step {c.transition:.0f}"
        )
    elif c.width > max_width_ratio * c.transition:
        reason = (
            f"gradual drop: onset-to-end width {c.width:.0f} > {max_width_ratio:g} x the "
            f"transition step {c.transition:.0f}"
        )
    return reason


def find_transition(
    steps: Sequence[float],
    values: Sequence[float],
    *,
    method: str | None = None,
    direction: str | None = None,
    min_rise: float | None = None,
    max_width_ratio: float = 1.0,
    smooth_window: int | None = None,
) -> Transition:
    """The one transition detector: the method explicit, or chosen by the curve's direction.

    Args:
        steps: training steps (or model times), ascending; NaN rows are dropped.
        values: the measure at those steps.
        method: ``"logistic"`` (rising measures: accuracies, attention measures) or ``"cliff"``
            (falling ones: losses); None picks it from ``direction``.
        direction: ``"rising"`` or ``"falling"``; None infers it from the curve (its last tenth
            against its first tenth). :func:`measure_direction` gives it from a column name.
        min_rise: smallest change that counts, in the measure's units for ``logistic`` (default
            0.3) and as a fraction of the plateau level for ``cliff`` (default 0.3: the curve
            must fall by 30% of its plateau value).
        max_width_ratio: ``cliff`` only: largest ``(end - onset) / step`` that counts as abrupt
            (a smooth exponential decay has about 2.2 and does not count).
        smooth_window: rolling-median window (``logistic``: default ~5% of the points;
            ``cliff``: default 5 evaluations, shrinking symmetrically at the curve's ends,
            :func:`smooth_symmetric`, so that a cliff in the last evaluations is found).

    Returns:
        A :class:`Transition`. For ``cliff``, ``step`` is the steepest log-step drop even when
        ``transitioned`` is False (``reason`` says why it does not count: too small a drop, the
        steepest drop at the last point, a plateau shorter than 20% of the step, or a drop
        slower than ``max_width_ratio``), ``width`` is ``end - onset``, ``plateau_end`` the
        onset and ``r2`` is NaN.
    """
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} or None, got {method!r}")
    if direction is not None and direction not in ("rising", "falling"):
        raise ValueError(f"direction must be 'rising', 'falling' or None, got {direction!r}")
    steps, values = _clean_curve(steps, values)
    if direction is None:
        k = max(1, len(values) // 10)
        direction = "falling" if values[-k:].mean() < values[:k].mean() else "rising"
    if method is None:
        method = "cliff" if direction == "falling" else "logistic"
    if method == "logistic":
        return _logistic_transition(steps, values, direction, min_rise, smooth_window)
    return _cliff_transition(steps, values, direction, min_rise, max_width_ratio, smooth_window)


def _logistic_transition(steps, values, direction, min_rise, smooth_window) -> Transition:
    """:func:`find_transition` by the logistic: :func:`detect_transition` on the curve turned
    rising, its levels turned back."""
    y = values if direction == "rising" else -values
    r = detect_transition(
        steps, y, min_rise=0.3 if min_rise is None else min_rise, smooth_window=smooth_window
    )
    fields = r.to_dict()
    if direction == "falling":
        fields["plateau_level"], fields["final_level"] = -r.plateau_level, -r.final_level
        fields["plateau_measured"] = -r.plateau_measured
    first = float(steps[0]) if len(steps) else None
    return Transition(**fields, method="logistic", direction=direction, plateau_start=first)


def _cliff_transition(
    steps, values, direction, min_rise, max_width_ratio, smooth_window
) -> Transition:
    """:func:`find_transition` by the cliff: the steepest log-step drop of the curve turned
    falling, smoothed symmetrically (:func:`interp.analysis.cliff.detect_cliff`)."""
    from interp.analysis.cliff import detect_cliff

    labels = dict(method="cliff", direction=direction)
    if len(steps) < 5:
        first = float(steps[0]) if len(steps) else None
        return Transition(**_too_few_points(values), **labels, plateau_start=first)
    sign = 1.0 if direction == "falling" else -1.0
    y = smooth_symmetric(sign * values, smooth_window or 5)
    c = detect_cliff(np.maximum(steps, 1e-9), y)
    drop = c.plateau_loss - c.floor_loss
    need = (0.3 if min_rise is None else min_rise) * abs(c.plateau_loss)
    reason = _no_cliff_reason(c, drop, need, float(steps[-1]), max_width_ratio)
    plateau_end, plateau_length = float(c.onset), float(c.onset - c.plateau_start)
    return Transition(
        transitioned=not reason,
        step=float(c.transition),
        width=float(c.width),
        plateau_level=sign * c.plateau_loss,
        plateau_end=plateau_end,
        plateau_length=plateau_length,
        final_level=sign * c.floor_loss,
        r2=float("nan"),
        reason=reason,
        plateau_measured=(
            float("nan") if reason else _plateau_median(steps, values, plateau_end, plateau_length)
        ),
        **labels,
        plateau_start=float(c.plateau_start),
    )


def detect_run_transition(metrics: pd.DataFrame, column: str = "ic_acc") -> float | None:
    """Step of the transition of ``column``, by :func:`interp.analysis.transition.find_transition`
    (``logistic`` on a rising measure, ``cliff`` on a loss).

    Args:
        metrics: a run's ``metrics.csv``.
        column: the curve to look at (IC accuracy by default).

    Returns:
        The transition step, or None when the run did not transition (or has no such column).
    """
    if column not in metrics.columns or len(metrics) < 3:
        return None
    df = metrics[["step", column]].dropna()
    result = find_transition(
        df["step"].to_numpy(dtype=float),
        df[column].to_numpy(dtype=float),
        direction=measure_direction(column),
    )
    if not result.transitioned or result.step is None:
        return None
    return float(result.step)


def event_order(
    metrics: pd.DataFrame,
    measures: Sequence[str] = ("cla", "ila1", "tila2", "ic_acc"),
    *,
    reference: str = "ic_acc",
    min_rise: float = 0.15,
) -> pd.DataFrame:
    """When each measure rises, in order, and its lag behind ``reference``.

    Each measure is detected as in :func:`detect_transition` (with a smaller ``min_rise``, since
    attention measures move less than accuracy). CLA usually rises early and slowly; ILA1, TILA2
    and IC accuracy together.

    Returns:
        One row per measure, sorted by step: ``measure, transitioned, step, width, lag`` (``step``
        minus the reference's step; NaN where either did not transition).
    """
    rows = []
    for m in measures:
        if m not in metrics:
            raise ValueError(
                f"measure {m!r} is not a column of the metrics: {list(metrics.columns)}"
            )
        r = detect_transition(metrics["step"], metrics[m], min_rise=min_rise)
        rows.append(
            {"measure": m, "transitioned": r.transitioned, "step": r.step, "width": r.width}
        )
    df = pd.DataFrame(rows)
    ref = df.loc[df["measure"] == reference, "step"]
    ref_step = ref.iloc[0] if len(ref) and ref.iloc[0] is not None else np.nan
    df["step"] = df["step"].astype(float)
    df["width"] = df["width"].astype(float)
    df["lag"] = df["step"] - (np.nan if ref_step is None else float(ref_step))
    return df.sort_values("step", na_position="last").reset_index(drop=True)


def transition_report(
    runs: Sequence[str | os.PathLike | pd.DataFrame],
    *,
    measure: str = "ic_acc",
    min_rise: float = 0.3,
) -> pd.DataFrame:
    """Transition of ``measure`` for several runs (run directories or metrics DataFrames).

    Run directories are grouped by config (:func:`interp.analysis.compare.group_runs`): only seeds
    of one config are summarised together; DataFrames count as seeds of one config.

    Returns:
        One row per run (``run``, ``config``, the fields of :class:`TransitionResult`, whose
        ``step`` is the transition step of ``measure``, and ``cliff_step``, the IC-loss cliff step
        that the forecasters use, when the runs have an ``ic_loss`` column); then,
        per config, a ``mean`` and a ``std`` row over its runs that transitioned, with
        ``transitioned`` saying how many out of its runs. With several configs those rows are
        named ``mean [K=512]``, ``std [K=512]``, ..., after the fields that differ.
    """
    from interp.analysis.compare import group_runs
    from interp.io.errors import DamagedFileError
    from interp.io.rundir import load_run

    frames = [r for r in runs if isinstance(r, pd.DataFrame)]
    if frames and len(frames) < len(runs):
        raise ValueError("runs must be all run directories or all metrics DataFrames, not both")
    if frames:
        named = [[(f"run{i}", m) for i, m in enumerate(frames)]]
        labels = ["one config"]
    else:
        groups = group_runs([load_run(r) for r in runs])
        named = [[(str(r.path), r.metrics) for r in g.runs] for g in groups]
        labels = [g.label for g in groups]
    for name, metrics in (m for members in named for m in members):
        source = name if frames else f"{name}/metrics.csv"
        if metrics.empty:
            raise DamagedFileError(f"{source} has no valid rows: no curve to find a transition on")
        if measure not in metrics.columns:  # before any detection, naming the run's columns
            known = [c for c in metrics.columns if c != "step"]
            raise ValueError(f"--measure {measure!r} is not a column of {name}: known: {known}")
        _check_metrics(metrics, measure, source)
    parts = []
    for label, members in zip(labels, named, strict=True):
        rows = []
        for name, metrics in members:
            r = detect_transition(metrics["step"], metrics[measure], min_rise=min_rise)
            row = {"run": name, "config": label, **r.to_dict()}
            if "ic_loss" in metrics:  # the forecasters' transition, under its own name
                c = find_transition(
                    metrics["step"], metrics["ic_loss"], method="cliff", direction="falling"
                )
                row["cliff_step"] = c.step if c.transitioned else None
            rows.append(row)
        df = pd.DataFrame(rows)
        summary = summarize_seeds(df).assign(config=label)
        if len(named) > 1:
            summary["run"] = summary["run"] + f" [{label}]"
        parts += [df, summary]
    out = pd.concat(parts, ignore_index=True)
    # The measured plateau level beside the fitted one.
    cols = [c for c in out.columns if c != "plateau_measured"]
    cols.insert(cols.index("plateau_level") + 1, "plateau_measured")
    return out[cols]


def _check_metrics(metrics: pd.DataFrame, measure: str, source: str) -> None:
    """A run's curve of ``measure`` (or ``ic_loss``) empty (NaN) throughout, or infinite, is a
    damaged file: refused naming it (:func:`interp.io.curves.check_curve`), never a row of NaN."""
    from interp.io.curves import check_curve

    columns = [measure, *(["ic_loss"] if "ic_loss" in metrics.columns else [])]
    check_curve(metrics, columns, source, gaps=True, bound=None)


def summarize_seeds(report: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation rows over the transitioned runs of a report."""
    done = report[report["transitioned"]]
    numeric = [
        "step",
        "width",
        "plateau_level",
        "plateau_measured",
        "plateau_end",
        "plateau_length",
        "final_level",
        "r2",
    ]
    numeric += [c for c in ("cliff_step",) if c in report]
    summary = []
    for stat in ("mean", "std"):
        row = {"run": stat, "transitioned": f"{len(done)}/{len(report)}", "reason": ""}
        for col in numeric:
            vals = pd.to_numeric(done[col], errors="coerce")
            row[col] = float(getattr(vals, stat)()) if len(vals) else float("nan")
        summary.append(row)
    return pd.DataFrame(summary)
