"""The collapse-rate experiment: each run's fate from its metrics, the intervals and the test
between forms against hand-computed values, and the page's counts of runs and missing seeds."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from experiments.catalog.collapse_rate import (
    COLUMNS,
    fate_row,
    holm,
    longest_recovery,
    mcnemar_exact,
    rejudged,
    render_collapse_rate,
    stale_deaths,
    verdicts,
    with_continued,
)
from interp.analysis.collapse import SPAN_LR_STEPS, clopper_pearson, rates, span_steps
from interp.experiments import get_experiment

STEPS = np.arange(0, 15001, 250)
LR = SPAN_LR_STEPS / 7500
"""A learning rate at which the rule's span is 7500 steps."""


def _run(tmp_path, name, ic_acc, active, *, steps=15000, lr=LR, form="scalar", seed=0):
    d = tmp_path / name
    d.mkdir()
    config = {
        "model": {"hidden_bias": form, "n_mlp_layers": 3},
        "train": {"optimizer": "sgd", "lr": lr, "seed": seed, "steps": steps},
    }
    (d / "config.json").write_text(json.dumps(config))
    n = len(ic_acc)
    pd.DataFrame({"step": STEPS[:n], "ic_acc": ic_acc, "active_h3": active}).to_csv(
        d / "metrics.csv", index=False
    )
    return d


def test_intervals_and_paired_tests_match_hand_computed_values():
    low, high = clopper_pearson(0, 12)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 12), rel=1e-9)
    assert clopper_pearson(1, 1) == pytest.approx((0.025, 1.0))
    # 7 of 12 against 12 of 12 on the same seeds: 5 discordant seeds, all one way,
    # p = 2 / 2**5 (an independent-samples test would give 1584 / 42504 = 0.037)
    seven = {s: s < 7 for s in range(12)}
    twelve = {s: True for s in range(12)}
    assert mcnemar_exact(seven, twelve) == pytest.approx(2 / 32)
    assert mcnemar_exact(twelve, seven) == pytest.approx(2 / 32)
    # 3 one way, 1 the other among 4 discordant: p = 2 * P(X <= 1 | n=4) = 2 * 5/16
    a = {0: True, 1: True, 2: True, 3: False, 4: True}
    b = {0: False, 1: False, 2: False, 3: True, 4: True, 9: True}  # seed 9 has no pair
    assert mcnemar_exact(a, b) == pytest.approx(10 / 16)
    assert mcnemar_exact(a, a) == 1.0
    assert math.isnan(mcnemar_exact(a, {7: True}))
    # Holm: sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx(
        [0.03, 0.06, 0.06, math.nan], nan_ok=True
    )


def test_each_run_gets_its_fate(tmp_path):
    flat = np.full(len(STEPS), 0.03)
    jump = 0.03 + 0.97 / (1 + np.exp(-(STEPS - 10000) / 300))
    assert span_steps("sgd", LR) == 7500
    # silent from step 500 on: dead once 7500 steps have passed, at step 8000
    dead = fate_row(_run(tmp_path, "dead", flat, np.where(STEPS >= 500, 0.001, 0.5)))
    assert (dead["fate"], dead["fate_step"], dead["silent_since"]) == ("dead", 8000, 500)
    # silent 250-5000 (4750 steps), then firing again and jumping: a recovery, then a transition
    back = np.where((STEPS >= 250) & (STEPS < 5000), 0.011, 0.25)
    up = fate_row(_run(tmp_path, "up", jump, back))
    assert up["fate"] == "transitioned" and up["fate_step"] == pytest.approx(10000, abs=100)
    assert up["recovered_after"] == 4750 and up["min_active_last"] == pytest.approx(0.011)
    alive = fate_row(_run(tmp_path, "alive", flat, np.full(len(STEPS), 0.3)))
    assert alive["fate"] == "alive" and math.isnan(alive["fate_step"])
    short = fate_row(_run(tmp_path, "short", flat[:9], np.full(9, 0.3)))
    assert short["fate"] == "unfinished" and short["steps_done"] == 2000


def test_verdicts_say_what_each_judged_run_did_after():
    """At ``LR`` the span is 7500 steps: both runs silent from step 500 are judged
    dead at 8000; one fires again at 12000 (an overturned verdict), the other never; both are
    followed 7000 steps past the verdict, 0.93 spans. A run that never fell silent has none."""
    silent = np.where(STEPS >= 500, 0.001, 0.5)
    back = np.where((STEPS >= 500) & (STEPS < 12000), 0.001, 0.5)
    runs = enumerate([silent, back, np.full(len(STEPS), 0.4)])
    curves = pd.concat(
        pd.DataFrame({"lr": LR, "seed": seed, "step": STEPS, "active_last": active})
        for seed, active in runs
    ).assign(hidden_bias="scalar", ic_acc=0.03)
    v = verdicts(curves).set_index("seed")
    assert list(v.index) == [0, 1]
    assert (v["verdict"] == 8000).all() and (v["followed"] == 7000).all()
    assert v["spans"].tolist() == pytest.approx([7000 / 7500] * 2)
    assert math.isnan(v.loc[0, "fired_again"]) and v.loc[1, "fired_again"] == 12000


def test_a_run_trained_again_past_its_budget_is_judged_on_its_longer_curve():
    """Seed 0 is silent from step 500 to its budget, 15000: judged dead at 8000. Trained again to
    30000 it fires at 20000: the verdict is overturned, followed 22000 steps (2.9 spans)."""
    silent = np.where(STEPS >= 500, 0.001, 0.5)
    curve = pd.DataFrame({"step": STEPS, "active_last": silent})
    longer = np.arange(0, 30001, 250)
    back = np.where((longer >= 500) & (longer < 20000), 0.001, 0.5)
    again = pd.DataFrame({"step": longer, "active_last": back})
    key = {"hidden_bias": "scalar", "lr": LR, "seed": 0, "ic_acc": 0.03}
    curves, continued = curve.assign(**key), again.assign(**key)
    assert math.isnan(verdicts(curves).iloc[0]["fired_again"])
    v = verdicts(with_continued(curves, continued)).iloc[0]
    assert (v["verdict"], v["followed"], v["fired_again"]) == (8000, 22000, 20000)
    assert with_continued(curves, continued.iloc[0:0]) is curves


def _rows(fates: dict) -> pd.DataFrame:
    rows = []
    for (lr, form), outcomes in fates.items():
        for seed, fate in enumerate(outcomes):
            rows.append(
                {c: math.nan for c in COLUMNS}
                | {"hidden_bias": form, "lr": lr, "seed": seed, "fate": fate}
                | {"steps": 15000, "steps_done": 15000, "commit": "abc", "command": "x"}
            )
    return pd.DataFrame(rows)


def test_the_page_counts_runs_and_names_missing_seeds_never_more():
    rows = _rows(
        {
            (0.03, "scalar"): ["dead", "transitioned", "dead", "unfinished"],
            (0.03, "per_unit"): ["transitioned", "alive"],
        }
    )
    r = rates(rows).set_index("hidden_bias")
    assert (r.loc["scalar", "n"], r.loc["scalar", "dead"], r.loc["scalar", "rate"]) == (3, 2, 2 / 3)
    page = render_collapse_rate(get_experiment("collapse-rate"), rows)
    low, high = clopper_pearson(2, 3)
    assert (
        f"| 0.03 | scalar | 3 / 36 | 2 | 1 | 0 | 0.67 ({low:.2f}-{high:.2f}) | 0, 1, 2 | "
        "3, 4, 5, 6, 7, 8, 9, 10, 11, 12, " in page
    )
    assert "| 0.03 | per_unit | 2 / 12 | 0 | 1 | 1 |" in page  # the forms' own declarations
    assert "| 0.03 | tied | 0 / 12 | - | - | - | unmeasured | none |" in page
    assert "| 0.01 | scalar | 0 / 12 | - | - | - | unmeasured |" in page
    # seeds 0 and 1 are paired (seed 2 has no per_unit run, seed 3 no fate): seed 0 died under
    # scalar only; seed 1 transitioned under both
    assert "| 0.03 | scalar against per_unit | dead | 2 | 1 | 0 | 1.00 | 1.00 |" in page
    assert "| 0.03 | scalar against tied | dead | 0 | - | - | not testable | - |" in page
    assert "2 comparisons are made on this page" in page


def test_the_forecast_from_the_first_seeds_is_scored_on_the_later_ones():
    """Seeds 0-11: 6 transitioned within 15000 steps, 2 dead, 4 alive: forecast's P is 6 / 12;
    seeds 12-15 (held out): 1 of 4 transitioned, whose exact 95% interval holds 0.5."""
    first = ["transitioned"] * 6 + ["dead"] * 2 + ["alive"] * 4
    rows = _rows({(0.03, "scalar"): first + ["transitioned", "alive", "alive", "dead"]})
    rows["fate_step"] = [9000.0 if f == "transitioned" else math.nan for f in rows["fate"]]
    page = render_collapse_rate(get_experiment("collapse-rate"), rows)
    low, high = clopper_pearson(1, 4)
    assert "| 0.03 | scalar | 15000 | 0.50 (6 of 12) | " in page
    assert f"| 1 / 4 | 0.25 ({low:.2f}-{high:.2f}) | yes (law x survival: " in page


def test_the_committed_page_is_rendered_from_the_committed_rows():
    from interp.experiments.core import RESULTS_DIR, page_text

    experiment = get_experiment("collapse-rate")
    assert page_text(experiment, RESULTS_DIR) == (RESULTS_DIR / "collapse-rate.md").read_text()


def test_a_verdict_is_judged_again_on_the_longest_curve_by_todays_rule():
    """A row judged dead at 8000 by an earlier, shorter span: its curve, followed to 30000 steps,
    is silent from 500 to 20000 (19500 steps, shorter than a span of 25000) and jumps at about
    24000. Judged again it transitioned there, followed 30000 steps; a row without a curve keeps
    its fate, and a death without a curve is named as out of date."""
    lr = SPAN_LR_STEPS / 25000
    longer = np.arange(0, 30001, 250)
    active = np.where((longer >= 500) & (longer < 20000), 0.001, 0.5)
    jump = 0.03 + 0.97 / (1 + np.exp(-(longer - 24000) / 300))
    curve = pd.DataFrame({"step": longer, "active_last": active, "ic_acc": jump})
    curve = curve.assign(hidden_bias="scalar", lr=lr, seed=0)
    rows = pd.DataFrame(
        [
            {c: math.nan for c in COLUMNS}
            | {"hidden_bias": "scalar", "lr": lr, "seed": seed, "steps": 15000}
            | {"steps_done": 15000, "fate": "dead", "fate_step": 8000.0, "silent_since": 500.0}
            | {"commit": "abc", "command": "x"}
            for seed in (0, 1)
        ]
    )
    again = rejudged(rows, curve)
    first, second = again.iloc[0], again.iloc[1]
    assert (first["fate"], first["steps_done"], first["steps"]) == ("transitioned", 30000, 15000)
    assert first["fate_step"] == pytest.approx(24000, abs=150)
    assert math.isnan(first["silent_since"]) and first["recovered_after"] == 19500
    assert (first["commit"], first["command"]) == ("abc", "x")
    pd.testing.assert_series_equal(second, rows.iloc[1])  # no curve: kept as it was
    assert stale_deaths(again, curve)["seed"].tolist() == [1]


def _committed():
    from interp.experiments.core import RESULTS_DIR

    rows = pd.read_csv(RESULTS_DIR / "collapse-rate.csv")
    curves = pd.read_csv(RESULTS_DIR / "collapse-rate-curves.csv")
    continued = pd.read_csv(RESULTS_DIR / "collapse-rate-continued.csv")
    return rows, with_continued(curves, continued)


def test_every_committed_fate_is_todays_rule_on_its_longest_curve():
    """The committed table must be what the rule says of the committed curves: a change of the
    rule without judging the runs again fails here, and no death stands without a curve."""
    rows, curves = _committed()
    again = rejudged(rows, curves)
    pd.testing.assert_frame_equal(again, rows, check_dtype=False)
    assert stale_deaths(rows, curves).empty


def test_the_span_is_a_margin_over_the_longest_recovery_in_the_committed_data():
    from interp.analysis.collapse import LONGEST_RECOVERY_LR_STEPS, SPAN_MARGIN

    rows, _ = _committed()
    top = longest_recovery(rows)
    assert float(top["recovered_after"]) * float(top["lr"]) == pytest.approx(
        LONGEST_RECOVERY_LR_STEPS
    )
    assert SPAN_LR_STEPS == pytest.approx(SPAN_MARGIN * LONGEST_RECOVERY_LR_STEPS)
    assert SPAN_MARGIN > 1


def test_a_damaged_curve_is_refused_before_any_run_is_judged_from_it():
    """A curve file cut short (a run's curve trained again ending before its budget curve) or
    with an empty value is a damaged file: refused naming the file and the run, never judged."""
    from experiments.catalog.collapse_rate import checked_curves
    from interp.io.errors import DamagedFileError

    key = {"hidden_bias": "scalar", "lr": 0.03, "seed": 7}
    curve = pd.DataFrame({"step": STEPS, "active_last": 0.3, "ic_acc": 0.03}).assign(**key)
    cut = curve[curve["step"] <= 5000]
    with pytest.raises(DamagedFileError, match=r"\(scalar, lr 0.03, seed 7\): its curve ends at"):
        with_continued(curve, cut)
    holed = curve.copy()
    holed.loc[3, "ic_acc"] = math.nan
    with pytest.raises(DamagedFileError, match=r"x.csv \(scalar, lr 0.03, seed 7\)"):
        checked_curves(holed, "x.csv")
    assert checked_curves(curve, "x.csv") is curve
