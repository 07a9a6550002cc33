"""Held-out early-warning scores against answers known by construction or counted by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments.warning_scores import (
    COMBINED,
    held_out_auroc,
    held_out_lead,
    oriented,
    verdict_table,
)

BUDGET = 1000.0


def at_fraction(runs, f: float = 0.1) -> pd.DataFrame:
    """One row per run at fraction ``f``: ``runs`` = [(config, positive, {signal: value})]."""
    rows = []
    for i, (config, positive, values) in enumerate(runs):
        rows.append(
            {
                "config": config,
                "point": config,
                "seed": i,
                "step": f * BUDGET,
                "fraction": f,
                "positive": positive,
                "transition_step": 900.0 if positive else math.inf,
                **values,
            }
        )
    return pd.DataFrame(rows)


def curves(runs) -> pd.DataFrame:
    """Rows at steps 100, 200, ... of each run ``(config, transition_step or None, values)``."""
    rows = []
    for i, (config, t, values) in enumerate(runs):
        for j, v in enumerate(values):
            step = 100.0 * (j + 1)
            rows.append(
                {
                    "config": config,
                    "point": config,
                    "seed": i,
                    "step": step,
                    "fraction": step / BUDGET,
                    "positive": t is not None,
                    "transition_step": math.inf if t is None else t,
                    "s": v,
                }
            )
    return pd.DataFrame(rows)


def row(table: pd.DataFrame, signal: str, at: float | None = None) -> pd.Series:
    pick = table["signal"] == signal
    if at is not None:
        pick &= np.isclose(table["at"], at)
    (i,) = np.flatnonzero(pick)
    return table.iloc[i]


def test_the_sign_makes_the_auroc_at_least_a_half_and_defaults_to_plus_one():
    t = at_fraction([("A", True, {"s": 1.0}), ("A", False, {"s": 0.0}), ("B", False, {"s": 2.0})])
    # positives [1] against negatives [0, 2]: 0.5, a tie: +1
    assert oriented(t, "s") == 1
    t = at_fraction([("A", True, {"s": 0.0}), ("A", False, {"s": 1.0}), ("B", False, {"s": 2.0})])
    assert oriented(t, "s") == -1
    only_negatives = at_fraction([("A", False, {"s": 5.0}), ("B", False, {"s": 1.0})])
    assert oriented(only_negatives, "s") == 1
    assert oriented(t.assign(s=math.nan), "s") == 1


def test_a_perfect_signal_and_its_negation_score_one_held_out():
    rng = np.random.default_rng(1)
    runs = [
        (c, positive, {"up": float(positive) + 1e-3 * rng.standard_normal()})
        for c in "ABCD"
        for positive in (True, True, False, False)
    ]
    t = at_fraction(runs)
    t["down"] = -t["up"]
    assert oriented(t, "down") == -1
    table = held_out_auroc(t, ["up", "down"], fractions=(0.1,), n_boot=200)
    for s in ("up", "down", COMBINED):
        r = row(table, s)
        assert (r["auroc"], r["low"], r["high"]) == (1.0, 1.0, 1.0)
        assert (r["positives"], r["negatives"], r["configurations"]) == (8, 8, 4)
    assert list(table.columns) == [
        "signal",
        "at",
        "auroc",
        "low",
        "high",
        "positives",
        "negatives",
        "configurations",
    ]


def test_a_direction_that_flips_between_configurations_is_scored_with_the_others_sign():
    # A: positive high (5 against 0); B, C: positive low (1 against 2, 1 against 3).
    t = at_fraction(
        [
            ("A", True, {"s": 5.0}),
            ("A", False, {"s": 0.0}),
            ("B", True, {"s": 1.0}),
            ("B", False, {"s": 2.0}),
            ("C", True, {"s": 1.0}),
            ("C", False, {"s": 3.0}),
        ]
    )
    # held out A: B + C give positives [1, 1] against [2, 3]: AUROC 0, sign -1 -> A scores -5, 0
    assert oriented(t[t["config"] != "A"], "s") == -1
    # held out B: A + C give [5, 1] against [0, 3]: 3 of 4 pairs, sign +1 -> B scores 1, 2
    # held out C: A + B give [5, 1] against [0, 2]: 3 of 4, sign +1 -> C scores 1, 3
    assert oriented(t[t["config"] != "B"], "s") == 1
    assert oriented(t[t["config"] != "C"], "s") == 1
    # pooled: positives [-5, 1, 1] against [0, 2, 3]: each 1 beats 0 only -> 2 of 9 pairs
    # (in sample, with one sign +1 for all: [5, 1, 1] against [0, 2, 3] -> 5 of 9)
    r = row(held_out_auroc(t, ["s"], fractions=(0.1,), n_boot=50), "s")
    assert r["auroc"] == pytest.approx(2 / 9)
    assert (r["positives"], r["negatives"], r["configurations"]) == (3, 3, 3)


def test_the_combination_joins_two_signals_each_informative_in_half_the_configurations():
    # s1 separates in A, B (+1 / -1) and is 0 in C, D; s2 the other way round
    runs = []
    for c in "ABCD":
        for positive in (True, True, False, False):
            v = 1.0 if positive else -1.0
            runs.append((c, positive, {"s1": v, "s2": 0.0} if c in "AB" else {"s1": 0.0, "s2": v}))
    table = held_out_auroc(at_fraction(runs), ["s1", "s2"], fractions=(0.1,), n_boot=100)
    # s1 alone (sign +1 in every fold): positives [1]*4 + [0]*4 against [-1]*4 + [0]*4:
    # the 1s beat all 8 (32 pairs), the 0s beat 4 and tie 4 (4 * 6 = 24): 56 / 64
    assert row(table, "s1")["auroc"] == pytest.approx(56 / 64)
    assert row(table, "s2")["auroc"] == pytest.approx(56 / 64)
    # by symmetry every fold's model is a * s1 + c * s2 with a, c > 0 and no intercept:
    # every positive scores above 0, every negative below
    assert row(table, COMBINED)["auroc"] == 1.0


def test_a_perfect_signal_combined_with_noise_scores_one_held_out():
    rng = np.random.default_rng(0)
    runs = [
        (c, positive, {"perfect": float(positive), "noise": rng.standard_normal()})
        for c in "ABCDE"
        for positive in (True, True, True, False, False, False)
    ]
    table = held_out_auroc(at_fraction(runs), ["perfect", "noise"], fractions=(0.1,), n_boot=20)
    assert row(table, COMBINED)["auroc"] == 1.0


def test_nan_values_are_skipped_and_an_all_nan_fraction_gives_nan():
    t = at_fraction(
        [
            ("A", True, {"s": 2.0, "gone": math.nan}),
            ("A", True, {"s": math.nan, "gone": math.nan}),
            ("A", False, {"s": 1.0, "gone": math.nan}),
            ("B", True, {"s": 3.0, "gone": math.nan}),
            ("B", False, {"s": math.nan, "gone": math.nan}),
            ("B", False, {"s": 4.0, "gone": math.nan}),
        ]
    )
    table = held_out_auroc(t, ["s", "gone"], fractions=(0.1, 0.2), n_boot=50)
    # signs: held out A, B gives [3] against [4]: -1 -> A scores -2, -1;
    # held out B, A gives [2] against [1]: +1 -> B scores 3, 4.
    # pooled [-2, 3] against [-1, 4]: 3 beats -1 -> 1 of 4 (a NaN counted 0 would change it)
    r = row(table, "s", at=0.1)
    assert r["auroc"] == pytest.approx(1 / 4)
    assert (r["positives"], r["negatives"]) == (2, 2)
    g = row(table, "gone", at=0.1)
    assert math.isnan(g["auroc"]) and math.isnan(g["low"]) and math.isnan(g["high"])
    assert (g["positives"], g["negatives"], g["configurations"]) == (0, 0, 0)
    # no rows at all at 20%: every signal NaN, no error
    assert row(table, "s", at=0.2)["positives"] == 0
    assert math.isnan(row(table, COMBINED, at=0.2)["auroc"])


def test_a_configuration_with_one_class_is_scored_and_a_one_class_training_side_keeps_plus_one():
    # A has only positives, B only negatives: each fold trains on one class, so the sign is +1
    # and the positive (0) is scored below the negative (1), although in sample -1 would win
    t = at_fraction([("A", True, {"s": 0.0}), ("B", False, {"s": 1.0})])
    table = held_out_auroc(t, ["s"], fractions=(0.1,), n_boot=10)
    assert row(table, "s")["auroc"] == 0.0
    assert row(table, COMBINED)["auroc"] == 0.5  # no model on one class: every score 0


def test_fewer_than_two_configurations_is_an_error_naming_config():
    t = at_fraction([("A", True, {"s": 1.0}), ("A", False, {"s": 0.0})])
    with pytest.raises(ValueError, match="config"):
        held_out_auroc(t, ["s"])
    with pytest.raises(ValueError, match="config"):
        held_out_lead(t, ["s"])


LEAD_RUNS = [
    # positives rise from 0.1; negatives sit at 0 up to 30% and peak later (step 500)
    ("A", 1000.0, [0.1, 0.5, 0.9, 1.5]),
    ("A", None, [0.0, 0.0, 0.0, 0.2, 0.85, 0.3, 0.0, 0.0, 0.0, 0.0]),
    ("A", None, [0.0] * 10),
    ("B", 400.0, [0.1, 1.0, 2.0]),
    ("B", None, [0.0, 0.0, 0.0, 0.2, 0.8, 0.3, 0.0, 0.0, 0.0, 0.0]),
    ("C", 1000.0, [0.1, 0.3, 3.0]),
    ("C", None, [0.0, 0.0, 0.0, 0.2, 0.4, 0.3, 0.0, 0.0, 0.0, 0.0]),
]


def test_the_lead_uses_the_threshold_fixed_by_the_other_configurations_negatives():
    t = curves(LEAD_RUNS)
    # held out A: B's and C's negatives peak at 0.8 and 0.4; 5% of 2 allows none: tau just above
    # 0.8. A's positive first reaches it at step 300 (0.9) of 1000: lead 0.7; A's first negative
    # (0.85) is warned, its second not.
    # held out B: peaks 0.85, 0, 0.4: tau just above 0.85; B's positive reaches 1.0 at 200 of
    # 400: lead 0.5; B's negative (0.8) not warned.
    # held out C: peaks 0.85, 0, 0.8; C's positive reaches 3.0 at 300 of 1000: lead 0.7.
    lead = held_out_lead(t, ["s"])
    assert list(lead.columns) == [
        "signal",
        "lead",
        "warned",
        "false_positive_rate",
        "positives",
        "negatives",
    ]
    r = row(lead, "s")
    assert r["lead"] == pytest.approx(0.7)  # median of 0.7, 0.5, 0.7
    assert r["warned"] == 1.0
    assert r["false_positive_rate"] == pytest.approx(1 / 4)
    assert (r["positives"], r["negatives"]) == (3, 4)
    # the negated signal is oriented back (-1 on the rows up to 30%) and gives the same answer
    flipped = row(held_out_lead(t.assign(s=-t["s"]), ["s"]), "s")
    assert flipped[["lead", "warned", "false_positive_rate"]].tolist() == pytest.approx(
        [0.7, 1.0, 0.25]
    )
    # the combination of one signal is an increasing function of it: the same thresholds
    c = row(lead, COMBINED)
    assert c[["lead", "warned", "false_positive_rate"]].tolist() == pytest.approx([0.7, 1.0, 0.25])


def test_the_threshold_passes_over_the_allowed_share_of_negatives():
    t = curves(LEAD_RUNS)
    # fpr 0.5: of 2 training negatives floor(1) = 1 may be warned, of 3 floor(1.5) = 1: tau just
    # above the second highest peak. Held out A: peaks 0.8, 0.4 -> above 0.4: A's positive warned
    # at 200 (0.5): lead 0.8; A's negatives: 0.85 warned, 0 not. Held out B: peaks 0.85, 0, 0.4
    # -> above 0.4: B's positive at 200 (1.0): 0.5; its negative (0.8) warned. Held out C: peaks
    # 0.85, 0, 0.8 -> above 0.8: C's positive at 300: 0.7; its negative (0.4) not.
    r = row(held_out_lead(t, ["s"], fpr=0.5), "s")
    assert r["lead"] == pytest.approx(0.7)  # median of 0.8, 0.5, 0.7
    assert r["false_positive_rate"] == pytest.approx(2 / 4)


def test_the_lead_orients_each_held_out_configuration_by_the_others():
    runs = [
        ("A", 400.0, [0.0, 0.0, 0.0]),  # A: positives low
        ("A", None, [1.0] * 5),
        ("B", 1000.0, [1.0, 1.0, 5.0]),  # B: positives high
        ("B", None, [0.0, 0.0, 0.0, 0.5, 0.0]),
    ]
    # held out A: sign +1 from B, tau just above B's negative peak 0.5: A's positive (0) never
    # warned, A's negative (1) warned. Held out B: sign -1 from A, tau just above -1 (A's
    # negative): B's positive (-1, -1, -5) never reaches it, B's negative (0) does.
    # (One sign fitted on both configurations' rows would be +1: 31 of 60 row pairs.)
    r = row(held_out_lead(curves(runs), ["s"]), "s")
    assert (r["lead"], r["warned"], r["false_positive_rate"]) == (0.0, 0.0, 1.0)


def test_a_positive_never_warned_leads_by_zero_and_nan_rows_never_warn():
    runs = [
        ("A", 1000.0, [math.nan, math.nan, math.nan]),  # never measured: never warned
        ("A", None, [math.nan] * 10),
        ("B", 1000.0, [0.1, 0.2, 0.9]),
        ("B", None, [0.0, 0.0, 0.0, 0.5]),
        ("C", 1000.0, [0.1, 0.2, 0.9]),
        ("C", None, [0.0, 0.0, 0.0, 0.5]),
    ]
    r = row(held_out_lead(curves(runs), ["s"]), "s")
    # held out B: negatives' peaks -inf (A's, never measured) and 0.5: tau above 0.5: B's
    # positive warned at 300: 0.7; same for C; A's positive 0 -> median 0.7, 2 of 3 warned
    assert r["lead"] == pytest.approx(0.7)
    assert r["warned"] == pytest.approx(2 / 3)
    assert r["false_positive_rate"] == 0.0
    assert (r["positives"], r["negatives"]) == (3, 3)


def test_the_verdict_names_the_closest_signal_and_the_informative_ones():
    aur = pd.DataFrame(
        [
            ("progress", 0.1, 0.90, 0.80, 0.97, 10, 20, 5),
            ("law", 0.1, 0.55, 0.40, 0.70, 10, 20, 5),
            (COMBINED, 0.1, 0.96, 0.90, 1.00, 10, 20, 5),
            ("progress", 0.2, 0.99, 0.95, 1.00, 8, 20, 5),
        ],
        columns=[
            "signal",
            "at",
            "auroc",
            "low",
            "high",
            "positives",
            "negatives",
            "configurations",
        ],
    )
    lead = pd.DataFrame(
        [
            ("progress", 0.40, 0.9, 0.05, 10, 20),
            ("law", 0.0, 0.0, 0.0, 10, 20),
            (COMBINED, 0.20, 0.8, 0.05, 10, 20),
        ],
        columns=["signal", "lead", "warned", "false_positive_rate", "positives", "negatives"],
    )
    lines = verdict_table(aur, lead)
    assert "| progress | 0.90 | [0.80, 0.97] | 10 | 20 | 5 |" in lines
    assert "| law | 0.00 | 0% | 0% | 10 | 20 |" in lines
    assert sum(line.startswith("Held-out AUROC at") for line in lines) == 2
    # shortfalls: progress 0.05 / 0.45 = 0.11; combined 0.1 / 0.3 = 0.33; law > 1
    verdict = lines[-1]
    assert verdict.startswith("Closest to the goal (AUROC >= 0.95 at 10% of the budget")
    assert ": progress, AUROC 0.90 [0.80, 0.97] and a median lead of 0.40" in verdict
    assert "the goal is not met" in verdict
    assert "above 0.5): progress, combined; not (the interval holds 0.5 or is missing): law." in (
        verdict
    )
    assert "Below 0.5" not in verdict
    met = verdict_table(aur, lead.assign(lead=[0.1, 0.0, 0.35]))[-1]
    assert ": combined, AUROC 0.96" in met and "the goal is met" in met
    # an interval below 0.5 excludes 0.5 but is no warning: named apart
    reversed_ = aur.assign(low=[0.8, 0.30, 0.9, 0.95], high=[0.97, 0.45, 1.0, 1.0])
    last = verdict_table(reversed_, lead)[-1]
    assert "not (the interval holds 0.5 or is missing): none." in last
    assert last.endswith(
        "Below 0.5, the direction fitted on the other configurations reversing "
        "on the held-out ones: law."
    )
