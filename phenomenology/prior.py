"""Before and during training combined: the configuration's forecast as the prior, a partial
curve's forecast as the update.

Before training, the transition law (:mod:`phenomenology.transition_law`) gives ``log T`` a normal
prior (mean ``mu0``, sd ``s0``). Once part of the curve is seen, a partial-curve forecaster gives a
step ``F``: the progress forecaster (:mod:`phenomenology.progress`) where the attention measure
gives one, else the template forecaster (:mod:`phenomenology.forecast`). How far its error
``log(T / F)`` strays depends on how close it thinks the transition is, known at forecast time as
``r = cut-off / F`` (the share of its own forecast already seen) and on whether the prior puts
the cut-off early in the plateau (``cut-off / prior step`` under :data:`PRIOR_SPLIT`, also known at
forecast time): :func:`calibrate` measures the bias and spread per cell (a bin of ``r`` in
:data:`R_BINS` and that split) on runs with known transitions, and chooses per cell what the
forecast does (:data:`MODES`: nothing, replace the prior, or weigh against it
by precision, the normal posterior of ``log T``; with or without its mean bias taken out): the
choice with the smallest median error on those runs. The combination (:func:`combine`) is then
truncated to ``T > cut-off`` (no transition was seen by then), and read at its median and 10% /
90% quantiles.

Within the combination the progress forecaster is read below its own threshold of excess
(:data:`phenomenology.progress.MIN_EXCESS`, where alone it refuses): where that helps, its cells
are kept, and where it does not, the prior stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from phenomenology.transition_law import Prediction

__all__ = [
    "MIN_CALIBRATION",
    "MODES",
    "PRIOR_SPLIT",
    "R_BINS",
    "calibrate",
    "combine",
    "curve_step",
    "prior_bin",
    "r_bin",
]

R_BINS = (0.0, 0.25, 0.5, 0.65, 0.8, math.inf)
"""Edges of the bins of ``r = cut-off / F`` over which a forecaster is calibrated."""

PRIOR_SPLIT = R_BINS[1]
"""The share of the prior's step seen (``cut-off / prior step``) under which the prior puts a
forecast early in the plateau: the cells of the calibration are split there, because a curve
forecast that claims the cliff is near while the prior puts it far away is a different case from
one that agrees (measured: early in the plateau such claims are mostly wrong)."""

MIN_CALIBRATION = 20
"""Fewest forecasts a cell needs for its bias and spread; a cell with fewer leaves the prior
alone."""


def r_bin(r: float) -> int:
    """The index of ``r``'s bin in :data:`R_BINS` (-1 for an ``r`` that is not finite)."""
    if not math.isfinite(r):
        return -1
    return int(np.searchsorted(R_BINS, r, side="right") - 1)


def prior_bin(seen: float, prior: Prediction) -> int:
    """0 when the prior puts ``seen`` early in the plateau (``seen / prior step`` under
    :data:`PRIOR_SPLIT`; also for a prior of no transition), else 1."""
    if not prior.transitions or not (prior.step > 0):
        return 0
    return int(seen / prior.step >= PRIOR_SPLIT)


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


MODES = ("prior", "curve", "weighted")
"""What a calibrated bin does with a forecast: leave the prior alone, take the forecast alone
(bias-corrected), or weigh the two by their precision."""


def calibrate(errors: pd.DataFrame) -> dict:
    """Per forecaster and cell (bin of ``r``, :func:`prior_bin`): the bias and spread of its
    ``log(T / F)``, and the mode (:data:`MODES`) and bias correction (the mean, or none) that gave
    these runs the smallest median ``|log error|``.

    Args:
        errors: one row per forecast of a run with a known step ``observed``: ``method, step``
            (``F``), ``seen`` (the cut-off) and the run's prior (``prior_step, prior_low,
            prior_high, prior_log_mean, prior_log_sd``, from a law fitted without the run).

    Returns:
        ``{method: [{"bin", "prior_bin", "n", "bias", "sd", "mode"}, ...]}`` for the cells with
        :data:`MIN_CALIBRATION` forecasts or more (``bias``: the correction applied, 0 or the
        mean error; ``sd``: the spread about it).
    """
    out: dict[str, list[dict]] = {}
    e = errors[errors["step"].astype(float) > 0].copy()
    e["log_error"] = np.log(e["observed"].astype(float) / e["step"].astype(float))
    e["bin"] = (e["seen"].astype(float) / e["step"].astype(float)).map(r_bin)
    e["prior_bin"] = [prior_bin(float(t["seen"]), _prior_of(t)) for _, t in e.iterrows()]
    for method, g in e.groupby("method", sort=True):
        rows = []
        for (b, pb), h in g.groupby(["bin", "prior_bin"], sort=True):
            if b < 0 or len(h) < MIN_CALIBRATION:
                continue
            rows.append(_best_cell(str(method), int(b), int(pb), h))
        out[str(method)] = rows
    return out


def _best_cell(method: str, b: int, pb: int, h: pd.DataFrame) -> dict:
    """The calibration of one cell (its forecasts ``h``): of each bias (none, the mean) and
    :data:`MODES`, the one that gives these runs the smallest median ``|log error|``."""
    v = h["log_error"].astype(float)
    runs = [
        (_prior_of(t), float(t["step"]), float(t["seen"]), float(t["observed"]))
        for _, t in h.iterrows()
    ]
    best = None
    for bias in (0.0, float(v.mean())):
        sd = float(max(np.sqrt(((v - bias) ** 2).sum() / max(len(v) - 1, 1)), 1e-3))
        for mode in MODES:
            rec = {"bin": b, "prior_bin": pb, "n": int(len(v)), "bias": bias, "sd": sd}
            rec["mode"] = mode
            err = np.median(
                [
                    _abs_log(combine(prior, step, method, seen, {method: [rec]}).step, observed)
                    for prior, step, seen, observed in runs
                ]
            )
            if best is None or err < best[0] - 1e-12:
                best = (err, rec)
    return best[1]


def _prior_of(t) -> Prediction:
    return Prediction(
        float(t["prior_step"]),
        float(t["prior_low"]),
        float(t["prior_high"]),
        float(t["prior_log_mean"]),
        float(t["prior_log_sd"]),
    )


def _abs_log(pred: float, obs: float) -> float:
    return abs(math.log(pred / float(obs))) if math.isfinite(pred) and pred > 0 else math.inf


def _truncated(mean: float, sd: float, seen: float) -> Prediction:
    """The normal ``N(mean, sd)`` of ``log T`` truncated to ``T > seen``, read at its median and
    10% / 90% quantiles."""
    from scipy.special import ndtr, ndtri  # the standard normal's cdf and its inverse

    a = float(ndtr((math.log(seen) - mean) / sd)) if seen > 0 else 0.0
    a = min(a, 1 - 1e-12)

    def quantile(p: float) -> float:
        return math.exp(mean + sd * float(ndtri(a + p * (1 - a))))

    return Prediction(quantile(0.5), quantile(0.1), quantile(0.9), mean, sd)


def _calibration_cell(prior, step, method, seen: float, calibration: Mapping) -> dict | None:
    """The calibration of ``method`` in the cell of ``r = seen / step`` and the prior's bin, kept
    for updating (None: no forecast, no such cell, or a cell that keeps the prior)."""
    if step is None or method is None or not step > 0:
        return None
    want, pb = r_bin(seen / step), prior_bin(seen, prior)
    cells = calibration.get(method, [])
    cal = next((r for r in cells if r["bin"] == want and r.get("prior_bin", pb) == pb), None)
    if cal is not None and cal.get("mode", "weighted") == "prior" and prior.transitions:
        return None
    return cal


def combine(
    prior: Prediction,
    step: float | None,
    method: str | None,
    seen: float,
    calibration: Mapping[str, list[dict]],
) -> Prediction:
    """The prior updated by a partial curve's forecast ``step`` (by ``method``) read at ``seen``.

    With no forecast, or none calibrated (and kept) in the cell of ``r = seen / step`` and
    :func:`prior_bin`, the prior truncated to ``T > seen``. With a prior of no transition the
    calibrated forecast alone (or the prior when there is none).
    """
    cal = _calibration_cell(prior, step, method, seen, calibration)
    if cal is None:
        return _truncated(prior.log_mean, prior.log_sd, seen) if prior.transitions else prior
    mu_c, s_c = math.log(step) + cal["bias"], cal["sd"]
    if not prior.transitions or cal.get("mode", "weighted") == "curve":
        return _truncated(mu_c, s_c, seen)
    w0, wc = 1.0 / prior.log_sd**2, 1.0 / s_c**2
    mean = (w0 * prior.log_mean + wc * mu_c) / (w0 + wc)
    return _truncated(mean, math.sqrt(1.0 / (w0 + wc)), seen)
