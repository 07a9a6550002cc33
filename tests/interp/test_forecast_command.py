"""``induction-cliff forecast``: a configuration's transition step from a stored law, nothing
trained, and a refusal by name outside the law's data; the live forecast starts from the law."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from interp.analysis.collapse import FATES, clopper_pearson
from interp.cli import main
from interp.train.overrides import build_configs
from phenomenology.transition_law import FIELDS, FLOW_LAW, law_inputs, law_prior, term_fields

# A law with known coefficients (the third law's form, which the packaged law corrects; a
# stored law may be any model): log tau = log 350 and no finite-step stretch (kappa = e^-20),
# so T = 350 / lr; residual sd 0.1 on 10 degrees of freedom, no uncertainty in the coefficients
# (J'J)^-1 = 0: at lr 0.01, T = 35,000 and the 80% interval is exp(±t(0.9, 10) x 0.1) =
# exp(±0.13722) around it.
T90_10 = 1.372183641
TERMS = list(FLOW_LAW.terms)


def write_law(path, observed=(), **ranges):
    coef = [math.log(350.0)] + [0.0] * len(TERMS) + [-20.0]
    _, settings = law_inputs(*build_configs("paper-fig3", {"hidden_bias": "per_unit"}, 0)[:3])
    box = {
        "K": [128, 1024],
        "L": [16, 64],
        "N": [4, 24],
        "B": [1, 4],
        "eps": [0.05, 0.2],
        "p_C": [0.5, 0.95],
        "lr": [0.01, 0.2],
        "batch_size": [128, 128],
    } | ranges
    assert set(box) == set(FIELDS)
    path.write_text(
        json.dumps(
            {
                "law": {
                    "model": "flow",
                    "terms": TERMS,
                    "offset": "none",
                    "extra": ["log kappa"],
                    "coef": coef,
                    "xtx_inv": [[0.0] * len(coef) for _ in coef],
                    "sigma": 0.1,
                    "dof": 10,
                    "n": 17,
                },
                "calibration": {},
                "ranges": box,
                "fixed": settings,
                "data": "a test law",
                "observed": list(observed),
            }
        )
    )
    return path


def write_rates(path, cells: dict) -> str:
    """A collapse-rate table: ``{(form, lr): (dead, runs)}``, the rest transitioned."""
    lines = ["hidden_bias,lr,seed,fate"]
    for (form, lr), (dead, runs) in cells.items():
        lines += [
            f"{form},{lr},{seed},{'dead' if seed < dead else 'transitioned'}"
            for seed in range(runs)
        ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_forecast_prints_the_step_its_interval_and_the_budget(tmp_path, capsys):
    law = write_law(tmp_path / "law.json")
    rates = write_rates(tmp_path / "rates.csv", {("per_unit", 0.01): (0, 6)})
    code = main(
        [
            *("forecast", "--preset", "paper-fig3", "--set", "hidden_bias=per_unit"),
            *("--law", str(law), "--rates", rates),
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    low, high = 35000 * math.exp(-T90_10 * 0.1), 35000 * math.exp(T90_10 * 0.1)
    assert "transition step given a transition: 35,000" in out.out
    assert f"(80% interval {low:,.0f} to {high:,.0f})" in out.out
    # 0 of 6 died: Clopper-Pearson 95% upper bound 1 - 0.025^(1/6) = 0.46
    assert "0 of 6 runs died (0.00, 95% interval 0.00 to 0.46" in out.out
    assert (
        "within the budget of 100,000 steps: yes (P = 1.00, 95% interval 0.54 to 1.00: the law's "
        "P times the measured survival" in out.out
    )
    assert out.err == ""  # per-unit biases: nothing to note


def test_the_probability_includes_the_measured_collapse_rate(tmp_path, capsys):
    law = write_law(tmp_path / "law.json")
    rates = write_rates(tmp_path / "rates.csv", {("scalar", 0.03): (3, 12), ("tied", 0.03): (6, 6)})
    args = ["forecast", "--preset", "paper-fig3", "--law", str(law), "--rates", rates]
    assert main([*args, "--set", "lr=0.03"]) == 0
    out = capsys.readouterr().out
    # the law alone: P = 1.00 at 11,667 steps of 100,000; 3 of 12 died: P = 0.75, and the
    # Clopper-Pearson interval of 3 in 12 is 0.055 to 0.572
    assert "collapse risk (hidden_bias=scalar, SGD lr 0.03): 3 of 12 runs died (0.25," in out
    # the interval of P straddles an even chance: neither yes nor no
    assert (
        "within the budget of 100,000 steps: uncertain (P = 0.75, 95% interval 0.43 to 0.95" in out
    )
    # every run died: no, even at the interval's top (1 - 0.025^(1/6) = 0.46 of them alive)
    assert main([*args, "--set", "lr=0.03", "--set", "hidden_bias=tied"]) == 0
    assert "steps: no (P = 0.00, 95% interval 0.00 to 0.46:" in capsys.readouterr().out
    # lr 0.01 was not measured: said so, and no probability is claimed
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "collapse risk (hidden_bias=scalar, SGD lr 0.01): unmeasured" in out
    assert "within the budget of 100,000 steps: unknown" in out and "P = " not in out
    # another task: a rate measured on paper-fig3 does not carry over
    assert main([*args, "--set", "lr=0.03", "--set", "K=512"]) == 0
    assert "collapse risk (hidden_bias=scalar, SGD lr 0.03): unmeasured" in capsys.readouterr().out


def test_the_default_forecast_never_promises_a_jump_the_network_may_not_make(capsys):
    """The committed rates: paper-fig3's default form (scalar) at SGD lr 0.03 has runs that
    died, so the chance of a jump within the budget carries that risk and is never P = 1.00;
    the step is the step given a transition."""
    from interp.analysis.collapse import rates
    from interp.experiments.core import RESULTS_DIR

    r = rates(pd.read_csv(RESULTS_DIR / "collapse-rate.csv")).set_index(["lr", "hidden_bias"])
    dead, n = (int(r.loc[(0.03, "scalar"), c]) for c in ("dead", "n"))
    assert dead >= 1  # the committed data have a death there (else this test says nothing)
    assert main(["forecast", "--preset", "paper-fig3", "--set", "lr=0.03"]) == 0
    out = capsys.readouterr().out
    assert "transition step given a transition: " in out
    assert f"(hidden_bias=scalar, SGD lr 0.03): {dead} of {n} runs died" in out
    assert "P = " in out and "P = 1.00" not in out


def test_where_runs_were_followed_to_the_budget_p_is_their_measured_share(tmp_path, capsys):
    """P is what the configuration's runs did within the budget, not the law times survival:
    of 5 runs followed to 15000 steps, transitions at 9000 and 14000, one alive at the budget,
    one dead at 8000, one transitioned at 16000 (after it). A run left unfinished has no fate."""
    law = write_law(tmp_path / "law.json")
    rows = [
        ("transitioned", 9000, 15000),
        ("transitioned", 14000, 15000),
        ("alive", "", 15000),
        ("dead", 8000, 15000),
        ("transitioned", 16000, 20000),
        ("unfinished", "", 3000),
    ]
    lines = ["hidden_bias,lr,seed,fate,fate_step,steps_done"]
    lines += [f"scalar,0.03,{i},{f},{at},{done}" for i, (f, at, done) in enumerate(rows)]
    rates = tmp_path / "rates.csv"
    rates.write_text("\n".join(lines) + "\n")
    args = ["forecast", "--preset", "paper-fig3", "--law", str(law), "--rates", str(rates)]
    assert main([*args, "--set", "lr=0.03", "--set", "steps=15000"]) == 0
    out = capsys.readouterr().out
    low, high = clopper_pearson(2, 5)  # 2 of the 5 runs with a fate, within 15000 steps
    assert (
        f"within the budget of 15,000 steps: uncertain (P = 0.40, 95% interval {low:.2f} to "
        f"{high:.2f}: measured, 2 of 5 runs of this configuration transitioned within it;" in out
    )
    assert main([*args, "--set", "lr=0.03", "--set", "steps=10000"]) == 0
    low, high = clopper_pearson(1, 5)  # by 10000 only the first had jumped (all followed)
    assert f"(P = 0.20, 95% interval {low:.2f} to {high:.2f}: measured, 1 of 5" in (
        capsys.readouterr().out
    )
    # runs followed to 15000 only cannot say what happens by 30000: the law times survival,
    # said as such, with what the runs did as far as all were followed
    assert main([*args, "--set", "lr=0.03", "--set", "steps=30000"]) == 0
    out = capsys.readouterr().out
    assert "the law's P times the measured survival; what the runs did within this" in out
    assert "measured: 2 of 5 runs of this configuration transitioned within 15,000 steps" in out


def test_the_measured_share_holds_the_committed_runs_at_their_own_budget(capsys):
    """The committed collapse-rate rows at lr 0.03 (15000 steps, where they were followed):
    P is the share of them that transitioned, whatever the law would say."""
    from interp.experiments.core import RESULTS_DIR

    rows = pd.read_csv(RESULTS_DIR / "collapse-rate.csv")
    at = rows[(rows["lr"] == 0.03) & (rows["hidden_bias"] == "scalar")]
    within = (at["fate"] == "transitioned") & (at["fate_step"] <= 15000)
    k, n = int(within.sum()), int(at["fate"].isin(FATES[:3]).sum())
    assert 0 < k < n  # (else this test says little)
    argv = ["forecast", "--preset", "paper-fig3", "--set", "lr=0.03", "--set", "steps=15000"]
    assert main(argv) == 0
    low, high = clopper_pearson(k, n)
    assert f"(P = {k / n:.2f}, 95% interval {low:.2f} to {high:.2f}: measured, {k} of {n}" in (
        capsys.readouterr().out
    )


def test_a_configuration_the_data_trained_says_what_its_runs_did(tmp_path, capsys):
    fields, _ = law_inputs(*build_configs("paper-fig3", {"hidden_bias": "per_unit"}, 0)[:3])
    at_n24 = {**fields, "N": 24.0}
    observed = [
        {**at_n24, "runs": 3, "transitioned": 0, "budget": 60000, "median_step": None},
        {
            **fields,
            "lr": 0.03,
            "runs": 3,
            "transitioned": 3,
            "budget": 16000,
            "median_step": 10858.0,
        },
        # the learning rates the law was fitted over (0.01 to 0.2)
        *(
            {**fields, "lr": lr, "runs": 3, "transitioned": 3, "budget": 16000, "median_step": 1.0}
            for lr in (0.01, 0.2)
        ),
    ]
    law = write_law(tmp_path / "law.json", observed=observed)
    # the law says 35,000 steps at N 24 too (no N term here); its own runs said otherwise
    assert (
        main(
            [
                "forecast",
                "--preset",
                "paper-fig3",
                "--set",
                "hidden_bias=per_unit",
                "--set",
                "N=24",
                "--law",
                str(law),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "transition step given a transition: 35,000" in out
    assert "none of its 3 runs transitioned within 60,000 steps" in out
    assert (
        main(
            [
                "forecast",
                "--preset",
                "paper-fig3",
                "--set",
                "hidden_bias=per_unit",
                "--set",
                "lr=0.03",
                "--law",
                str(law),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "3 of 3 runs transitioned within 16,000 steps (median step 10,858)" in out
    # a configuration the data never trained: nothing observed is claimed
    assert (
        main(
            [
                "forecast",
                "--preset",
                "paper-fig3",
                "--set",
                "hidden_bias=per_unit",
                "--set",
                "lr=0.05",
                "--law",
                str(law),
            ]
        )
        == 0
    )
    assert "observed" not in capsys.readouterr().out


def test_a_short_budget_and_another_learning_rate(tmp_path, capsys):
    law = write_law(tmp_path / "law.json")
    code = main(
        [
            "forecast",
            "--preset",
            "paper-fig3",
            "--set",
            "lr=0.03",
            "--set",
            "steps=11667",
            "--law",
            str(law),
            "--rates",
            write_rates(tmp_path / "rates.csv", {}),  # no rate: the law's probability alone
        ]
    )
    out = capsys.readouterr()
    assert code == 0
    assert "transition step given a transition: 11,667" in out.out  # 350 / 0.03
    assert (
        "within the budget of 11,667 steps: " in out.out and "assuming no collapse: 0.50" in out.out
    )
    # the author's scalar biases (the preset's default) are named, not refused
    assert "hidden_bias=scalar" in out.err and "collapsed" in out.err


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("lr=0.5", "lr=0.5 is outside the law's data (0.01 to 0.2)"),
        ("K=64", "K=64 is outside the law's data (128 to 1024)"),
        ("qk_bias=true", "qk_bias=True is not the law's (False)"),
        ("optimizer=adam", "optimizer=adam is not the law's (sgd)"),
    ],
)
def test_outside_the_data_is_refused_by_name(tmp_path, capsys, setting, words):
    law = write_law(tmp_path / "law.json")
    code = main(["forecast", "--preset", "paper-fig3", "--set", setting, "--law", str(law)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and words in err


def test_a_term_at_its_limit_names_the_fields_it_reads(tmp_path, capsys):
    law = json.loads(write_law(tmp_path / "law.json", p_C=[0.0, 0.95]).read_text())
    terms = law["law"]["terms"]
    law["law"]["coef"][1 + terms.index("log p_C")] = 0.2  # T -> 0 as p_C -> 0
    (tmp_path / "law.json").write_text(json.dumps(law))
    args = [
        "forecast",
        "--preset",
        "paper-fig3",
        "--set",
        "hidden_bias=per_unit",
        "--law",
        str(tmp_path / "law.json"),
    ]
    # p_C = 0: the step goes to 0, which is no forecast: refused, naming the field
    assert main([*args, "--set", "p_C=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: p_C=0: log p_C is at its limit")
    # with the opposite sign, T -> inf as p_C -> 0: no transition expected, said, not refused
    law["law"]["coef"][1 + terms.index("log p_C")] = -0.2
    (tmp_path / "law.json").write_text(json.dumps(law))
    assert main([*args, "--set", "p_C=0"]) == 0
    out = capsys.readouterr().out
    assert "transition: none expected (log p_C is at its limit" in out
    assert "within the budget: no (P = 0)" in out
    # beyond n = L (where the law predicts none) the task itself refuses, naming its fields
    assert main([*args, "--set", "N=24", "--set", "L=16"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "N / B = 24" in err and "L=16" in err
    # a term that reads several fields names them all
    assert term_fields("log P(distinct labels)") == ("L", "N", "B")
    assert term_fields("log (1-1/n)") == ("N", "B") and term_fields("log K") == ("K",)


def test_a_missing_or_broken_law_is_one_line(tmp_path, capsys):
    assert main(["forecast", "--law", str(tmp_path / "none.json")]) == 2
    assert "none.json is missing" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"law": 1}')
    assert main(["forecast", "--law", str(tmp_path / "bad.json")]) == 2
    assert "is not a stored transition law" in capsys.readouterr().err
    # a damaged record of what the data trained: refused on loading, not at the lookup
    law = write_law(tmp_path / "obs.json", observed=[{"K": 256.0}])
    assert main(["forecast", "--preset", "paper-fig3", "--law", str(law)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "an observed configuration lacks L" in err
    fields, _ = law_inputs(*build_configs("paper-fig3", {"hidden_bias": "per_unit"}, 0)[:3])
    whole = {**fields, "runs": 3, "transitioned": 3, "budget": 16000, "median_step": 10858.0}
    for damage, words in [
        ({"median_step": "?"}, "median_step='?' is not a number, but 3 of its runs transitioned"),
        ({"runs": None}, "runs=None is not a number"),
    ]:
        law = write_law(tmp_path / "obs.json", observed=[{**whole, **damage}])
        assert main(["forecast", "--preset", "paper-fig3", "--law", str(law)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and words in captured.err
    broken = dict(whole)
    del broken["median_step"]  # a record without it failed at the lookup, after the forecast
    law = write_law(tmp_path / "obs.json", observed=[broken])
    assert main(["forecast", "--preset", "paper-fig3", "--law", str(law)]) == 2
    assert "an observed configuration lacks median_step" in capsys.readouterr().err


def test_the_live_forecast_starts_from_the_law(tmp_path):
    from phenomenology.live import live_forecast

    law = write_law(tmp_path / "law.json")
    task, model, train, _ = build_configs("paper-fig3", {"hidden_bias": "per_unit"}, 0)
    prior, calibration, why = law_prior(task, model, train, path=law)
    assert why == "" and prior.step == pytest.approx(35000.0)
    # a flat plateau seen to step 2000: no curve forecaster is calibrated, so the prior alone
    rows = [{"step": float(s), "ic_loss": 3.0 - 1e-5 * s} for s in range(0, 2001, 250)]
    cols = live_forecast(rows, {"L": 32, "N": 8, "B": 1}, prior=prior, calibration=calibration)
    assert cols["forecast_step"] == pytest.approx(35000.0, rel=1e-6)
    assert cols["forecast_low"] == pytest.approx(35000 * math.exp(-T90_10 * 0.1), rel=1e-6)
    # outside the data (Adam): no prior, as before
    adam = build_configs("paper-fig3", {"optimizer": "adam"}, 0)
    assert law_prior(*adam[:3], path=law)[0] is None


def write_axes(path, slope=-0.5, se=0.0, low=32, high=512):
    """Axis terms with known exponents: batch_size^slope (se), the width's exponent +1; weight
    decay 1e-4 doubles the step (3 of 10 long runs faded), 1e-6 is the law's."""
    term = {"dof": 10, "configurations": 2}
    level = {"se": 0.0, "runs": 10, "steps": 20000}
    path.write_text(
        json.dumps(
            {
                "levels": {
                    "weight_decay": [
                        {"value": 1e-6, "shift": 0.0, "faded": 0, **level},
                        {"value": 1e-4, "shift": math.log(2), "faded": 3, **level},
                    ]
                },
                "terms": {
                    "batch_size": {
                        "field": "batch_size",
                        "slope": slope,
                        "se": se,
                        "low": low,
                        "high": high,
                        **term,
                    },
                    "d_mlp": {
                        "field": "d_mlp",
                        "slope": 1.0,
                        "se": 0.0,
                        "low": 64,
                        "high": 256,
                        **term,
                    },
                },
            }
        )
    )
    return str(path)


def test_a_new_batch_size_and_width_are_the_law_carried_by_their_exponents(tmp_path, capsys):
    """Batch 512 at exponent -1/2 halves the law's 35,000; with se 0.1 the spread in log step
    grows to sqrt(0.1^2 + (0.1 log 4)^2); width 64 at exponent +1 halves it again; outside the
    values trained is refused by name."""
    law = write_law(tmp_path / "law.json")
    base = [
        "forecast",
        "--preset",
        "paper-fig3",
        "--set",
        "hidden_bias=per_unit",
        "--law",
        str(law),
    ]
    axes = write_axes(tmp_path / "axes.json")
    assert main([*base, "--axes", axes, "--set", "batch_size=512"]) == 0
    out = capsys.readouterr().out
    assert "transition step given a transition: 17,500" in out
    assert "carried to batch_size=512 by its exponent -0.500" in out
    assert "observed:" not in out
    sd = math.sqrt(0.1**2 * (T90_10 / 1.2815515655446004) ** 2 + (0.1 * math.log(4)) ** 2)
    axes = write_axes(tmp_path / "axes2.json", se=0.1)
    assert main([*base, "--axes", axes, "--set", "batch_size=512"]) == 0
    half = 1.2815515655446004 * sd
    low, high = 17500 * math.exp(-half), 17500 * math.exp(half)
    assert f"(80% interval {low:,.0f} to {high:,.0f})" in capsys.readouterr().out
    assert main([*base, "--axes", axes, "--set", "batch_size=512", "--set", "d_mlp=64"]) == 0
    assert "transition step given a transition: 8,750" in capsys.readouterr().out
    assert main([*base, "--axes", axes, "--set", "d_mlp=32"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "error: d_mlp=32 is outside the values trained (64 to 256): no forecast outside the data"
    )


def test_the_packaged_axis_terms_are_those_of_the_committed_rows():
    from experiments.catalog.law_axes import fitted_terms
    from phenomenology.law_axes import AxisTerms

    assert AxisTerms.load() == fitted_terms(), "run `python experiments/fit_law_axes.py`"


def test_beyond_the_configurations_the_law_was_fitted_on_is_refused(capsys):
    """The packaged law's data reach p_C 0 and lr 0.003 only through configurations that never
    transitioned: it was fitted on p_C 0.5 to 0.95 (docs/results/p-c-interior.md measured it
    five times early at p_C 0.1) and lr 0.01 to 0.2; a configuration its data trained is still
    forecast, with what its runs did."""
    base = ["forecast", "--preset", "paper-fig3", "--set", "hidden_bias=per_unit"]
    assert main([*base, "--set", "p_C=0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: p_C=0.1 is outside the configurations the law was fitted on (0.5 to 0.95; its "
        "data beyond them did not transition): no forecast outside the data"
    )
    assert main([*base, "--set", "lr=0.005"]) == 2
    assert "lr=0.005 is outside the configurations the law was fitted on (0.01 to 0.2" in (
        capsys.readouterr().err
    )
    assert main([*base, "--set", "lr=0.003", "--set", "steps=8000"]) == 0
    assert "none of its 6 runs transitioned within 8,000 steps" in capsys.readouterr().out


def test_a_weight_decay_trained_long_is_forecast_with_how_often_in_context_learning_faded(
    tmp_path, capsys
):
    law = write_law(tmp_path / "law.json")
    axes = write_axes(tmp_path / "axes.json")
    base = ["forecast", "--preset", "paper-fig3", "--set", "hidden_bias=per_unit"]
    base += ["--law", str(law), "--axes", axes]
    assert main([*base, "--set", "weight_decay=1e-4"]) == 0
    out = capsys.readouterr().out
    assert "transition step given a transition: 70,000" in out
    assert "carried to weight_decay=0.0001 by its measured factor 2.00" in out
    assert (
        "long runs: at weight_decay=0.0001 in-context accuracy faded in 3 of 10 runs of 20,000 "
        "steps (transience.md); beyond 20,000 steps it was not measured" in out
    )
    assert main([*base, "--set", "steps=20000"]) == 0  # the author's 1e-6, within the runs
    out = capsys.readouterr().out
    assert "faded in 0 of 10 runs of 20,000 steps (transience.md)\n" in out
    assert main([*base, "--set", "weight_decay=3e-5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: weight_decay=3e-05 is not among the values trained (1e-06, 0.0001): no forecast "
        "outside the data"
    )


def test_levels_are_the_log_shift_against_the_reference_each_group_its_own_intercept():
    """Steps 1000 and 3000 (two K) at the reference, twice that at 1e-4, each times 1.02^-1, 1
    and 1.02 over three seeds; one run at 1e-4 never transitioned (NaN), counted, not fitted."""
    from phenomenology.law_axes import fit_levels

    groups, values, steps, faded = [], [], [], []
    for k, base in (("64", 1000.0), ("256", 3000.0)):
        for wd, factor in ((1e-6, 1.0), (1e-4, 2.0)):
            for s in (-1, 0, 1):
                groups.append(k)
                values.append(wd)
                steps.append(base * factor * 1.02**s)
                faded.append(wd == 1e-4 and s == 1)
    groups.append("64")
    values.append(1e-4)
    steps.append(math.nan)
    faded.append(False)
    term = fit_levels("weight_decay", 1e-6, groups, values, steps, faded, 20000)
    ref, high = term.at(1e-6), term.at(1e-4)
    assert ref.shift == 0.0 and ref.runs == 6 and ref.faded == 0
    assert high.shift == pytest.approx(math.log(2), abs=1e-6)
    assert high.runs == 7 and high.faded == 2 and high.steps == 20000
    # residuals +-log 1.02 on 12 runs, 3 parameters: se = sd x sqrt(1/6 + 1/6)
    sd = math.sqrt(8 * math.log(1.02) ** 2 / 9)
    assert high.se == pytest.approx(sd * math.sqrt(1 / 3), abs=1e-6)
    assert term.at(3e-5) is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"terms": {"d_mlp": {"field": 3}}}', "damaged axis terms (field=3 is not text)"),
        (
            '{"terms": {"d_mlp": {"field": "d_mlp", "slope": "x", "se": 0, "dof": 1, "low": 1, '
            '"high": 2, "configurations": 1}}}',
            "damaged axis terms (slope='x' is not a finite number)",
        ),
        (
            '{"terms": {"lr": {"field": "lr", "slope": 1, "se": 0, "dof": 1, "low": 1, '
            '"high": 2, "configurations": 1}}}',
            "damaged axis terms (no axis 'lr')",
        ),
        ("[1, 2", "is not valid JSON"),
    ],
)
def test_damaged_axis_terms_are_one_line_naming_the_file(tmp_path, capsys, text, words):
    path = tmp_path / "axes.json"
    path.write_text(text)
    assert main(["forecast", "--axes", str(path), "--set", "d_mlp=64"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(path) in err and words in err
