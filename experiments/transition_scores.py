"""Held-out scores of forecasting a run's transition before and during training.

From a grid's summary rows (one per run: configuration, ``transition_step``, ``budget``; see
:mod:`experiments.transition_grid`) and its curves (``point, seed, step, ic_loss, tila2``):

- :func:`combined_scores`: at 10, 25, 50 and 80% of each held-out run's plateau (from its first
  step to the 10% point of IC accuracy's rise), the error of the
  law alone (fitted without the run's configuration), of the partial-curve forecaster alone (as
  ``fit`` and the live forecast read it) and of their combination (:mod:`phenomenology.prior`,
  calibrated on the other configurations' runs, nested leave-one-configuration-out);
- :func:`early_warning`: "will this run transition within its budget?", asked at 5, 10, 20 and
  30% of the budget of every run not transitioned by then: the AUROC of the progress signal (the
  attention measure's excess over its start), of the template fit (how far inside the budget it
  forecasts the cliff) and of the law (its probability of a transition by the budget, given none
  yet), with bootstrap intervals; and the lead time at a 5% false-positive rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from phenomenology.prior import calibrate, combine, curve_step
from phenomenology.transition_law import FIELDS, LAW, LogLinearLaw, _transitioned

__all__ = [
    "CALIBRATION_FRACTIONS",
    "FRACTIONS",
    "WARNING_FRACTIONS",
    "auroc",
    "combined_scores",
    "early_warning",
    "summarize_combined",
]

FRACTIONS = (0.1, 0.25, 0.5, 0.8)
"""Fractions of the plateau (from the first step to the 10% point of IC accuracy's rise) at which
the combined forecaster is scored."""
CALIBRATION_FRACTIONS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Cut-offs whose forecasts calibrate the combination (those of other configurations' runs)."""
WARNING_FRACTIONS = (0.05, 0.1, 0.2, 0.3)
"""Fractions of the budget at which the early warning is asked."""
WARNING_GRID = 40
"""Observation steps per run (evenly over its budget) for the lead time."""


def calibration_rows(forecasts: pd.DataFrame, priors: Mapping) -> pd.DataFrame:
    """The rows :func:`calibrate` takes, from a table of forecasts (``point, seed, seen,
    observed, extended, extended_method``) and each run's prior (``(point, seed) ->
    Prediction``); forecasts without a step, or of runs whose prior is no transition, left out."""
    out = []
    for _, t in forecasts.iterrows():
        p = priors.get((t["point"], int(t["seed"])))
        if p is None or not p.transitions or t["extended"] is None or pd.isna(t["extended"]):
            continue
        out.append(
            {
                "method": t["extended_method"],
                "step": float(t["extended"]),
                "seen": float(t["seen"]),
                "observed": float(t["observed"]),
                "prior_step": p.step,
                "prior_low": p.low,
                "prior_high": p.high,
                "prior_log_mean": p.log_mean,
                "prior_log_sd": p.log_sd,
            }
        )
    cols = [
        "method",
        "step",
        "seen",
        "observed",
        "prior_step",
        "prior_low",
        "prior_high",
        "prior_log_mean",
        "prior_log_sd",
    ]
    return pd.DataFrame(out, columns=cols)


def _key(r) -> tuple[str, int]:
    return str(r["point"]), int(r["seed"])


def _task(r) -> dict[str, float]:
    return {"L": float(r["L"]), "N": float(r["N"]), "B": float(r["B"])}


def _config(r) -> dict[str, float]:
    return {f: float(r[f]) for f in FIELDS}


def _plateau(curve: pd.DataFrame) -> tuple[float, float] | None:
    """``(first step, plateau end)`` of a curve whose IC accuracy transitions (the end: the 10%
    point of its logistic rise), else None."""
    from interp.analysis.transition import detect_transition

    acc = detect_transition(curve["step"], curve["ic_acc"])
    if not acc.transitioned or acc.plateau_end is None:
        return None
    return float(curve["step"].min()), float(acc.plateau_end)


def _priors(rows: pd.DataFrame, law: LogLinearLaw, exclude: Sequence[str] = ()) -> dict:
    """Each run's prediction by ``law`` fitted without its own configuration (and ``exclude``)."""
    out = {}
    for point in dict.fromkeys(rows["point"].astype(str)):
        drop = {point, *exclude}
        fitted = law.fit(rows[~rows["point"].astype(str).isin(drop)])
        for _, r in rows[rows["point"].astype(str) == point].iterrows():
            out[_key(r)] = fitted.predict(_config(r))
    return out


def curve_forecasts(rows: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The partial-curve forecasts of every transitioned run at :data:`CALIBRATION_FRACTIONS` of
    its plateau, both as read alone (``plain``) and within the combination (``extended``)."""
    out = []
    for _, r in rows[_transitioned(rows)].iterrows():
        c = curves[(curves["point"] == r["point"]) & (curves["seed"] == r["seed"])]
        span = _plateau(c)
        if span is None:
            continue
        start, onset = span
        for f in CALIBRATION_FRACTIONS:
            cut = start + f * (onset - start)
            part = c[c["step"] <= cut]
            seen = float(part["step"].iloc[-1]) if len(part) else 0.0
            plain, plain_method = curve_step(part, _task(r), extended=False)
            ext, ext_method = curve_step(part, _task(r), extended=True)
            out.append(
                {
                    "point": r["point"],
                    "seed": int(r["seed"]),
                    "fraction": f,
                    "seen": seen,
                    "observed": float(r["transition_step"]),
                    "plain": plain,
                    "plain_method": plain_method,
                    "extended": ext,
                    "extended_method": ext_method,
                }
            )
    return pd.DataFrame(out)


def _log_error(pred, obs: float) -> float:
    if pred is None or not math.isfinite(pred) or pred <= 0:
        return math.nan
    return abs(math.log(pred / obs))


def combined_scores(
    rows: pd.DataFrame,
    curves: pd.DataFrame,
    law: LogLinearLaw = LAW,
    forecasts: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (held-out run, fraction of :data:`FRACTIONS`): the law's, the curve
    forecaster's and the combination's forecasts, errors and whether their 80% interval holds the
    run's step (the curve forecaster alone: its own stated interval). ``forecasts``: what
    :func:`curve_forecasts` gives for these rows and curves, when the caller has it already."""
    fc = curve_forecasts(rows, curves) if forecasts is None else forecasts
    if fc.empty:
        return pd.DataFrame()
    priors = _priors(rows, law)
    out = []
    for point in dict.fromkeys(fc["point"]):
        inner = _priors(rows, law, exclude=[point])  # the other runs' priors, without this point
        cal = calibrate(calibration_rows(fc[fc["point"] != point], inner))
        test = fc[(fc["point"] == point) & fc["fraction"].isin(FRACTIONS)]
        for _, t in test.iterrows():
            prior = priors[(point, int(t["seed"]))]
            ext = None if pd.isna(t["extended"]) else float(t["extended"])
            post = combine(prior, ext, t["extended_method"], t["seen"], cal)
            obs = float(t["observed"])
            out.append(
                {
                    "point": point,
                    "seed": int(t["seed"]),
                    "fraction": t["fraction"],
                    "seen": t["seen"],
                    "observed": obs,
                    "law": prior.step,
                    "law_error": _log_error(prior.step, obs),
                    "law_covered": bool(prior.low <= obs <= prior.high),
                    "curve": t["plain"],
                    "curve_method": t["plain_method"],
                    "curve_error": _log_error(t["plain"], obs),
                    "combined": post.step,
                    "combined_error": _log_error(post.step, obs),
                    "combined_covered": bool(post.low <= obs <= post.high),
                }
            )
    return pd.DataFrame(out)


def summarize_combined(scores: pd.DataFrame) -> pd.DataFrame:
    """Per fraction: runs, the median ``|log error|`` of the law, the curve forecaster (over the
    runs it forecasts) and the combination (over all runs and over the curve's runs), and the
    80% coverage of the law and the combination."""
    out = []
    for f, g in scores.groupby("fraction", sort=True):
        has_curve = g["curve_error"].notna()
        out.append(
            {
                "fraction": f,
                "runs": len(g),
                "law": g["law_error"].median(),
                "law_coverage": g["law_covered"].mean(),
                "curve_runs": int(has_curve.sum()),
                "curve": g.loc[has_curve, "curve_error"].median(),
                "combined": g["combined_error"].median(),
                "combined_on_curve_runs": g.loc[has_curve, "combined_error"].median(),
                "combined_coverage": g["combined_covered"].mean(),
            }
        )
    return pd.DataFrame(out)


def combined_gaps(scores: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per fraction and part (``law`` over all runs, ``curve`` over the runs it forecasts): the
    combination's median ``|log error|`` minus the part's, and its 95% bootstrap interval, whole
    configurations resampled with their runs (a configuration's seeds share its prior, so their
    errors move together).

    Returns:
        Rows ``fraction, part, gap, low, high`` (a positive gap: the combination is worse).
    """
    rng = np.random.default_rng(seed)
    out = []
    for f, g in scores.groupby("fraction", sort=True):
        for part, col in (("law", "law_error"), ("curve", "curve_error")):
            h = g[g[col].notna()]
            if h.empty:
                continue
            by = [
                (c["combined_error"].to_numpy(float), c[col].to_numpy(float))
                for _, c in h.groupby("point", sort=False)
            ]

            def gap(pick, by=by) -> float:
                a = np.concatenate([by[i][0] for i in pick])
                b = np.concatenate([by[i][1] for i in pick])
                return float(np.median(a) - np.median(b))

            boot = [gap(rng.integers(0, len(by), len(by))) for _ in range(n_boot)]
            lo, hi = np.percentile(boot, [2.5, 97.5])
            out.append(
                {
                    "fraction": f,
                    "part": part,
                    "gap": gap(range(len(by))),
                    "low": float(lo),
                    "high": float(hi),
                }
            )
    return pd.DataFrame(out, columns=["fraction", "part", "gap", "low", "high"])


# ---------------------------------------------------------------------------------------------
# early warning


def auroc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """The probability that a positive scores above a negative (ties count one half)."""
    p, n = np.asarray(pos, float), np.asarray(neg, float)
    if not len(p) or not len(n):
        return math.nan
    above = (p[:, None] > n[None, :]).sum()  # comparisons, not differences: -inf ties -inf
    tied = (p[:, None] == n[None, :]).sum()
    return float((above + 0.5 * tied) / (len(p) * len(n)))


SIGNALS = ("progress", "template", "law")


def _signals(c: pd.DataFrame, r, prior, t: float) -> dict[str, float]:
    """The three signals of run ``r`` seen up to step ``t`` (higher: a transition more likely)."""
    from phenomenology.forecast import forecast_curve

    part = c[c["step"] <= t]
    budget = float(r["budget"])
    out = {"law": prior.p_within(budget, seen=t)}
    tila = part["tila2"].dropna() if "tila2" in part else pd.Series([], dtype=float)
    if len(tila) >= 3 and tila.iloc[0] > 0:
        out["progress"] = float(tila.iloc[-3:].mean() / tila.iloc[0] - 1.0)
    else:
        out["progress"] = -math.inf
    fc = None
    if len(part.dropna(subset=["ic_loss"])) >= 5:
        fc = forecast_curve(part["step"], part["ic_loss"], task=_task(r), check_plateau=False)
    out["template"] = math.log(budget / fc.step) if fc is not None and fc.ok else -math.inf
    return out


def warning_signals(rows: pd.DataFrame, curves: pd.DataFrame, law: LogLinearLaw = LAW):
    """Every run's signals at :data:`WARNING_GRID` steps over its budget (rows ``point, seed,
    step, positive, transition_step, progress, template, law``); a run's observations stop at its
    transition."""
    priors = _priors(rows, law)
    out = []
    for _, r in rows.iterrows():
        c = curves[(curves["point"] == r["point"]) & (curves["seed"] == r["seed"])]
        budget = float(r["budget"])
        t_step = float(r["transition_step"]) if _transitioned(r.to_frame().T).iloc[0] else math.inf
        positive = t_step <= budget
        grid = sorted(
            {
                *(budget * (j + 1) / WARNING_GRID for j in range(WARNING_GRID)),
                *(budget * f for f in WARNING_FRACTIONS),
            }
        )
        for t in grid:
            if t >= t_step or t > float(c["step"].max()):
                break
            s = _signals(c, r, priors[_key(r)], t)
            out.append(
                {
                    "point": r["point"],
                    "seed": int(r["seed"]),
                    "step": t,
                    "fraction": t / budget,
                    "positive": positive,
                    "transition_step": t_step,
                    **s,
                }
            )
    return pd.DataFrame(out)


def early_warning(signals: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """AUROC per signal at :data:`WARNING_FRACTIONS` of the budget, and the lead time at a 5%
    false-positive rate, each with a 95% bootstrap interval (runs resampled within their class).

    Returns:
        Rows ``signal, measure, at, value, low, high, positives, negatives`` (``measure`` is
        ``auroc`` at ``at`` = the fraction of the budget, or ``lead`` (median lead time over
        the positives, as a fraction of their transition step; 0 for a positive never warned
        before its transition) and ``warned`` (the share of positives warned) at ``at`` = 0.05,
        the false-positive rate).
    """
    rng = np.random.default_rng(seed)
    out = []
    runs = signals.groupby(["point", "seed"], sort=False)
    labels = runs["positive"].first()
    pos_runs = labels.index[labels].tolist()
    neg_runs = labels.index[~labels].tolist()

    def boot(stat):
        vals = []
        for _ in range(n_boot):
            p = [pos_runs[i] for i in rng.integers(0, len(pos_runs), len(pos_runs))]
            n = [neg_runs[i] for i in rng.integers(0, len(neg_runs), len(neg_runs))]
            v = stat(p, n)
            if math.isfinite(v):
                vals.append(v)
        return np.percentile(vals, [2.5, 97.5]) if vals else (math.nan, math.nan)

    for f in WARNING_FRACTIONS:
        at = signals[np.isclose(signals["fraction"], f)].set_index(["point", "seed"])
        for s in SIGNALS:
            col = at[s]

            def stat(p, n, col=col):
                return auroc(col.reindex(p).dropna(), col.reindex(n).dropna())

            pos = [k for k in pos_runs if k in col.index]
            neg = [k for k in neg_runs if k in col.index]
            lo, hi = boot(stat) if pos and neg else (math.nan, math.nan)
            out.append(
                {
                    "signal": s,
                    "measure": "auroc",
                    "at": f,
                    "value": stat(pos, neg),
                    "low": lo,
                    "high": hi,
                    "positives": len(pos),
                    "negatives": len(neg),
                }
            )
    for s in SIGNALS:
        peak = runs[s].max()
        first = {k: g for k, g in runs}

        def lead(p, n, s=s, peak=peak, first=first):
            return _lead(p, n, s, peak, first)[0]

        def warned(p, n, s=s, peak=peak, first=first):
            return _lead(p, n, s, peak, first)[1]

        for name, stat in (("lead", lead), ("warned", warned)):
            lo, hi = boot(stat)
            out.append(
                {
                    "signal": s,
                    "measure": name,
                    "at": 0.05,
                    "value": stat(pos_runs, neg_runs),
                    "low": lo,
                    "high": hi,
                    "positives": len(pos_runs),
                    "negatives": len(neg_runs),
                }
            )
    return pd.DataFrame(out)


def _lead(pos, neg, s: str, peak: pd.Series, first: dict) -> tuple[float, float]:
    """(median lead / transition step, share warned) of the positives ``pos`` at the threshold
    that warns at most 5% of the negatives ``neg`` at any step of their budget."""
    if not pos or not neg:
        return math.nan, math.nan
    n_peaks = np.sort(peak.reindex(neg).to_numpy(float))
    allowed = int(math.floor(0.05 * len(n_peaks)))  # negatives that may be warned
    # the threshold: above every negative's peak but the ``allowed`` highest
    tau = np.nextafter(n_peaks[len(n_peaks) - allowed - 1], math.inf)
    leads, warned = [], 0
    for k in pos:
        g = first[k]
        hit = g[g[s] >= tau]
        if len(hit):
            warned += 1
            leads.append(1.0 - float(hit["step"].iloc[0]) / float(g["transition_step"].iloc[0]))
        else:
            leads.append(0.0)
    return float(np.median(leads)), warned / len(pos)
