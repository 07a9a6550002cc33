"""A law of the transition step across configurations, four baselines, and their held-out scores.

Every model here predicts ``log T``, the logarithm of a run's transition step (its IC-loss cliff),
from the run's configuration alone, before anything is trained, with an 80% predictive interval:

- :data:`LAW`, the toolkit's law: the fourth law fitted for the median. The third law is
  fitted with a soft-L1 loss (:data:`FLOW_MEDIAN`), so that it follows a configuration's median
  step and its late seeds (the seeds' step is skewed late) pull it less, and the correction is
  fitted to each configuration's median error. The median, because a forecast's median
  absolute error is what the held-out scores read. Chosen after the points declared to test
  the fourth law were read;
- :data:`FOURTH_LAW`, the fourth law (:class:`CorrectedLaw`): the third law below plus a
  Gaussian-process correction of its error across configurations, which takes out the third
  law's local bias near the data and fades, with a growing variance, away from them, both
  fitted for the mean (least squares, each configuration's mean error). It was chosen after
  five of the nine points declared to test the third law were read;
  :data:`experiments.catalog.transition_law.LATER` holds the points declared after each
  law;
- :data:`FLOW_LAW`, the third law (:class:`FlowLaw`): plain SGD's steps are a gradient-flow time
  ``tau`` over the learning rate, stretched by a finite-step factor ``1 + kappa lr tau``; ``tau``
  is a power of ``P = L! / ((L - n)! L^n)`` (``n = N / B``), of ``1 - 1/n`` (the error of
  copying a random label of the context) and of ``N``, ``L``, ``K``, ``eps`` and ``p_C``.
  ``-log P`` is the total correlation of a bursty context's ``n`` labels, which the task draws
  pairwise distinct (``P`` is the chance that ``n`` labels drawn independently would be: the
  birthday problem); it grows as ``n^2 / 2L`` for ``n`` much below ``L`` and steepens towards
  ``n = L``. The form was chosen, after the second law failed on points declared after it,
  because it fitted. At a term's limit (``p_C = 0``; ``n > L``, which the task refuses) the sign
  of its fitted coefficient decides: no transition, or a step sent to 0 (no forecast);
- :data:`THRESHOLD_LAW`, the second law: ``T`` grows as a power of the distractor classes of a
  context, ``n - 1``, times a threshold factor ``(1 - n/L)^g`` that vanishes at ``L = n``
  (where the nested-logit model has no transition; docs/science.md section 4), powers of ``L``,
  ``K``, ``eps`` and ``p_C``, and a power law in the learning rate and ``N`` whose ``N``
  exponent moves with the learning rate. Points declared after it contradicted it where the
  classes near ``L`` (``L16-N14`` did not transition in 32k steps);
- :data:`DRIVE_LAW`, the first law: a power law in the learning rate, ``N``, ``K``, ``eps`` and
  ``p_C``, times a power of the nested-logit model's initial drive ``1/n - 1/L``, which carries
  ``L`` and ``B``. Points declared after it contradicted its ``1/L`` term;
- :data:`FREE_POWER_LAW`: a free power law in ``K``, ``B``, ``N`` and the learning rate;
- :data:`TOKENS_FORM`: induction heads form after about ``T sqrt(B C)`` training tokens (Aoyama et
  al. 2025: ``B`` the batch size, ``C`` the context length), so ``steps ∝ 1 / sqrt(B C)``;
- :data:`N2_FORM`: the emergence time grows as the square of the context length (Musat et al.
  2025), ``steps ∝ N^2``;
- :class:`NearestConfiguration`: the mean ``log T`` of the nearest configuration of the data.

The two published forms state no dependence on the learning rate, which the data vary; they are
given plain SGD's time scale, ``steps ∝ 1 / lr`` (gradient flow's time is ``steps x lr``), and a
free constant, and are otherwise as published. Each log-linear model is fitted by least squares
on the runs that transitioned (one row per run, so a configuration counts by its seeds); its 80%
interval is the Student-t predictive interval of the fit (for :class:`FlowLaw`, through the
Jacobian of the fit, to first order). Runs that did not transition within
their budget are not fitted (their step is censored); :func:`leave_one_out` scores every model on
configurations held out one at a time.

The forms and their fits live in :mod:`phenomenology.law_forms`, the correction in
:mod:`phenomenology.law_correction`; this module names the models, scores them, and holds the
stored law that ``induction-cliff forecast`` and the partial-curve forecasters read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from phenomenology.law_correction import GP_FIELDS, CorrectedLaw, FittedCorrected, GaussianProcess
from phenomenology.law_forms import (
    FIELDS,
    TERMS,
    Z80,
    FittedLaw,
    FittedNearest,
    FlowLaw,
    LogLinearLaw,
    NearestConfiguration,
    Prediction,
    _transitioned,
    config_key,
    drive,
    log_p_distinct,
    term_fields,
)

__all__ = [
    "all_models",
    "CorrectedLaw",
    "drive",
    "DRIVE_LAW",
    "FIELDS",
    "fitted_from_dict",
    "FittedCorrected",
    "FittedLaw",
    "FittedNearest",
    "floor",
    "FLOW_LAW",
    "FLOW_MEDIAN",
    "FlowLaw",
    "forecast_later",
    "FOURTH_LAW",
    "FREE_POWER_LAW",
    "GaussianProcess",
    "GP_FIELDS",
    "LAW",
    "law_inputs",
    "law_prior",
    "leave_one_out",
    "log_p_distinct",
    "LogLinearLaw",
    "MODELS",
    "N2_FORM",
    "NearestConfiguration",
    "power_exponent",
    "Prediction",
    "StoredLaw",
    "term_fields",
    "TERMS",
    "THRESHOLD_LAW",
    "TOKENS_FORM",
    "Z80",
]

FLOW_LAW = FlowLaw(
    name="flow",
    label="the third law (gradient-flow time x label correlation)",
    terms=(
        "log P(distinct labels)",
        "log (1-1/n)",
        "log N",
        "log L",
        "log K",
        "log eps",
        "log p_C",
    ),
)
THRESHOLD_LAW = LogLinearLaw(
    name="threshold",
    label="the second law (distractor classes x threshold at n = L)",
    terms=(
        "log lr",
        "log N",
        "log lr x log N",
        "log K",
        "log eps",
        "log p_C",
        "log (n-1)",
        "log (1-n/L)",
        "log L",
    ),
)
DRIVE_LAW = LogLinearLaw(
    name="drive",
    label="the first law (power law x drive 1/n - 1/L)",
    terms=("log lr", "log N", "log K", "log eps", "log p_C", "log drive"),
)
FREE_POWER_LAW = LogLinearLaw(
    name="free", label="free power law in K, B, N, lr", terms=("log lr", "log N", "log B", "log K")
)
TOKENS_FORM = LogLinearLaw(name="tokens", label="sqrt(B C) tokens form", terms=(), offset="tokens")
N2_FORM = LogLinearLaw(name="n2", label="N^2-in-steps form", terms=(), offset="N2")


def fitted_from_dict(d: Mapping):
    """A stored fit of any model of :data:`MODELS`, by its ``model`` name."""
    model = next(m for m in MODELS if m.name == d["model"])
    return (FittedCorrected if isinstance(model, CorrectedLaw) else FittedLaw).from_dict(d, model)


FOURTH_LAW = CorrectedLaw(
    name="fourth",
    label="the fourth law (the third law + a Gaussian-process correction)",
    base=FLOW_LAW,
)
FLOW_MEDIAN = FlowLaw(
    name="flow-median",
    label="the third law fitted for the median (soft-L1 loss)",
    terms=FLOW_LAW.terms,
    loss="soft_l1",
    f_scale=0.1,
)
LAW = CorrectedLaw(
    name="law",
    label="the law (the fourth law fitted for the median)",
    base=FLOW_MEDIAN,
    target="median",
)


MODELS = (
    LAW,
    FOURTH_LAW,
    FLOW_LAW,
    THRESHOLD_LAW,
    DRIVE_LAW,
    FREE_POWER_LAW,
    TOKENS_FORM,
    N2_FORM,
    FLOW_MEDIAN,
)
"""The log-linear models (and the corrected ones), the law first."""


def all_models() -> list:
    return [
        LAW,
        FOURTH_LAW,
        FLOW_LAW,
        THRESHOLD_LAW,
        DRIVE_LAW,
        NearestConfiguration(),
        TOKENS_FORM,
        N2_FORM,
        FREE_POWER_LAW,
    ]


def leave_one_out(rows: pd.DataFrame, models: Sequence | None = None) -> pd.DataFrame:
    """Every model fitted without one configuration and scored on that configuration's runs.

    Returns:
        One row per (model, held-out run): ``model, point, seed, observed, predicted, low, high,
        abs_log_error, covered`` (observed: the run's transition step; runs that did not
        transition are left out; a prediction of no transition counts as an infinite error).
    """
    models = all_models() if models is None else list(models)
    key = config_key(rows)
    out = []
    held = rows[_transitioned(rows)]
    for point in dict.fromkeys(config_key(held)):
        train = rows[key != point]
        test = held[config_key(held) == point]
        for m in models:
            fitted = m.fit(train)
            out += [_scored(m, fitted, r, float(r["transition_step"])) for _, r in test.iterrows()]
    return pd.DataFrame(out)


def _scored(model, fitted, r: pd.Series, observed: float, budget: float | None = None) -> dict:
    """One held-out run's row: the fitted model's forecast of its configuration against its
    ``observed`` step (NaN: it did not transition, and has no error; a forecast of no
    transition of a run that did is an infinite error), and with a ``budget`` the forecast's
    probability of a transition within it (``p_within``)."""
    p = fitted.predict({f: float(r[f]) for f in FIELDS})
    within = {} if budget is None else {"budget": budget, "p_within": p.p_within(budget)}
    if math.isnan(observed):
        err = math.nan
    else:
        err = abs(math.log(p.step / observed)) if p.transitions else math.inf
    return {
        "model": model.name,
        "point": str(r["point"]),
        "seed": int(r["seed"]),
        "observed": observed,
        "predicted": p.step,
        "low": p.low,
        "high": p.high,
        "abs_log_error": err,
        "covered": bool(p.low <= observed <= p.high),
        **within,
    }


def forecast_later(
    rows: pd.DataFrame, later: Sequence[str], models: Sequence | None = None
) -> pd.DataFrame:
    """Every model fitted once on the configurations not in ``later`` and scored on the runs of
    those in ``later`` (points declared after the models were: a forecast made before they were
    trained). Columns as :func:`leave_one_out`'s, plus ``transitioned``, ``budget`` and
    ``p_within`` (the probability of a transition within the budget); a run that did not
    transition has no error (NaN)."""
    models = all_models() if models is None else list(models)
    key = config_key(rows)
    test = rows[key.isin(list(later))]
    jumped = _transitioned(test)
    out = []
    for m in models:
        fitted = m.fit(rows[~key.isin(list(later))])
        for i, r in test.iterrows():
            observed = float(r["transition_step"]) if jumped[i] else math.nan
            row = _scored(m, fitted, r, observed, budget=float(r["budget"]))
            out.append({**row, "transitioned": bool(jumped[i])})
    return pd.DataFrame(out)


def floor(rows: pd.DataFrame) -> pd.DataFrame:
    """The seed-scatter floor of each configuration with two or more transitioned seeds:
    ``0.6745 x sd(log T)`` over its seeds, the median ``|log error|`` of a predictor exact in the
    configuration's mean when the seeds scatter log-normally (columns ``point, n, sd_log,
    floor``)."""
    ok = rows[_transitioned(rows)].assign(y=lambda r: np.log(r["transition_step"]))
    g = ok.groupby(config_key(ok), sort=False)["y"]
    t = pd.DataFrame({"n": g.count(), "sd_log": g.std(ddof=1)}).reset_index(names="point")
    t = t[t["n"] >= 2].copy()
    t["floor"] = 0.6745 * t["sd_log"]
    return t


def power_exponent(
    rows: pd.DataFrame,
    term: str = "log N",
    model: LogLinearLaw = FREE_POWER_LAW,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, float]:
    """A model's exponent of one field with its 95% interval: the least-squares one (``t`` of the
    fit) and a bootstrap over configurations (whole configurations resampled with their seeds)."""
    from scipy.stats import t as student

    fitted = model.fit(rows)
    est, se = fitted.coefficients()[term], fitted.stderr()[term]
    q = float(student.ppf(0.975, fitted.dof))
    ok = rows[_transitioned(rows)]
    key = config_key(ok)
    points = list(dict.fromkeys(key))
    at = {p: np.flatnonzero((key == p).to_numpy()) for p in points}  # each one's row positions
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        pick = rng.choice(len(points), size=len(points), replace=True)
        sample = ok.iloc[np.concatenate([at[points[i]] for i in pick])].reset_index(drop=True)
        try:
            boot.append(model.fit(sample).coefficients()[term])
        except ValueError:
            continue
    lo, hi = np.percentile(boot, [2.5, 97.5]) if boot else (math.nan, math.nan)
    return {
        "estimate": est,
        "ols_low": est - q * se,
        "ols_high": est + q * se,
        "boot_low": float(lo),
        "boot_high": float(hi),
        "n_boot": len(boot),
    }


# ---------------------------------------------------------------------------------------------
# the stored law: forecasting a configuration before training

LAW_FILE = __import__("pathlib").Path(__file__).with_name("transition_law.json")
"""The law fitted on the transition-law experiment's data (docs/results/transition-law.md),
packaged with the toolkit; ``induction-cliff reproduce transition-law --tier full`` writes it as
``transition-law-law.json`` beside the page."""

RATES_FILE = LAW_FILE.with_name("collapse_rate.csv")
"""The collapse-rate experiment's rows (docs/results/collapse-rate.md), packaged with the toolkit
beside the law: ``induction-cliff forecast`` reads its collapse risk from here, in a checkout and
from an installed package alike. A copy of ``docs/results/collapse-rate.csv``, which a test keeps
equal to it (``cp docs/results/collapse-rate.csv phenomenology/collapse_rate.csv`` after the
experiment adds rows)."""

WARNED = {"hidden_bias"}
"""Fixed fields of the data that a forecast does not refuse but names: the author's scalar
hidden biases train as the per-unit ones where they train at all, but collapse on some seeds
under plain SGD (docs/results/hidden-bias.md)."""


@dataclass(frozen=True)
class StoredLaw:
    """The fitted law with the range of the data it was fitted on.

    Attributes:
        fitted: the law.
        ranges: field -> ``[min, max]`` over the runs of the data.
        fixed: ``section.field`` -> the value every run of the data had (as text).
        calibration: the combination's calibration (:func:`phenomenology.prior.calibrate`).
        source: where its data are.
        observed: the data's configurations (``{field: value, ..., "runs", "transitioned",
            "budget", "median_step"}``), so that a forecast of one can say what its runs did.
    """

    fitted: FittedLaw
    ranges: Mapping[str, Sequence[float]]
    fixed: Mapping[str, str]
    calibration: Mapping[str, list]
    source: str = ""
    observed: Sequence[Mapping] = ()

    @staticmethod
    def load(path=None) -> StoredLaw:
        from pathlib import Path

        path = Path(path) if path is not None else LAW_FILE
        if not path.exists():
            raise ValueError(
                f"{path} is missing: `induction-cliff reproduce transition-law "
                "--tier full` writes it"
            )
        from interp.io.inputs import read_json_object

        d = read_json_object(path)  # limits checked before parsing; damaged: one line (exit 3)
        try:
            for rec in d.get("observed", ()):
                _check_observed(rec)
            return StoredLaw(
                fitted_from_dict(d["law"]),
                d["ranges"],
                d["fixed"],
                d.get("calibration", {}),
                d.get("data", ""),
                tuple(d.get("observed", ())),
            )
        except (KeyError, TypeError, ValueError, StopIteration) as err:
            raise ValueError(f"{path} is not a stored transition law ({err})") from None

    def problems(self, config: Mapping[str, float], settings: Mapping[str, str]) -> tuple:
        """``(refusals, notes)``: one line per field outside the data (a value beyond its range,
        or beyond the range of the configurations it was fitted on, those with a transitioned
        run, unless the data trained this very configuration; or a fixed field set otherwise),
        and one per field in :data:`WARNED` set otherwise."""
        refusals, notes = [], []
        # a configuration of the data is forecast (and what its runs did said) even where none
        # of them transitioned; elsewhere, beyond the fitted configurations is refused
        fitted = self.fitted_ranges() if self.observed_at(config) is None else {}
        for f, (lo, hi) in self.ranges.items():
            v = float(config[f])
            if not lo <= v <= hi:
                refusals.append(f"{f}={v:g} is outside the law's data ({lo:g} to {hi:g})")
            elif f in fitted and not fitted[f][0] <= v <= fitted[f][1]:
                flo, fhi = fitted[f]
                refusals.append(
                    f"{f}={v:g} is outside the configurations the law was fitted on ({flo:g} "
                    f"to {fhi:g}; its data beyond them did not transition)"
                )
        for key, value in self.fixed.items():
            have = settings.get(key)
            if have is None or str(have) == str(value):
                continue
            field_name = key.split(".", 1)[-1]
            line = f"{field_name}={have} is not the law's ({value})"
            (notes if field_name in WARNED else refusals).append(line)
        return refusals, notes

    def fitted_ranges(self) -> dict[str, tuple[float, float]]:
        """Each field's range over the configurations with a transitioned run (those the law
        was fitted on; :attr:`ranges` also spans the ones that never transitioned); empty when
        the law keeps no record of its configurations."""
        fitted = [rec for rec in self.observed if rec["transitioned"]]
        if not fitted:
            return {}
        return {
            f: (min(float(r[f]) for r in fitted), max(float(r[f]) for r in fitted))
            for f in self.ranges
        }

    def forecast(self, config: Mapping[str, float]) -> Prediction:
        return self.fitted.predict(config)

    def observed_at(self, config: Mapping[str, float]) -> Mapping | None:
        """The data's record of ``config`` (every field of :data:`FIELDS` equal to within float
        rounding), or None when the data never trained it."""
        for rec in self.observed:
            if all(math.isclose(float(rec[f]), float(config[f]), rel_tol=1e-9) for f in FIELDS):
                return rec
        return None


def _check_observed(rec) -> None:
    """Refuse a damaged record of :func:`observed_configurations` by its first bad field."""
    keys = (*FIELDS, "runs", "transitioned", "budget", "median_step")
    missing = [k for k in keys if k not in rec]
    if missing:
        raise ValueError(f"an observed configuration lacks {missing[0]}")

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for k in keys[:-1]:
        if not number(rec[k]):
            raise ValueError(f"an observed configuration's {k}={rec[k]!r} is not a number")
    step = rec["median_step"]
    if rec["transitioned"] and not number(step):
        raise ValueError(
            f"an observed configuration's median_step={step!r} is not a number, but "
            f"{rec['transitioned']} of its runs transitioned"
        )


def observed_configurations(rows: pd.DataFrame) -> list[dict]:
    """One record per configuration of a grid's rows: its fields, runs, how many transitioned
    within their budget, the budget and the median transition step of those that did (None)."""
    out = []
    ok = _transitioned(rows)
    for _, g in rows.groupby(config_key(rows), sort=False):
        done = g[ok.loc[g.index]]
        out.append(
            {
                **{f: float(g[f].iloc[0]) for f in FIELDS},
                "runs": int(len(g)),
                "transitioned": int(len(done)),
                "budget": int(g["budget"].max()),
                "median_step": float(done["transition_step"].median()) if len(done) else None,
            }
        )
    return out


FIXED_FIELDS = {
    "task": ("D", "N_max", "alpha", "p_B", "novel_pool", "B_eval", "task"),
    "model": (
        "n_layers",
        "n_heads",
        "d_head",
        "d_mlp",
        "n_mlp_layers",
        "positional",
        "positional_config",
        "attn_scale",
        "attn_init_std",
        "qk_bias",
        "readout_init",
        "hidden_bias",
    ),
    "train": (
        "optimizer",
        "weight_decay",
        "weight_decay_form",
        "momentum",
        "batch_size",
        "intervention",
    ),
}
"""The fields a grid holds fixed that can change a transition time (``section.field``); a forecast
of a configuration that sets one otherwise is outside the data."""


def law_inputs(task, model, train) -> tuple[dict[str, float], dict[str, str]]:
    """A run's configs as the law reads them: ``(fields, settings)``, the fields of
    :data:`phenomenology.transition_law.FIELDS` and the :data:`FIXED_FIELDS` as text."""
    sections = {"task": task, "model": model, "train": train}
    values = {
        **{f: getattr(task, f) for f in FIELDS if hasattr(task, f)},
        "lr": train.lr,
        "batch_size": train.batch_size,
    }
    fields = {f: float(values[f]) for f in FIELDS}
    settings = {
        f"{s}.{f}": str(getattr(sections[s], f)) for s, names in FIXED_FIELDS.items() for f in names
    }
    return fields, settings


_STORED: dict = {}


def law_prior(task, model, train, path=None) -> tuple[Prediction | None, Mapping, str]:
    """The stored law's forecast of a run's configuration, as the prior of the partial-curve
    forecasters: ``(prediction, calibration, why)``; prediction None (and ``why`` says why) when
    there is no stored law, the optimiser is not plain SGD, or the configuration is outside the
    law's data (then the curve forecasters work alone, as before)."""
    key = str(path)
    if key not in _STORED:
        try:
            _STORED[key] = StoredLaw.load(path)
        except ValueError as err:
            _STORED[key] = str(err)
    law = _STORED[key]
    if isinstance(law, str):
        return None, {}, law
    if model is None or not all(hasattr(model, f) for f in FIXED_FIELDS["model"]):
        return None, {}, "not the toolkit's network"
    fields, settings = law_inputs(task, model, train)
    refusals, _ = law.problems(fields, settings)
    if refusals:
        return None, {}, refusals[0]
    p = law.forecast(fields)
    if p.step == 0.0:
        return None, {}, p.reason
    return p, law.calibration, ""
