"""Before and during training combined: the configuration's forecast as the prior, a partial
curve's forecast as the update.

Before training, the transition law (:mod:`phenomenology.transition_law`) gives ``log T`` a normal
prior (mean ``mu0``, sd ``s0``). Once part of the curve is seen, a partial-curve forecaster gives a
step ``F``: the progress forecaster (:mod:`phenomenology.progress`) where the attention measure
gives one, else the template forecaster (:mod:`phenomenology.forecast`). Its error ``log(T / F)``
has a bias and a spread that depend on how early it is read, which is known at forecast time as
``q = cut-off / prior median`` (the fraction of the expected time seen): :func:`calibrate`
measures them per bin of ``q`` (:data:`Q_BINS`) on runs with known transitions. The combination
(:func:`combine`) is the normal posterior of ``log T`` given the prior and the bias-corrected
forecast (precision-weighted), truncated to ``T > cut-off`` (no transition was seen by then), and
read at its median and 10% / 90% quantiles.

Within the combination the progress forecaster is read below its own threshold of excess
(:data:`phenomenology.progress.MIN_EXCESS`, where alone it refuses): there its calibrated spread is
wide and the posterior stays near the prior; this is how the combination extends its range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from phenomenology.transition_law import Prediction

__all__ = ["MIN_CALIBRATION", "Q_BINS", "calibrate", "combine", "curve_step", "q_bin"]

Q_BINS = (0.0, 0.2, 0.4, 0.6, 0.85, math.inf)
"""Edges of the bins of ``q = cut-off / prior median`` over which a forecaster is calibrated."""

MIN_CALIBRATION = 4
"""Fewest forecasts a bin needs for its bias and spread; a bin with fewer leaves the prior alone."""


def q_bin(q: float) -> int:
    """The index of ``q``'s bin in :data:`Q_BINS` (-1 for a q that is not finite)."""
    if not math.isfinite(q):
        return -1
    return int(np.searchsorted(Q_BINS, q, side="right") - 1)


def curve_step(part: pd.DataFrame, task: Mapping[str, float], *, extended: bool) -> tuple:
    """A partial curve's forecast step and the forecaster that gave it: ``(step, method)``, or
    ``(None, None)``.

    ``part`` holds ``step, ic_loss`` and, where measured, ``tila2`` up to the cut-off. With
    ``extended`` the progress forecaster is read wherever its log-linear fit rises (any positive
    excess); without, as it is alone (refusing below :data:`phenomenology.progress.MIN_EXCESS`),
    and the template forecaster is read with its plateau check, as the live forecast reads them.
    """
    from phenomenology.forecast import forecast_curve
    from phenomenology.progress import (
        PROGRESS_CALIBRATIONS,
        progress_forecast,
        raw_progress_forecast,
    )

    part = part.dropna(subset=["ic_loss"])
    if len(part) < 5:
        return None, None
    if "tila2" in part and part["tila2"].notna().sum() >= 5:
        p = part.dropna(subset=["tila2"])
        if extended:
            raw = raw_progress_forecast(p["step"], p["tila2"])
            r = raw["raw_step"]
            if r is not None and math.isfinite(r) and raw["excess_last"] > 0:
                return max(
                    PROGRESS_CALIBRATIONS["sgd"]["k"] * r, float(p["step"].iloc[-1])
                ), "progress"
        else:
            fc = progress_forecast(p["step"], p["tila2"])
            if fc.ok:
                return fc.step, "progress"
    fc = forecast_curve(part["step"], part["ic_loss"], task=task, check_plateau=not extended)
    return (fc.step, "template") if fc.ok else (None, None)


def calibrate(errors: pd.DataFrame) -> dict:
    """Bias and spread of each forecaster's ``log(T / F)`` per bin of ``q``.

    Args:
        errors: rows ``method, q, log_error`` (one per forecast of a run with a known step).

    Returns:
        ``{method: [{"bin": i, "n": n, "bias": b, "sd": s}, ...]}`` for the bins with
        :data:`MIN_CALIBRATION` forecasts or more.
    """
    out: dict[str, list[dict]] = {}
    e = errors[np.isfinite(errors["log_error"].astype(float))]
    for method, g in e.groupby("method", sort=True):
        bins = g["q"].astype(float).map(q_bin)
        rows = []
        for b, h in g.groupby(bins, sort=True):
            if b < 0 or len(h) < MIN_CALIBRATION:
                continue
            v = h["log_error"].astype(float)
            rows.append({"bin": int(b), "n": int(len(v)), "bias": float(v.mean()),
                         "sd": float(max(v.std(ddof=1), 1e-3))})  # fmt: skip
        out[str(method)] = rows
    return out


def _truncated(mean: float, sd: float, seen: float) -> Prediction:
    """The normal ``N(mean, sd)`` of ``log T`` truncated to ``T > seen``, read at its median and
    10% / 90% quantiles."""
    from scipy.stats import norm

    a = norm.cdf((math.log(seen) - mean) / sd) if seen > 0 else 0.0
    a = min(a, 1 - 1e-12)

    def quantile(p: float) -> float:
        return math.exp(mean + sd * float(norm.ppf(a + p * (1 - a))))

    return Prediction(quantile(0.5), quantile(0.1), quantile(0.9), mean, sd)


def combine(
    prior: Prediction,
    step: float | None,
    method: str | None,
    seen: float,
    calibration: Mapping[str, list[dict]],
) -> Prediction:
    """The prior updated by a partial curve's forecast ``step`` (by ``method``) read at ``seen``.

    With no forecast, or none calibrated in the bin of ``q = seen / prior median``, the prior
    truncated to ``T > seen``. With a prior of no transition the calibrated forecast alone (or
    the prior when there is none).
    """
    has_prior = prior.transitions
    q = seen / prior.step if has_prior else math.nan
    cal = None
    if step is not None and method is not None:
        rows = calibration.get(method, [])
        want = q_bin(q) if has_prior else len(Q_BINS) - 2
        cal = next((r for r in rows if r["bin"] == want), None)
    if cal is None:
        return _truncated(prior.log_mean, prior.log_sd, seen) if has_prior else prior
    mu_c, s_c = math.log(step) + cal["bias"], cal["sd"]
    if not has_prior:
        return _truncated(mu_c, s_c, seen)
    w0, wc = 1.0 / prior.log_sd**2, 1.0 / s_c**2
    mean = (w0 * prior.log_mean + wc * mu_c) / (w0 + wc)
    return _truncated(mean, math.sqrt(1.0 / (w0 + wc)), seen)
