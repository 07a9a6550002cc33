"""Early-warning signals scored on held-out configurations.

The held-out counterpart of :func:`experiments.transition_scores.early_warning`: there, a signal's
direction is taken as given and its threshold is read off the very runs it is scored on; here,
every choice fitted from data (a signal's sign, the logistic combination of all signals, the
warning threshold) is fitted leave-one-configuration-out, on the other configurations' runs, and
only then applied to the held-out configuration's runs. The held-out scores of all configurations
are pooled before scoring.

The input, ``signals``, has one row per (run, observation step), with columns ``config`` (the
unit held out), ``point`` and ``seed`` (the run), ``step``, ``fraction`` (step / the run's
budget), ``positive`` (the run transitioned within its budget, or, for the collapse, died),
``transition_step`` (inf for negatives) and one float column per signal, NaN where the signal
could not be measured. A run's rows stop at its transition, so at a given fraction only the runs
with a row there are scored.

- :func:`oriented`: the sign under which a signal's AUROC is at least 0.5 on given rows;
- :func:`held_out_auroc`: the AUROC per signal and of their combination at fractions of the
  budget, with 95% bootstrap intervals;
- :func:`held_out_lead`: the median lead time, the share of positives warned and the realised
  false-positive rate at a threshold fitted for a target false-positive rate;
- :func:`verdict_table`: both as markdown tables and a one-sentence verdict on the goal.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from experiments.transition_scores import WARNING_FRACTIONS, auroc

__all__ = [
    "COMBINED",
    "L2",
    "held_out_auroc",
    "held_out_lead",
    "oriented",
    "verdict_table",
]

COMBINED = "combined"
"""The signal name of the logistic combination of all signals."""
L2 = 1.0
"""The L2 penalty on the combination's weights (on standardized signals; the intercept is not
penalized), against a log-likelihood summed over the training rows."""
KEY = ["point", "seed"]
AUROC_COLUMNS = ["signal", "at", "auroc", "low", "high", "positives", "negatives", "configurations"]
LEAD_COLUMNS = ["signal", "lead", "warned", "false_positive_rate", "positives", "negatives"]


def oriented(train: pd.DataFrame, name: str) -> int:
    """The sign (+1 or -1) under which signal ``name`` has an AUROC of at least 0.5 on the rows
    ``train`` (every row counted: its ``positive`` against the others; NaN values skipped), so
    that a higher oriented value warns. +1 on a tie at 0.5, and when the rows lack a class."""
    values = train[name].to_numpy(float)
    label = train["positive"].to_numpy(bool)
    keep = ~np.isnan(values)
    a = auroc(values[keep & label], values[keep & ~label])
    return -1 if a < 0.5 else 1  # NaN (a class missing) compares False: +1


def _check(signals: pd.DataFrame, names: Sequence[str]) -> None:
    need = ["config", *KEY, "step", "fraction", "positive", "transition_step", *names]
    missing = [c for c in need if c not in signals.columns]
    if missing:
        raise ValueError(f"signals lack the columns {missing}")
    if COMBINED in names:
        raise ValueError(f"{COMBINED!r} names the combination and cannot name a signal")
    if signals["config"].nunique() < 2:
        raise ValueError(
            "leave-one-configuration-out needs at least 2 values of `config`, got "
            f"{signals['config'].nunique()}"
        )


def _standardize(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    z = (x - mean) / sd
    return np.where(np.isfinite(z), z, 0.0)


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights (intercept first) of an L2-penalized logistic regression of ``y`` on ``x``, by
    Newton's method with step halving."""
    a = np.column_stack([np.ones(len(x)), x])
    pen = np.full(a.shape[1], l2)
    pen[0] = 0.0

    def objective(w):
        eta = a @ w
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)) - 0.5 * np.sum(pen * w * w))

    w = np.zeros(a.shape[1])
    current = objective(w)
    for _ in range(100):
        p = 0.5 * (1.0 + np.tanh(0.5 * (a @ w)))  # the logistic function, without overflow
        grad = a.T @ (y - p) - pen * w
        hess = (a * (p * (1.0 - p))[:, None]).T @ a + np.diag(pen) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-8 and objective(w + t * step) < current:
            t /= 2
        trial = objective(w + t * step)
        if trial < current:  # no step improves: at the optimum to rounding
            break
        w, gain, current = w + t * step, trial - current, trial
        if np.max(np.abs(t * step)) < 1e-10 or gain < 1e-12:
            break
    return w


class _Model:
    """The logistic combination fitted on ``train``: standardize each signal with the training
    rows' mean and sd (over finite values), non-finite after standardizing -> 0, then the linear
    score of an L2-penalized logistic regression. A ``train`` lacking a class gives a score of 0
    for every row (no information); a row with no finite signal gives NaN (not scored)."""

    def __init__(self, train: pd.DataFrame, names: Sequence[str]):
        self.names = list(names)
        x = train[self.names].to_numpy(float)
        y = train["positive"].to_numpy(bool)
        finite = np.where(np.isfinite(x), x, np.nan)
        with warnings.catch_warnings():  # an all-NaN column: NaN, set below
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(finite, axis=0)
            sd = np.nanstd(finite, axis=0)
        self.mean = np.where(np.isfinite(mean), mean, 0.0)
        self.sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
        self.w = None
        if y.any() and (~y).any():
            self.w = _fit_logistic(_standardize(x, self.mean, self.sd), y.astype(float))

    def score(self, rows: pd.DataFrame) -> np.ndarray:
        x = rows[self.names].to_numpy(float)
        seen = np.isfinite(x).any(axis=1)
        if self.w is None:
            s = np.zeros(len(rows))
        else:
            s = self.w[0] + _standardize(x, self.mean, self.sd) @ self.w[1:]
        return np.where(seen, s, np.nan)


def _held_out_values(
    fit: pd.DataFrame, apply: Sequence[pd.DataFrame], names: Sequence[str]
) -> list[dict[str, np.ndarray]]:
    """Each signal's oriented values (and the combination's linear score) on each frame of
    ``apply``, with the sign and the model fitted on ``fit``."""
    signs = {s: oriented(fit, s) for s in names}
    model = _Model(fit, names)
    out = []
    for rows in apply:
        v = {s: signs[s] * rows[s].to_numpy(float) for s in names}
        v[COMBINED] = model.score(rows)
        out.append(v)
    return out


def held_out_auroc(
    signals: pd.DataFrame,
    names: Sequence[str],
    fractions: Sequence[float] = WARNING_FRACTIONS,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """The held-out AUROC of each signal and of their logistic combination at ``fractions`` of
    the budget.

    At fraction ``f`` (rows matched with ``np.isclose``; a run's first row there), for every
    configuration ``c``: each signal's sign is fitted by :func:`oriented` on the other
    configurations' rows at ``f`` (+1 where they lack a class), and the combination (``combined``:
    the signals standardized with those rows' finite values' mean and sd, a NaN or infinite value
    -> 0 after standardizing, then a
    logistic regression with an L2 penalty of :data:`L2`; a score of 0 for every run where those
    rows lack a class) is fitted on the same rows; ``c``'s runs at ``f`` are scored with them.
    The held-out scores of all configurations are pooled and scored with
    :func:`~experiments.transition_scores.auroc`. A run whose value is NaN is not scored for
    that signal (for the combination: when all its signals are NaN). The 95% interval resamples
    the scored runs within their class (``n_boot`` times; the folds are not refitted).

    Returns:
        Rows ``signal, at, auroc, low, high, positives, negatives, configurations`` (the runs
        scored and the configurations they come from; AUROC and interval NaN where a class has
        no run scored).

    Raises:
        ValueError: fewer than 2 values of ``config``, or a column missing.
    """
    names = list(names)
    _check(signals, names)
    rng = np.random.default_rng(seed)
    out = []
    for f in fractions:
        at = signals[np.isclose(signals["fraction"].to_numpy(float), f)].drop_duplicates(KEY)
        parts = []
        for c in dict.fromkeys(at["config"]):
            held = at[at["config"] == c]
            (v,) = _held_out_values(at[at["config"] != c], [held], names)
            parts.append(held[["config", "positive"]].assign(**v))
        pooled = pd.concat(parts) if parts else pd.DataFrame(columns=["config", "positive"])
        for s in [*names, COMBINED]:
            values = pooled[s].to_numpy(float) if s in pooled else np.array([])
            keep = ~np.isnan(values)
            label = pooled["positive"].to_numpy(bool)
            pos, neg = values[keep & label], values[keep & ~label]
            lo, hi = _boot(pos, neg, n_boot, rng)
            out.append(
                {
                    "signal": s,
                    "at": f,
                    "auroc": auroc(pos, neg),
                    "low": lo,
                    "high": hi,
                    "positives": len(pos),
                    "negatives": len(neg),
                    "configurations": pooled.loc[keep, "config"].nunique() if len(pooled) else 0,
                }
            )
    return pd.DataFrame(out, columns=AUROC_COLUMNS)


def _boot(pos: np.ndarray, neg: np.ndarray, n_boot: int, rng) -> tuple[float, float]:
    """The 95% percentile interval of the AUROC, runs resampled within their class."""
    if not len(pos) or not len(neg) or n_boot < 1:
        return math.nan, math.nan
    vals = [
        auroc(pos[rng.integers(0, len(pos), len(pos))], neg[rng.integers(0, len(neg), len(neg))])
        for _ in range(n_boot)
    ]
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def _threshold(peaks: np.ndarray, fpr: float) -> float:
    """The smallest value above every negative's peak but the ``floor(fpr * n)`` highest (inf
    without negatives)."""
    n = len(peaks)
    if not n:
        return math.inf
    allowed = int(math.floor(fpr * n))
    if allowed >= n:
        return -math.inf
    return float(np.nextafter(np.sort(peaks)[n - allowed - 1], math.inf))


def held_out_lead(
    signals: pd.DataFrame, names: Sequence[str], fpr: float = 0.05, window: float = 0.3
) -> pd.DataFrame:
    """The lead time of each signal and of their combination at a threshold fitted, leave-one-
    configuration-out, for a false-positive rate of ``fpr``.

    For every configuration ``c``, on the other configurations' runs: each signal's sign is
    fitted by :func:`oriented` on all their rows up to ``window`` of the budget, pooled over steps
    (+1 where those rows lack a class), and the combination (as in :func:`held_out_auroc`, its
    oriented value the model's linear score) on the same rows; the threshold ``tau`` is the
    smallest value such that at most ``fpr`` of their negative runs reach an oriented value
    ``>= tau`` at any of their rows (above every negative's peak but the ``floor(fpr * n)``
    highest, as in :func:`early_warning`; a negative never measured counts, never reaching it).
    Applied to ``c``'s runs, every row of the run before its transition: a positive is warned at
    its first row with an oriented value ``>= tau``, its lead ``1 - step / transition_step`` (0
    when never warned); a negative warned at any row is a false positive.

    Returns:
        Rows ``signal, lead, warned, false_positive_rate, positives, negatives``, pooled over
        the held-out configurations: the median lead over the positives, the share of positives
        warned, the share of negatives warned (the realised false-positive rate), and the runs.

    Raises:
        ValueError: fewer than 2 values of ``config``, or a column missing.
    """
    names = list(names)
    _check(signals, names)
    rows = signals.sort_values([*KEY, "step"], kind="stable")
    rows = rows[rows["step"].to_numpy(float) < rows["transition_step"].to_numpy(float)]
    leads: dict[str, list[float]] = {s: [] for s in [*names, COMBINED]}
    hits: dict[str, list[bool]] = {s: [] for s in leads}  # per positive: warned
    false: dict[str, list[bool]] = {s: [] for s in leads}  # per negative: warned
    for c in dict.fromkeys(signals["config"]):
        train, held = rows[rows["config"] != c], rows[rows["config"] == c]
        fit = train[train["fraction"].to_numpy(float) <= window + 1e-9]
        v_train, v_held = _held_out_values(fit, [train, held], names)
        neg_train = ~train["positive"].to_numpy(bool)
        neg_runs = pd.MultiIndex.from_frame(train.loc[neg_train, KEY])
        held_runs = list(held.groupby(KEY, sort=False).indices.values())
        steps = held["step"].to_numpy(float)
        for s in leads:
            peaks = (
                pd.Series(v_train[s][neg_train], index=neg_runs)
                .groupby(level=[0, 1], sort=False)
                .max()  # NaN skipped; a run never measured: NaN, then -inf
                .fillna(-math.inf)
                .to_numpy(float)
            )
            tau = _threshold(peaks, fpr)
            for idx in held_runs:
                hit = np.flatnonzero(v_held[s][idx] >= tau)  # NaN never warns
                r = held.iloc[idx[0]]
                if bool(r["positive"]):
                    warned = bool(len(hit))
                    t = float(r["transition_step"])
                    leads[s].append(1.0 - steps[idx[hit[0]]] / t if warned else 0.0)
                    hits[s].append(warned)
                else:
                    false[s].append(bool(len(hit)))
    out = []
    for s in leads:
        lead, warned, fp = (np.asarray(x[s], float) for x in (leads, hits, false))
        out.append(
            {
                "signal": s,
                "lead": float(np.median(lead)) if len(lead) else math.nan,
                "warned": float(warned.mean()) if len(warned) else math.nan,
                "false_positive_rate": float(fp.mean()) if len(fp) else math.nan,
                "positives": len(lead),
                "negatives": len(fp),
            }
        )
    return pd.DataFrame(out, columns=LEAD_COLUMNS)


def _f(v: float, spec: str = ".2f") -> str:
    return "n/a" if v is None or not math.isfinite(float(v)) else format(float(v), spec)


def verdict_table(
    auroc_rows: pd.DataFrame,
    lead_rows: pd.DataFrame,
    goal_auroc: float = 0.95,
    goal_lead: float = 0.3,
    at: float = 0.1,
    fpr: float = 0.05,
) -> list[str]:
    """Markdown lines: a table per fraction of :func:`held_out_auroc`'s rows (AUROC and 95%
    interval per signal), the table of :func:`held_out_lead`'s rows, and one sentence: which
    signal (or the combination) came closest to the goal (AUROC >= ``goal_auroc`` at ``at`` of
    the budget with a median lead >= ``goal_lead`` at ``fpr`` false positives, ``fpr`` being the
    rate ``lead_rows`` were fitted for), whether it is met, and which signals carry information
    and which do not. Information: the 95% interval at ``at`` above 0.5. An interval below 0.5
    also excludes 0.5 but is named apart: the signals are oriented on the other configurations,
    so a held-out AUROC below 0.5 says the fitted direction reverses on held-out configurations
    (a pure-noise signal tends below 0.5 too, and the interval, from resampling runs without
    refitting the folds, does not widen for it), not that the signal warns.

    Closest: the smallest summed shortfall, ``max(0, goal_auroc - auroc) / (goal_auroc - 0.5)``
    plus ``max(0, goal_lead - lead) / goal_lead`` (a signal without a score: never closest; the
    first listed on a tie).
    """
    lines: list[str] = []
    for f, g in auroc_rows.groupby("at", sort=True):
        lines += [
            f"Held-out AUROC at {_f(f, '.0%')} of the budget:",
            "",
            "| signal | AUROC | 95% interval | positives | negatives | configurations |",
            "|---|---|---|---|---|---|",
        ]
        for _, r in g.iterrows():
            lines.append(
                f"| {r['signal']} | {_f(r['auroc'])} | [{_f(r['low'])}, {_f(r['high'])}] "
                f"| {int(r['positives'])} | {int(r['negatives'])} | {int(r['configurations'])} |"
            )
        lines.append("")
    lines += [
        f"Held-out lead time at a threshold fitted for {_f(fpr, '.0%')} false positives:",
        "",
        "| signal | median lead | positives warned | false-positive rate | positives | negatives |",
        "|---|---|---|---|---|---|",
    ]
    for _, r in lead_rows.iterrows():
        lines.append(
            f"| {r['signal']} | {_f(r['lead'])} | {_f(r['warned'], '.0%')} "
            f"| {_f(r['false_positive_rate'], '.0%')} | {int(r['positives'])} "
            f"| {int(r['negatives'])} |"
        )
    lines.append("")
    goal = (
        f"AUROC >= {goal_auroc:g} at {_f(at, '.0%')} of the budget with a median lead >= "
        f"{goal_lead:g} at {_f(fpr, '.0%')} false positives"
    )
    here = auroc_rows[np.isclose(auroc_rows["at"].to_numpy(float), at)]
    if here.empty:
        lines.append(
            f"No signal was scored at {_f(at, '.0%')} of the budget; the goal ({goal}) is not met."
        )
        return lines
    lead = dict(zip(lead_rows["signal"], lead_rows["lead"].astype(float)))
    fp = dict(zip(lead_rows["signal"], lead_rows["false_positive_rate"].astype(float)))
    best, best_gap = None, math.inf
    for _, r in here.iterrows():
        a, ld = float(r["auroc"]), lead.get(r["signal"], math.nan)
        gap = max(0.0, goal_auroc - a) / (goal_auroc - 0.5) + max(0.0, goal_lead - ld) / goal_lead
        if math.isfinite(gap) and gap < best_gap:
            best, best_gap = r, gap
    above = [str(r["signal"]) for _, r in here.iterrows() if r["low"] > 0.5]
    below = [str(r["signal"]) for _, r in here.iterrows() if r["high"] < 0.5]
    empty = [str(r["signal"]) for _, r in here.iterrows() if str(r["signal"]) not in above + below]
    info = (
        f"Carrying information (95% interval at {_f(at, '.0%')} above 0.5): "
        f"{', '.join(above) or 'none'}; not (the interval holds 0.5 or is missing): "
        f"{', '.join(empty) or 'none'}."
    )
    if below:
        info += (
            f" Below 0.5, the direction fitted on the other configurations reversing on the "
            f"held-out ones: {', '.join(below)}."
        )
    if best is None:
        lines.append(f"No signal has both scores; the goal ({goal}) is not met. {info}")
        return lines
    s = str(best["signal"])
    met = best_gap == 0.0
    lines.append(
        f"Closest to the goal ({goal}): {s}, AUROC {_f(best['auroc'])} "
        f"[{_f(best['low'])}, {_f(best['high'])}] and a median lead of {_f(lead[s])} "
        f"(realised false-positive rate {_f(fp[s], '.0%')}); the goal is "
        f"{'met' if met else 'not met'}. {info}"
    )
    return lines
