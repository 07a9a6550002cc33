"""Forecasting the transition from a progress measure: the induction head's attention, seen growing.

Why (docs/science.md section 4): through the plateau the layer-2 query's attention on the labels of
its own class (TILA2, ``metrics.csv`` column ``tila2``) rises above its start, the uniform
``B / (2N + 1)``, and its excess grows close to exponentially, at a steady rate, until the cliff.
The IC loss hides this growth under its own drift; the attention shows the circuit forming. So:

1. **Raw crossing.** ``x(t) = tila2(t) / tila2(t_0) - 1``, the relative excess over the first row.
   A straight line is fitted to ``log x`` over the last :data:`WINDOW` of the steps seen (at least
   :data:`MIN_FIT_POINTS` points with ``x > 0``), and extrapolated to the step where ``x`` reaches
   :data:`THRESHOLD` (0.5: half again the start, about where the plateau ends on the development
   runs). Curves whose excess is still below :data:`MIN_EXCESS` are not forecast.
2. **Calibrate** as the template forecaster does (:mod:`phenomenology.forecast`): ``forecast = k *
   raw``, interval ``[k_low, k_high] * raw``, the median, smallest and largest ratio observed /
   raw on development runs (:data:`PROGRESS_CALIBRATIONS`; observed = the IC-loss cliff step; the
   interval's coverage on held-out runs is the calibration's ``held_out``).

Measured (``benchmarks/forecast_validation.py --method progress``), plain SGD, one-hot positions:
see :data:`PROGRESS_CALIBRATIONS` and docs/results/forecast-validation.md. It needs a curve of the
attention measure, so a run directory of this toolkit (or a CSV with such a column); a bare loss
curve gets the template forecaster. Only plain SGD is calibrated: on the Adam runs at hand (mixed
encodings and scales) the ratio observed / raw ranged 0.6-2.0, too wide to calibrate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from phenomenology.forecast import Forecast

__all__ = [
    "MIN_EXCESS",
    "MIN_FIT_POINTS",
    "PROGRESS_CALIBRATIONS",
    "PROGRESS_COLUMN",
    "THRESHOLD",
    "WINDOW",
    "progress_calibration_for",
    "progress_forecast",
    "raw_progress_forecast",
]

PROGRESS_COLUMN = "tila2"
"""The progress measure read by default (``metrics.csv``)."""

THRESHOLD = 0.5
"""Relative excess ``tila2 / tila2(first row) - 1`` at which the raw forecast is read."""

WINDOW = 0.3
"""The log-linear fit uses the points of the last ``WINDOW`` of the steps seen (``step >= (1 -
WINDOW) * last``)."""

MIN_EXCESS = 0.15
"""Smallest relative excess (of the fitted line, at the last step seen) forecast from: just under
the smallest among the development runs' calibration forecasts (0.17). Below it the extrapolation
reaches farther than any calibrated one and lands early (at step 12000 of paper-fig3 seed 0 at lr
0.01, excess 0.04: 23.2k, against the seed's jump at 32.5k), so it is refused (``fit`` and the live
forecast then use the template)."""

MIN_FIT_POINTS = 4
"""Fewest points with a positive excess the fit uses (the last ones, when the window holds
fewer)."""

# Chosen on the 8 development runs alone (threshold 0.3 / 0.5 / 0.85 / 1.5, window 0.3 / 0.5):
# 0.5 and 0.3 had the smallest errors there at 80% and 90% of the plateau.
PROGRESS_CALIBRATIONS = {
    "sgd": {
        "k": 1.205,
        "k_low": 1.158,
        "k_high": 1.320,
        "source": "the 8 plain-SGD development runs of the template calibration (paper-fig3 seeds "
        "0-2 at lr 0.01; paper-fig3 lr 0.03 seeds 0-1 with the novel-class pool and seeds 0-1 "
        "without; paper-fig1d p_C=0.25 lr 0.03 seed 0), cut-offs at 50/80/90% of the plateau: "
        "median, min and max of observed / raw over the 24 forecasts; observed = the IC-loss "
        "cliff step; runs with per-unit hidden biases (formats before 4)",
        "interval": "the smallest and largest development ratio observed / raw, times raw",
        "held_out": "contained the observed IC-loss cliff step in 17/21, 19/21, 18/21 held-out "
        "SGD runs from 50/80/90% of the plateau (benchmarks/forecast_validation.py --method "
        "progress)",
    },
}
"""Calibrations of the progress forecaster, one per optimiser that has one."""


def progress_calibration_for(optimizer: str | None) -> dict | None:
    """The calibration of runs trained with ``optimizer`` (None: SGD), or None when there is
    none."""
    cal = PROGRESS_CALIBRATIONS.get("sgd" if optimizer is None else optimizer)
    return None if cal is None else dict(cal)


def raw_progress_forecast(
    steps, values, *, threshold: float = THRESHOLD, window: float = WINDOW
) -> dict:
    """The uncalibrated crossing step of the progress measure's relative excess.

    Returns:
        dict with ``raw_step`` (``inf`` when the excess is not growing), ``rate`` (per step, of
        ``log x``), ``excess_last`` (``x`` at the last step, from the fitted line), ``n_fit`` and
        ``baseline`` (the first value); ``raw_step`` None and ``reason`` when there is no fit.
    """
    s = np.asarray(steps, float)
    v = np.asarray(values, float)
    base = float(v[0])
    out = {
        "raw_step": None,
        "rate": math.nan,
        "excess_last": math.nan,
        "n_fit": 0,
        "baseline": base,
    }
    if not base > 0:
        return out | {"reason": f"its first value is {base:g}; the excess is relative to it (> 0)"}
    x = v / base - 1.0
    last = float(s[-1])
    use = (s >= (1.0 - window) * last) & (x > 0)
    if use.sum() < MIN_FIT_POINTS:
        pos = np.flatnonzero(x > 0)[-MIN_FIT_POINTS:]
        use = np.zeros_like(use)
        use[pos] = True
    if use.sum() < MIN_FIT_POINTS:
        return out | {
            "reason": f"the measure is above its first value at {int(use.sum())} points, "
            f"the fit needs {MIN_FIT_POINTS}"
        }
    rate, icpt = np.polyfit(s[use], np.log(x[use]), 1)
    out |= {
        "rate": float(rate),
        "n_fit": int(use.sum()),
        "excess_last": float(math.exp(icpt + rate * last)),
    }
    if not rate > 0:
        return out | {"raw_step": math.inf}
    return out | {"raw_step": float((math.log(threshold) - icpt) / rate)}


def progress_forecast(
    steps,
    values,
    *,
    optimizer: str | None = None,
    calibration: Mapping[str, float] | None = None,
    check_seen: bool = True,
) -> Forecast:
    """Calibrated forecast of the transition step from a progress measure seen up to its last step.

    Args:
        steps, values: the measure's curve so far (``tila2``; ascending steps, from the run's
            start, since the excess is relative to the first value).
        optimizer: picks the calibration (:data:`PROGRESS_CALIBRATIONS`; default SGD).
        calibration: ``{"k", "k_low", "k_high"}`` instead.
        check_seen: refuse a curve whose jump is already seen.

    Returns:
        A :class:`~phenomenology.forecast.Forecast` (``detail["method"] == "progress"``); ``step``
        None and ``reason`` "cannot forecast: ..." when there is none.
    """
    from interp.analysis.transition import find_transition
    from phenomenology.curves import MIN_POINTS

    df = pd.DataFrame({"step": np.asarray(steps, float), "y": np.asarray(values, float)})
    df = df.dropna().sort_values("step").drop_duplicates("step")
    s, y = df["step"].to_numpy(), df["y"].to_numpy()
    last = float(s[-1]) if len(s) else math.nan

    def cannot(why: str) -> Forecast:
        return Forecast(
            None, None, None, last, reason=f"cannot forecast: {why}", detail={"method": "progress"}
        )

    cal = progress_calibration_for(optimizer) if calibration is None else dict(calibration)
    if cal is None:
        return cannot(
            f"the progress forecast is calibrated for {sorted(PROGRESS_CALIBRATIONS)} only, "
            f"not optimizer={optimizer!r}"
        )
    if len(s) < MIN_POINTS:
        return cannot(f"{len(s)} points, a forecast needs at least {MIN_POINTS}")
    if check_seen and find_transition(s, y, method="logistic", direction="rising").transitioned:
        return cannot("the transition is already seen on the progress measure")
    raw = raw_progress_forecast(s, y)
    r = raw["raw_step"]
    if r is None:
        return cannot(raw["reason"])
    if not math.isfinite(r):
        return cannot("the progress measure is not growing over the last steps seen")
    if raw["excess_last"] < MIN_EXCESS:
        return cannot(
            f"the attention measure is only {raw['excess_last']:.0%} above its start; the "
            f"progress forecast starts at {MIN_EXCESS:.0%} (its calibrated range)"
        )
    if r > 100.0 * last:
        return cannot(
            "the progress measure grows too slowly: no transition within 100 times the last step"
        )
    return Forecast(
        step=max(cal["k"] * r, last),
        low=max(cal["k_low"] * r, last),
        high=max(cal["k_high"] * r, last),
        last_step=last,
        raw_step=r,
        detail=raw
        | {
            "method": "progress",
            "calibration": cal.get("source", ""),
            "interval": cal.get("interval", "[k_low, k_high] x raw"),
            "held_out": cal.get("held_out", "not measured"),
        },
    )
