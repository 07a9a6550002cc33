"""The transition law, its baselines and their scores, on data drawn from known laws."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments.transition_scores import _lead, auroc
from phenomenology.prior import calibrate, combine, prior_bin, r_bin
from phenomenology.transition_law import (
    DRIVE_LAW,
    FLOW_LAW,
    FREE_POWER_LAW,
    LAW,
    N2_FORM,
    TERMS,
    THRESHOLD_LAW,
    TOKENS_FORM,
    NearestConfiguration,
    Prediction,
    drive,
    floor,
    forecast_later,
    leave_one_out,
    log_p_distinct,
    power_exponent,
)

# The third law's parameters, as the data below are drawn (the law is the third law plus a
# correction, which on these data has nothing to correct): log tau = c0 + sum of these times the
# terms, T = tau / lr x (1 + kappa lr tau).
TRUE = {
    "intercept": 4.3,
    "log P(distinct labels)": -0.2,
    "log (1-1/n)": 3.4,
    "log N": 0.15,
    "log L": 0.35,
    "log K": 0.05,
    "log eps": 0.2,
    "log p_C": -0.4,
    "log kappa": -5.8,
}
# The second law's exponents, as its data are drawn (log T = c0 + sum of these times the terms).
TRUE_THRESHOLD = {
    "intercept": 3.0,
    "log lr": -1.0,
    "log N": 0.5,
    "log lr x log N": 0.1,
    "log K": 0.1,
    "log eps": 0.2,
    "log p_C": -0.4,
    "log (n-1)": 1.0,
    "log (1-n/L)": -0.6,
    "log L": 0.2,
}
CONFIGS = [
    {},
    {"lr": 0.2},
    {"lr": 0.05},
    {"lr": 0.03},
    {"N": 4},
    {"N": 16},
    {"N": 12},
    {"B": 2},
    {"B": 4},
    {"K": 1024},
    {"K": 128},
    {"eps": 0.2},
    {"eps": 0.05},
    {"p_C": 0.5},
    {"p_C": 0.95},
    {"L": 16},
    {"L": 64},
    {"lr": 0.05, "N": 4},
    {"lr": 0.05, "B": 2},
    {"L": 16, "N": 12},
]
CENTRE = {"K": 256, "L": 32, "N": 8, "B": 1, "eps": 0.1, "p_C": 0.8, "lr": 0.1, "batch_size": 128}


def p_distinct(n: int, L: int) -> float:
    """The chance that ``n`` classes carry ``n`` distinct labels of ``L``, as a product."""
    return math.prod(1 - i / L for i in range(n))


def law_value(c: dict) -> float:
    """The drawn law's ``log T`` at ``c``, written out term by term (not through the code)."""
    n = c["N"] / c["B"]
    log_tau = (
        TRUE["intercept"]
        + TRUE["log P(distinct labels)"] * math.log(p_distinct(int(n), c["L"]))
        + TRUE["log (1-1/n)"] * math.log(1 - 1 / n)
        + TRUE["log N"] * math.log(c["N"])
        + TRUE["log L"] * math.log(c["L"])
        + TRUE["log K"] * math.log(c["K"])
        + TRUE["log eps"] * math.log(c["eps"])
        + TRUE["log p_C"] * math.log(c["p_C"])
    )
    tau = math.exp(log_tau)
    return math.log(tau / c["lr"] * (1 + math.exp(TRUE["log kappa"]) * c["lr"] * tau))


def threshold_value(c: dict) -> float:
    """The second law at ``c``, written out term by term."""
    t, n = TRUE_THRESHOLD, c["N"] / c["B"]
    return (
        t["intercept"]
        + t["log lr"] * math.log(c["lr"])
        + t["log N"] * math.log(c["N"])
        + t["log lr x log N"] * math.log(c["lr"]) * math.log(c["N"])
        + t["log K"] * math.log(c["K"])
        + t["log eps"] * math.log(c["eps"])
        + t["log p_C"] * math.log(c["p_C"])
        + t["log (n-1)"] * math.log(n - 1)
        + t["log (1-n/L)"] * math.log(1 - n / c["L"])
        + t["log L"] * math.log(c["L"])
    )


def grid_rows(sd: float = 0.1, seeds: int = 3, seed: int = 0, value=law_value) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, change in enumerate(CONFIGS):
        c = {**CENTRE, **change}
        for s in range(seeds):
            t = math.exp(value(c) + sd * rng.standard_normal())
            rows.append(
                {
                    "point": f"p{i}",
                    "seed": s,
                    **c,
                    "transition_step": t,
                    "transitioned": True,
                    "budget": 1e9,
                }
            )
    return pd.DataFrame(rows)


def test_the_third_law_recovers_the_parameters_it_was_drawn_from():
    fitted = FLOW_LAW.fit(grid_rows(sd=0.02))
    coef = fitted.coefficients()
    assert list(coef) == ["intercept", *FLOW_LAW.terms, "log kappa"]
    for k, v in TRUE.items():  # the finite-step stretch is small here: its size less sure
        assert coef[k] == pytest.approx(v, abs=0.6 if k == "log kappa" else 0.1), k
    assert fitted.sigma == pytest.approx(0.02, rel=0.3)
    # beyond the data's learning rates, the stretch carries the forecast: lr 0.01 and 0.4
    for lr in (0.01, 0.4):
        c = {**CENTRE, "N": 12, "lr": lr}
        assert fitted.predict(c).log_mean == pytest.approx(law_value(c), abs=0.05), lr
    exact = FLOW_LAW.fit(grid_rows(sd=0.0))  # exact data: every parameter, to the fit's tolerance
    for k, v in TRUE.items():
        assert exact.coefficients()[k] == pytest.approx(v, abs=1e-5), k
    assert exact.sigma < 1e-8


def test_the_median_fit_follows_the_seeds_median_where_late_seeds_pull_least_squares():
    from phenomenology.transition_law import FLOW_MEDIAN

    # Exact seeds at the drawn law, and one seed in four a factor e late in every configuration:
    # each configuration's median is the law, its mean of log T 0.25 above it. A soft-L1 loss is
    # not an exact median: each late seed still pulls with about f_scale = 0.1, a third of that
    # against the three on the law, 0.035.
    rows = grid_rows(sd=0.0, seeds=4)
    rows.loc[rows["seed"] == 3, "transition_step"] *= math.e
    median, mean = FLOW_MEDIAN.fit(rows), FLOW_LAW.fit(rows)
    for change in ({}, {"N": 12}, {"L": 16}, {"lr": 0.05, "B": 2}):
        c = {**CENTRE, **change}
        assert median.predict(c).log_mean == pytest.approx(law_value(c) + 0.035, abs=0.01)
        assert mean.predict(c).log_mean == pytest.approx(law_value(c) + 0.25, abs=0.01)
    # the correction is fitted to each configuration's median error: one configuration with a
    # second late seed (errors 0, 0, 1, 1 about the law) moves by half the gap, not a quarter
    late = (rows["point"] == "p5") & (rows["seed"] == 2)
    rows.loc[late, "transition_step"] *= math.e
    y = dict(zip(sorted(rows["point"].unique()), LAW.fit(rows).y, strict=True))
    assert y["p5"] - y["p0"] == pytest.approx(0.5, abs=0.05)


def test_the_second_law_recovers_the_exponents_it_was_drawn_from():
    fitted = THRESHOLD_LAW.fit(grid_rows(sd=0.02, value=threshold_value))
    coef = fitted.coefficients()
    for k, v in TRUE_THRESHOLD.items():
        assert coef[k] == pytest.approx(v, abs=0.05), k
    assert fitted.sigma == pytest.approx(0.02, rel=0.3)


def test_held_out_errors_and_coverage_on_a_well_specified_law():
    rows = grid_rows(sd=0.1, seeds=3, seed=1)
    loo = leave_one_out(rows)
    law = loo[loo["model"] == "law"]
    assert len(law) == len(rows)  # every run held out once
    # the law is the truth: its error is near the scatter (0.6745 sd = 0.067 for a known mean)
    assert 0.04 < law["abs_log_error"].median() < 0.12
    assert 0.65 <= law["covered"].mean() <= 0.95
    # a one-constant form cannot follow N, K, eps, p_C and the drive: far worse held out
    for name in ("n2", "tokens"):
        assert (
            loo[loo["model"] == name]["abs_log_error"].median() > 2 * law["abs_log_error"].median()
        )
    assert floor(rows)["floor"].median() == pytest.approx(0.6745 * 0.1, rel=0.5)


def test_points_declared_later_are_forecast_by_the_fit_of_the_earlier_ones_alone():
    rows = grid_rows(sd=0.0, seeds=2)  # exact: the fit of the earlier points is the truth
    later = ("p7", "p16")  # B 2 and L 64
    never = rows[rows["point"] == "p0"].assign(
        point="late-none", L=8.0, N=12.0, transitioned=False, transition_step=np.nan
    )
    rows = pd.concat([rows, never], ignore_index=True)
    rows.loc[rows["point"] == "p16", "transition_step"] *= math.exp(0.3)  # later: off the law
    scores = forecast_later(rows, (*later, "late-none"))
    law = scores[scores["model"] == "law"].set_index(["point", "seed"])
    assert len(law) == 6
    models = {"law", "fourth", "flow", "threshold", "drive", "nearest", "tokens", "n2", "free"}
    assert set(scores["model"]) == models
    b2 = {**CENTRE, "B": 2}
    assert law.loc[("p7", 0), "predicted"] == pytest.approx(math.exp(law_value(b2)), rel=1e-6)
    assert law.loc[("p7", 1), "abs_log_error"] == pytest.approx(0.0, abs=1e-6)
    assert law.loc[("p16", 0), "abs_log_error"] == pytest.approx(0.3, abs=1e-6)  # not refitted
    assert not law.loc[("p16", 0), "covered"]  # an exact fit's interval is (nearly) a point
    none = law.loc[("late-none", 0)]  # n > L: the law predicts no transition, and has no error
    assert not none["transitioned"] and math.isnan(none["abs_log_error"])
    assert none["p_within"] == 0.0 and math.isinf(none["predicted"])


def test_the_law_predicts_no_transition_beyond_n_equal_to_l_nor_where_the_novel_share_vanishes():
    fitted = LAW.fit(grid_rows(sd=0.05))  # the third law's limits, through its correction
    at = fitted.predict({**CENTRE, "L": 8})  # n = N / B = 8 = L: distinct labels still possible
    assert at.transitions and at.step > fitted.predict({**CENTRE, "L": 16}).step
    beyond = fitted.predict({**CENTRE, "L": 8, "N": 12})  # n > L: two classes share a label
    assert not beyond.transitions and "log P(distinct labels)" in beyond.reason
    assert beyond.p_within(1e12) == 0.0
    assert not fitted.predict({**CENTRE, "p_C": 0.0}).transitions  # drawn with a negative p_C term
    # one class a context (n = 1): nothing to tell apart, the step goes to 0, which is no forecast
    alone = fitted.predict({**CENTRE, "B": 8})
    assert alone.step == 0.0 and "log (1-1/n)" in alone.reason
    for n, L in ((8, 8), (12, 16), (2, 32), (1, 4)):
        value = TERMS["log P(distinct labels)"]({**CENTRE, "N": n, "L": L})
        assert value == pytest.approx(math.log(p_distinct(n, L)), rel=1e-12, abs=1e-12), (n, L)
    assert log_p_distinct(9, 8) == -math.inf
    assert TERMS["log (1-1/n)"]({**CENTRE, "B": 2}) == pytest.approx(math.log(0.75))


def test_the_second_law_predicts_no_transition_at_n_equal_to_l():
    fitted = THRESHOLD_LAW.fit(grid_rows(sd=0.05, value=threshold_value))
    stuck = fitted.predict({**CENTRE, "L": 8})  # n = N / B = 8 = L
    assert not stuck.transitions and "log (1-n/L)" in stuck.reason
    assert stuck.p_within(1e12) == 0.0
    beyond = fitted.predict({**CENTRE, "L": 8, "N": 12})  # n > L: no transition either
    assert not beyond.transitions and beyond.p_within(1e12) == 0.0
    assert not fitted.predict({**CENTRE, "p_C": 0.0}).transitions
    alone = fitted.predict({**CENTRE, "B": 8})  # n = 1: no distractor, no forecast
    assert alone.step == 0.0 and "log (n-1)" in alone.reason
    assert TERMS["log (n-1)"]({**CENTRE, "B": 2}) == pytest.approx(math.log(3))
    assert TERMS["log (1-n/L)"]({**CENTRE, "L": 16}) == pytest.approx(math.log(0.5))
    assert TERMS["log lr x log N"](CENTRE) == pytest.approx(math.log(0.1) * math.log(8))


def test_the_first_law_predicts_no_transition_where_the_drive_vanishes():
    fitted = DRIVE_LAW.fit(grid_rows(sd=0.05, value=threshold_value))
    stuck = fitted.predict({**CENTRE, "L": 8})  # drive 1/8 - 1/8 = 0
    assert not stuck.transitions and "log drive" in stuck.reason
    assert fitted.predict({**CENTRE, "L": 16}).transitions
    assert drive(32, 8, 1) == pytest.approx(1 / 8 - 1 / 32)


def test_the_published_forms_have_their_fixed_exponents():
    rows = grid_rows(sd=0.05)
    n2, tokens = N2_FORM.fit(rows), TOKENS_FORM.fit(rows)
    a, b = n2.predict({**CENTRE, "N": 4}), n2.predict({**CENTRE, "N": 8})
    assert b.step / a.step == pytest.approx(4.0)  # steps ∝ N^2
    c, d = tokens.predict({**CENTRE, "lr": 0.1}), tokens.predict({**CENTRE, "lr": 0.05})
    assert d.step / c.step == pytest.approx(2.0)  # steps ∝ 1 / lr
    e, f = tokens.predict({**CENTRE, "N": 4}), tokens.predict({**CENTRE, "N": 12})
    assert f.step / e.step == pytest.approx(math.sqrt(9 / 25))  # ∝ (2N + 1)^-1/2


def test_the_free_power_laws_exponent_of_n_with_its_interval():
    rng = np.random.default_rng(3)
    rows = []
    for i, (n, lr) in enumerate(
        [(4, 0.1), (8, 0.1), (16, 0.1), (8, 0.05), (4, 0.2), (12, 0.1), (8, 0.2), (16, 0.05)]
    ):
        for s in range(3):
            t = math.exp(2.0 + 1.5 * math.log(n) - math.log(lr) + 0.05 * rng.standard_normal())
            rows.append(
                {"point": f"p{i}", "seed": s, **CENTRE, "N": n, "lr": lr, "transition_step": t}
            )
    rows = pd.DataFrame(rows)
    for i, k in enumerate((256, 512)):  # K varies once, B once, so the free law is determined
        rows.loc[rows["point"] == f"p{i}", "K"] = k
    rows.loc[rows["point"] == "p5", "B"] = 2
    e = power_exponent(rows, n_boot=200)
    assert e["estimate"] == pytest.approx(1.5, abs=0.1)
    assert e["ols_low"] < 1.5 < e["ols_high"] and e["boot_low"] < 1.5 < e["boot_high"]
    assert e["ols_high"] - e["ols_low"] < 0.5
    assert FREE_POWER_LAW.fit(rows).coefficients()["log lr"] == pytest.approx(-1.0, abs=0.1)


def test_the_nearest_configuration_is_the_mean_of_its_seeds():
    rows = grid_rows(sd=0.1)
    fitted = NearestConfiguration().fit(rows)
    c = {**CENTRE, "lr": 0.19}  # nearest: lr 0.2
    mine = rows[rows["point"] == "p1"]
    assert fitted.predict(c).step == pytest.approx(math.exp(np.log(mine["transition_step"]).mean()))


def test_the_prior_truncated_and_a_forecast_weighted_by_its_precision():
    prior = Prediction(1000.0, 500.0, 2000.0, math.log(1000.0), 0.5)
    # no forecast: the prior, truncated to T > seen (seen far below: unchanged median)
    alone = combine(prior, None, None, 10.0, {})
    assert alone.step == pytest.approx(1000.0, rel=1e-6)
    # a calibrated forecast of equal spread and no bias: the geometric mean
    cal = {"progress": [{"bin": r_bin(100 / 4000), "n": 10, "bias": 0.0, "sd": 0.5}]}
    both = combine(prior, 4000.0, "progress", 100.0, cal)
    assert both.step == pytest.approx(2000.0, rel=1e-3)
    assert both.log_sd == pytest.approx(0.5 / math.sqrt(2))
    # a bias of the forecaster is taken out: log(T / F) = +log 2 means F is 2x early
    cal_b = {"progress": [{"bin": r_bin(100 / 500), "n": 10, "bias": math.log(2), "sd": 0.5}]}
    assert combine(prior, 500.0, "progress", 100.0, cal_b).step == pytest.approx(1000.0, rel=1e-3)
    # seen beyond the prior's median: the median moves past the cut-off
    late = combine(prior, None, None, 1500.0, {})
    assert late.step > 1500.0 and late.low > 1500.0


def test_calibration_bins_by_the_share_of_its_own_forecast_seen_and_keeps_what_helps():
    early = [0.1, 0.3, 0.2, 0.2] * 5  # log(T / F) of twenty forecasts seen at r = 0.1
    late = [-0.1, 0.1, -0.05, 0.05] * 5  # and twenty at r = 0.9, unbiased but scattered
    rows = pd.DataFrame(
        {
            "method": ["template"] * 40,
            "step": [1000.0] * 40,
            "seen": [100.0] * 20 + [900.0] * 20,
            "observed": [1000 * math.exp(e) for e in early + late],
            # a poor prior for the first twenty (3000 steps, wide); an exact one for the others
            "prior_step": [3000.0] * 20 + [1000 * math.exp(e) for e in late],
            "prior_low": [1000.0] * 20 + [1000 * math.exp(e - 0.01) for e in late],
            "prior_high": [9000.0] * 20 + [1000 * math.exp(e + 0.01) for e in late],
            "prior_log_mean": [math.log(3000.0)] * 20 + [math.log(1000) + e for e in late],
            "prior_log_sd": [1.0] * 20 + [0.01] * 20,
        }
    )
    cal = calibrate(rows)["template"]
    assert [c["bin"] for c in cal] == [r_bin(0.1), r_bin(0.9)]
    # early: the forecast, its bias of +0.2 taken out, beats the poor prior and any mixture
    assert cal[0]["mode"] == "curve" and cal[0]["bias"] == pytest.approx(0.2)
    assert cal[0]["sd"] == pytest.approx(np.std(early, ddof=1))
    # late: nothing improves on an exact prior
    assert cal[1]["mode"] == "prior"
    prior = Prediction(1000.0, 900.0, 1100.0, math.log(1000.0), 0.05)
    assert combine(prior, 1000.0, "template", 100.0, {"template": cal}).step == pytest.approx(
        1000 * math.exp(0.2), rel=1e-3
    )
    unchanged = combine(prior, 2000.0, "template", 900.0, {"template": cal})  # r = 0.45: no bin
    assert unchanged.step == pytest.approx(combine(prior, None, None, 900.0, {}).step)
    assert calibrate(rows.iloc[:10])["template"] == []  # fewer than 20 forecasts: no bin


def test_calibration_splits_a_bin_by_whether_the_prior_puts_the_cut_off_early():
    # forty forecasts, all claiming the cliff is near (seen 900 of F = 1000: r = 0.9); twenty where
    # the prior agrees (its step 1000) and the forecast is right, twenty where the prior puts the
    # cut-off early (its step 9000: seen / prior = 0.1) and the run took 9000 steps after all
    agree = [-0.1, 0.1, -0.05, 0.05] * 5
    rows = pd.DataFrame(
        {
            "method": ["progress"] * 40,
            "step": [1000.0] * 40,
            "seen": [900.0] * 40,
            "observed": [1000 * math.exp(e) for e in agree] + [9000.0 * math.exp(e) for e in agree],
            "prior_step": [1000.0] * 20 + [9000.0] * 20,
            "prior_low": [500.0] * 20 + [4500.0] * 20,
            "prior_high": [2000.0] * 20 + [18000.0] * 20,
            "prior_log_mean": [math.log(1000.0)] * 20 + [math.log(9000.0)] * 20,
            "prior_log_sd": [0.5] * 40,
        }
    )
    cal = calibrate(rows)["progress"]
    assert [(c["bin"], c["prior_bin"]) for c in cal] == [(r_bin(0.9), 0), (r_bin(0.9), 1)]
    far, near = cal
    assert far["mode"] == "prior"  # the near-cliff claims the prior contradicts were wrong
    assert near["mode"] in ("curve", "weighted")  # where it agrees, the forecast is used
    prior_far = Prediction(9000.0, 4500.0, 18000.0, math.log(9000.0), 0.5)
    kept = combine(prior_far, 1000.0, "progress", 900.0, {"progress": cal})
    assert kept.step == pytest.approx(combine(prior_far, None, None, 900.0, {}).step)
    prior_near = Prediction(1000.0, 500.0, 2000.0, math.log(1000.0), 0.5)
    moved = combine(prior_near, 1100.0, "progress", 900.0, {"progress": cal})
    assert moved.step != pytest.approx(combine(prior_near, None, None, 900.0, {}).step)
    # a calibration stored before the split (no "prior_bin") applies to both
    old = [{k: v for k, v in near.items() if k != "prior_bin"}]
    assert combine(prior_far, 1000.0, "progress", 900.0, {"progress": old}).step < 2000.0
    assert prior_bin(900.0, prior_far) == 0 and prior_bin(900.0, prior_near) == 1
    assert prior_bin(900.0, Prediction(math.inf, math.inf, math.inf, math.inf, 1.0)) == 0


def test_auroc_and_the_lead_time_at_a_five_percent_false_positive_rate():
    assert auroc([3, 4, 5], [0, 1, 2]) == 1.0
    assert auroc([0, 1], [2, 3]) == 0.0
    assert auroc([1, 1], [1, 1]) == 0.5
    # two positives crossing 0.5 at steps 100 and 800 of their 1000-step transitions; twenty
    # negatives peaking below 0.5 (one, of 20, may exceed: 5%)
    frames = {}
    for i, cross in enumerate((100, 800)):
        steps = np.arange(0, 1000, 100)
        frames[("pos", i)] = pd.DataFrame(
            {"step": steps, "s": (steps >= cross).astype(float), "transition_step": 1000.0}
        )
    peaks = {("neg", i): 0.4 for i in range(19)} | {("neg", 19): 0.9}
    peak = pd.Series({**{k: 1.0 for k in frames}, **peaks})
    lead, warned = _lead(list(frames), list(peaks), "s", peak, frames)
    assert warned == 1.0
    assert lead == pytest.approx(np.median([0.9, 0.2]))


def test_a_term_at_its_limit_follows_its_coefficients_sign():
    import numpy as np

    from phenomenology.transition_law import FittedLaw

    # log T = 8 + 0.2 log p_C - 1.0 log (1 - n/L) (every other coefficient 0)
    terms = THRESHOLD_LAW.terms
    coef = np.zeros(len(terms) + 1)
    coef[0] = 8.0
    coef[1 + terms.index("log p_C")] = 0.2
    coef[1 + terms.index("log (1-n/L)")] = -1.0
    law = FittedLaw(THRESHOLD_LAW, coef, np.zeros((len(coef), len(coef))), 0.1, 10, 20)
    assert law.predict(CENTRE).step == pytest.approx(
        math.exp(8.0 + 0.2 * math.log(0.8) - math.log(1 - 8 / 32))
    )
    never = law.predict({**CENTRE, "L": 8})  # n = L, coefficient < 0: T -> inf
    assert not never.transitions and never.p_within(1e9) == 0.0
    zero = law.predict({**CENTRE, "p_C": 0.0})  # p_C 0, coefficient > 0: T -> 0, no forecast
    assert zero.step == 0.0 and not zero.transitions and "sends the step to 0" in zero.reason
    assert zero.p_within(100.0) == 1.0


def test_a_law_far_outside_its_data_forecasts_without_overflow():
    from phenomenology.transition_law import FittedLaw

    # a fit on few configurations can give a log T beyond the floats' range far from its data
    for intercept, p_budget in ((900.0, 0.0), (-900.0, 1.0)):
        coef = np.zeros(len(DRIVE_LAW.terms) + 1)
        coef[0] = intercept
        law = FittedLaw(DRIVE_LAW, coef, np.zeros((len(coef), len(coef))), 0.1, 10, 20)
        p = law.predict(CENTRE)
        assert p.log_mean == pytest.approx(intercept) and p.transitions
        assert 0.0 < p.low <= p.step <= p.high < math.inf
        assert p.p_within(20_000.0) == p_budget


def test_the_third_laws_step_is_gradient_flow_time_over_lr_stretched_by_a_finite_step_factor():
    from phenomenology.transition_law import FittedLaw

    # log tau = log 300 + 0.2 log p_C, kappa = 0.01: T = tau / lr x (1 + 0.01 lr tau)
    coef = np.zeros(len(FLOW_LAW.terms) + 2)
    coef[0], coef[-1] = math.log(300.0), math.log(0.01)
    coef[1 + FLOW_LAW.terms.index("log p_C")] = 0.2
    law = FittedLaw(FLOW_LAW, coef, np.zeros((len(coef), len(coef))), 0.1, 10, 20)
    tau = 300.0 * 0.8**0.2
    for lr in (0.01, 0.1, 1.0):
        assert law.predict({**CENTRE, "lr": lr}).step == pytest.approx(
            tau / lr * (1 + 0.01 * lr * tau), rel=1e-12
        )
    zero = law.predict({**CENTRE, "p_C": 0.0})
    assert zero.step == 0.0 and "log p_C" in zero.reason
    # the interval through the Jacobian: with a known intercept only, sd = sigma sqrt(1 + v j^2)
    cov = np.zeros((len(coef), len(coef)))
    cov[0, 0] = 0.5
    wide = FittedLaw(FLOW_LAW, coef, cov, 0.1, 10, 20).predict(CENTRE)
    s = 0.01 * 0.1 * tau
    j = 1 + s / (1 + s)  # d log T / d c0
    from scipy.stats import t as student

    q = float(student.ppf(0.9, 10))
    assert math.log(wide.high / wide.step) == pytest.approx(q * 0.1 * math.sqrt(1 + 0.5 * j**2))


def test_configurations_that_did_not_transition_are_forecast_held_out_and_contradictions_named():
    from experiments.catalog.transition_law_page import _negative_lines

    rows = grid_rows(sd=0.05).assign(role="axis")
    # two configurations with no transition in 20k steps: lr 0.001, where the drawn law's step is
    # about 2.4e5 (the fitted law gives it almost no chance), and lr 0.3, where it is about 9.6e2
    # (the fitted law is sure of a transition: contradicted)
    for name, change in (("slow", {"lr": 0.001}), ("fast", {"lr": 0.3})):
        for s in range(3):
            rows.loc[len(rows)] = {
                "point": name,
                "role": "axis",
                "seed": s,
                **CENTRE,
                **change,
                "transition_step": math.nan,
                "transitioned": False,
                "budget": 20_000,
            }
    lines = _negative_lines(rows)
    table = {ln.split(" | ")[0].strip("| "): ln for ln in lines if ln.startswith("| ")}
    assert set(table) == {"point", "---", "slow", "fast"}
    law = {k: v.split(" | ")[4] for k, v in table.items()}  # the law's column
    assert law["slow"].endswith("(P 0.00)") and law["fast"].endswith("(P 1.00)")
    verdict = lines[-1]
    assert f"fast ({LAW.label} 1.00" in verdict
    assert f"slow ({LAW.label}" not in verdict
    # the nearest configuration of lr 0.001 is lr 0.03, whose step (8.1e3) is within 20k
    assert "slow (nearest-configuration lookup" in verdict
    assert _negative_lines(grid_rows()) == []  # every configuration transitioned: no section


def test_the_combined_verdict_names_each_fraction_lost_and_by_how_much():
    from experiments.catalog.transition_law_page import _combined_lines

    def scores(fraction, law, curve, combined):  # three runs, the curve forecasting two
        return pd.DataFrame(
            {
                "point": ["a", "b", "c"],
                "fraction": fraction,
                "law_error": law,
                "law_covered": True,
                "curve_error": [curve[0], curve[1], np.nan],
                "combined_error": combined,
                "combined_covered": True,
            }
        )

    tie = scores(0.5, [0.1, 0.2, 0.3], [0.05, 0.15], [0.05, 0.15, 0.3])
    no_worse = "- The combination is no worse than either part at every fraction."
    assert _combined_lines(tie)[-1] == no_worse
    lost = pd.concat([tie, scores(0.8, [0.1, 0.2, 0.3], [0.05, 0.15], [0.06, 0.16, 0.3])])
    # at 80%: combined on the curve's runs 0.11 against the curve's 0.10; over all, 0.16 < 0.2;
    # the combination is 0.01 worse on each of the curve's runs, so on every resample too
    assert _combined_lines(lost)[-1] == (
        "- The combination is worse than a part alone at 80% of the plateau (than the curve "
        "forecaster, by 0.010000, 95% interval [+0.0100, +0.0100]), in median abs log error: "
        "an interval that holds zero is a difference the configurations' scatter could give "
        "either way."
    )
    # over all three runs the medians are 0.16 and 0.2; a resample with c twice or more (7 in
    # 27) ties at c's 0.3, any other is 0.04 better
    assert "| 80% | -0.0400 [-0.0400, +0.0000] | +0.0100 [+0.0100, +0.0100] |" in _combined_lines(
        lost
    )


def test_each_law_is_scored_on_the_points_declared_after_it_by_a_fit_without_later_ones(
    monkeypatch,
):
    from experiments.catalog import transition_law_page as page

    rows = grid_rows(sd=0.0, seeds=2).assign(role="axis")  # exact: a fit without p16 is the truth
    rows.loc[rows["point"] == "p16", "transition_step"] *= math.exp(0.3)  # p16 off the law
    # p7 (B 2) declared after the first law, p16 (L 64) after the law
    monkeypatch.setattr(page, "DECLARED_AFTER", (("drive", ("p7",)), ("law", ("p16",))))
    lines = page._declared_after_sections(rows)
    heads = [i for i, ln in enumerate(lines) if ln.startswith("## ")]
    assert [lines[i] for i in heads] == [
        f"## Forecast before training: the points declared after {DRIVE_LAW.label}",
        f"## Forecast before training: the points declared after {LAW.label}",
    ]
    first, second = lines[heads[0] : heads[1]], lines[heads[1] :]

    def cell(section, first_cell, column):
        row = next(ln for ln in section if ln.startswith(f"| {first_cell}"))
        return row.split(" | ")[column].strip("| ")

    # the first section is fitted without p16 too: the law is exact on p7 (with p16 in, it is not)
    assert "fitted on the 18 configurations declared before them" in first[2]
    assert cell(first, "p7", 8) != "0.000"  # the per-point column is the first law's, not exact
    assert (
        cell(first, f"{LAW.label} (form chosen after these points: not a forecast)", 2) == "0.000"
    )
    assert "form chosen after" not in "\n".join(second)  # no form was chosen after p16
    # the second: the law fitted with p7 (and without p16) misses p16 by exactly its 0.3
    assert "fitted on the 19 configurations declared before them" in second[2]
    assert cell(second, "p16", 8) == "0.300" and cell(second, f"{LAW.label} |", 2) == "0.300"
    assert "- Forecast before training, " + LAW.label in "\n".join(second)


def test_the_correction_process_agrees_with_an_independent_implementation():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as Const

    from phenomenology.transition_law import GaussianProcess

    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 3))
    y = 0.3 * np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(30)  # only the first input matters
    theta = np.log([0.05, 0.7, 3.0, 5.0, 0.002])
    ours = GaussianProcess.fit(X, y, theta=theta)
    kernel = Const(0.05) * RBF([0.7, 3.0, 5.0]) + WhiteKernel(0.002)
    ref = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None).fit(X, y)  # no jitter
    nll, grad = GaussianProcess._neg_log_likelihood(theta, X, y)
    ref_ll, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
    assert -nll == pytest.approx(ref_ll, rel=1e-10)
    np.testing.assert_allclose(-grad, ref_grad, rtol=1e-8, atol=1e-10)
    for x in (X[3], np.array([0.5, -1.0, 2.0]), np.array([9.0, 9.0, 9.0])):
        mean, sd = ours.predict(x)
        ref_mean, ref_sd = ref.predict(x[None, :], return_std=True)
        assert mean == pytest.approx(float(ref_mean[0]), abs=1e-10)
        assert sd == pytest.approx(float(ref_sd[0]), rel=1e-8)
    far_mean, far_sd = ours.predict(np.array([9.0, 9.0, 9.0]))  # far from the data: the prior
    assert abs(far_mean) < 1e-6 and far_sd == pytest.approx(math.sqrt(0.052), rel=1e-6)
    fitted = GaussianProcess.fit(X, y)  # fitted: the first input is the one that matters
    scales = np.exp(fitted.theta[1:-1])
    assert scales[0] < 2.0 < min(scales[1:])


def test_the_correction_fit_is_one_point_that_the_last_bits_of_the_data_do_not_move():
    from phenomenology.law_correction import GP_DIGITS, GaussianProcess

    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 3))
    y = 0.3 * np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(30)  # the last two do not matter
    theta = GaussianProcess.fit(X, y).theta
    # the data's last bits changed (as another BLAS kernel's rounding changes the base law's
    # residuals): the same hyperparameters, to the last digit
    for nudged in (y * (1 + 2**-50), y + 2**-55, y[::-1][::-1] * (1 - 2**-51)):
        np.testing.assert_array_equal(GaussianProcess.fit(X, nudged).theta, theta)
    # it is the mode itself, not a point on a plateau where the optimizer stopped: the gradient
    # of the posterior vanishes there, up to the rounding of theta
    _, grad = GaussianProcess._neg_log_posterior(theta, X, y)
    _, curvature = GaussianProcess._gradient_and_hessian(theta, X, y)
    assert np.all(np.abs(grad) <= np.abs(curvature).sum(axis=1) * 10.0**-GP_DIGITS)


def test_the_correction_takes_out_a_local_bias_of_the_base_law_and_fades_away_from_the_data():
    rows = grid_rows(sd=0.05, seeds=4, seed=2)
    # the base law's form misses the L = 16 and L = 16, N = 12 configurations by +0.3
    bumped = rows["L"] == 16
    rows.loc[bumped, "transition_step"] *= math.exp(0.3)
    base, corrected = FLOW_LAW.fit(rows), LAW.fit(rows)
    at = {**CENTRE, "L": 16, "N": 10}  # between the two bumped configurations
    truth = law_value(at) + 0.3
    assert abs(corrected.predict(at).log_mean - truth) < abs(base.predict(at).log_mean - truth)
    assert abs(corrected.predict(at).log_mean - truth) < 0.1
    far = {**CENTRE, "K": 1e5, "eps": 1e-4, "lr": 1e-4, "p_C": 1e-4, "L": 4096}  # beyond the data
    shift, sd = corrected.correction(far)
    prior_sd = corrected.hyperparameters()["prior sd"]
    noise_sd = corrected.hyperparameters()["configuration noise sd"]
    assert abs(shift) < 1e-3 and sd == pytest.approx(math.hypot(prior_sd, noise_sd), rel=1e-3)
    p = corrected.predict(far)  # the interval: the process and the seeds' pooled scatter
    assert p.log_sd == pytest.approx(math.sqrt(sd**2 + corrected.seed_var), rel=1e-9)
    assert math.sqrt(corrected.seed_var) == pytest.approx(0.05, rel=0.25)
    # held out one configuration at a time, the correction helps where the base law is biased
    loo = leave_one_out(rows, [LAW, FLOW_LAW])
    on_bump = loo[loo["point"].isin(rows.loc[bumped, "point"])]
    err = on_bump.groupby("model")["abs_log_error"].median()
    assert err["law"] < err["flow"]


def test_a_stored_corrected_law_predicts_as_the_fitted_one_and_a_damaged_one_is_refused(tmp_path):
    import json

    from phenomenology.transition_law import StoredLaw, fitted_from_dict

    fitted = LAW.fit(grid_rows(sd=0.05))
    again = fitted_from_dict(json.loads(json.dumps(fitted.to_dict())))
    for change in ({}, {"N": 10}, {"lr": 0.07, "L": 64}):
        a, b = fitted.predict({**CENTRE, **change}), again.predict({**CENTRE, **change})
        assert (a.step, a.low, a.high) == pytest.approx((b.step, b.low, b.high), rel=1e-12)
    d = fitted.to_dict()
    d["theta"] = d["theta"][:-1]  # a hyperparameter lost
    path = tmp_path / "law.json"
    path.write_text(json.dumps({"law": d, "ranges": {}, "fixed": {}}))
    with pytest.raises(ValueError, match="is not a stored transition law .*another shape"):
        StoredLaw.load(path)
