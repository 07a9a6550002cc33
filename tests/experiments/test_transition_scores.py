"""Scoring the forecasts before and during training, end to end on synthetic runs whose curves
are drawn with a known cliff: the steps follow the first law's form (:data:`DRIVE_LAW`), which is
the law scored here, the curves carry a rising progress measure, and the negatives sit at L = n
(no drive) with flat curves."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments.transition_scores import (
    FRACTIONS,
    combined_gaps,
    combined_scores,
    early_warning,
    summarize_combined,
    warning_signals,
)
from phenomenology.transition_law import DRIVE_LAW, drive

CENTRE = {"K": 256, "L": 32, "N": 8, "B": 1, "eps": 0.1, "p_C": 0.8, "lr": 0.1, "batch_size": 128}
CHANGES = [
    {},
    {"lr": 0.2},
    {"lr": 0.05},
    {"N": 4},
    {"N": 16},
    {"B": 2},
    {"K": 1024},
    {"K": 128},
    {"eps": 0.2},
    {"eps": 0.05},
    {"p_C": 0.5},
    {"L": 16},
]
BUDGET = 20_000


def true_log_t(c) -> float:
    return (
        1.5
        - math.log(c["lr"])
        + 0.5 * math.log(c["N"])
        + 0.1 * math.log(c["K"])
        + 0.2 * math.log(c["eps"])
        - 0.4 * math.log(c["p_C"])
        - 1.2 * math.log(drive(c["L"], c["N"], c["B"]))
    )


def curve(t: float | None, budget: float, rng) -> pd.DataFrame:
    """IC loss drifting down a plateau to a cliff at ``t`` (none: flat to the budget), IC
    accuracy rising there, and a progress measure whose excess grows exponentially, reaching 0.5
    at 0.83 t."""
    end = budget if t is None else min(budget, 1.25 * t)
    step = np.arange(0.0, end + 1, (t or budget) / 40)
    if t is None:
        loss = 3.3 - 0.05 * step / budget + 0.005 * rng.standard_normal(len(step))
        tila = 0.06 * np.ones(len(step))
    else:
        loss = np.where(step < t, 3.3 - 0.4 * step / t, 0.15) + 0.005 * rng.standard_normal(
            len(step)
        )
        tila = 0.06 * (1 + 0.5 * np.exp((step - 0.83 * t) / (0.12 * t)))
    acc = 0.05 + (0 if t is None else 0.9 / (1 + np.exp(-(step - (t or 1)) / (0.03 * (t or 1)))))
    return pd.DataFrame({"step": step, "ic_loss": loss, "ic_acc": acc, "tila2": tila})


@pytest.fixture(scope="module")
def grid():
    rng = np.random.default_rng(0)
    rows, curves = [], []
    configs = [(f"p{i}", {**CENTRE, **ch}) for i, ch in enumerate(CHANGES)]
    configs.append(("L8", {**CENTRE, "L": 8}))  # n = L: no transition
    for point, c in configs:
        for s in range(2):
            stuck = drive(c["L"], c["N"], c["B"]) <= 0
            t = None if stuck else math.exp(true_log_t(c) + 0.08 * rng.standard_normal())
            cv = curve(t, BUDGET, rng)
            rows.append(
                {
                    "point": point,
                    "seed": s,
                    **c,
                    "budget": BUDGET,
                    "transitioned": t is not None,
                    "transition_step": t if t is not None else math.nan,
                }
            )
            curves.append(cv.assign(point=point, seed=s))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def test_the_combination_is_scored_at_each_fraction_of_the_plateau(grid):
    rows, curves = grid
    scores = combined_scores(rows, curves, law=DRIVE_LAW)
    assert sorted(scores["fraction"].unique()) == list(FRACTIONS)
    assert set(scores["point"]) == set(rows.loc[rows["transitioned"], "point"])
    s = summarize_combined(scores).set_index("fraction")
    # the law is the truth and the seeds scatter by 0.08: its held-out error is near that
    assert 0.02 < s.loc[0.1, "law"] < 0.15
    # late on the plateau the curve knows the step better than the prior, and the
    # combination follows it
    assert s.loc[0.8, "combined"] < s.loc[0.8, "law"]
    for f in FRACTIONS:  # never the prior's error doubled, at any fraction
        assert s.loc[f, "combined"] < 2 * s.loc[f, "law"] + 0.02


def test_early_warning_separates_runs_without_drive(grid):
    rows, curves = grid
    signals = warning_signals(rows, curves, law=DRIVE_LAW)
    assert (signals["step"] < signals["transition_step"]).all()  # nothing seen after the cliff
    table = early_warning(signals, n_boot=100)
    au = table[table["measure"] == "auroc"].set_index(["signal", "at"])
    # the law knows L = n has no transition: every positive scores above every negative
    assert au.loc[("law", 0.05), "value"] == 1.0
    assert au.loc[("law", 0.05), "negatives"] == 2
    lead = table[(table["measure"] == "lead") & (table["signal"] == "law")].iloc[0]
    assert lead["value"] > 0.5  # warned from the first observations, long before the cliff
    warned = table[(table["measure"] == "warned") & (table["signal"] == "law")].iloc[0]
    assert warned["value"] == 1.0


def test_the_gap_to_a_part_is_bootstrapped_over_whole_configurations():
    def runs(point, law, combined, curve=math.nan, n=5):
        return [
            {
                "point": point,
                "seed": i,
                "fraction": 0.5,
                "law_error": law,
                "combined_error": combined,
                "curve_error": curve,
            }
            for i in range(n)
        ]

    # better by 0.05 on every run: the gap is exact, whatever is resampled
    shifted = pd.DataFrame(runs("a", 0.10, 0.05, curve=0.30) + runs("b", 0.20, 0.15, curve=0.30))
    g = combined_gaps(shifted, n_boot=200).set_index("part")
    assert g.loc["law", ["gap", "low", "high"]].tolist() == pytest.approx([-0.05] * 3)
    assert g.loc["curve", "gap"] == pytest.approx(-0.20)  # medians 0.10 against 0.30
    # one configuration 0.1 better, the other 0.1 worse: the medians tie, but a resample of
    # either one alone (a quarter of them each) is 0.1 better or worse, so the interval is
    # [-0.1, +0.1]; no curve forecasts, no curve row
    split = pd.DataFrame(runs("a", 0.10, 0.00) + runs("b", 0.10, 0.20))
    g = combined_gaps(split, n_boot=1000)
    assert g["part"].tolist() == ["law"]
    assert g.iloc[0][["gap", "low", "high"]].tolist() == pytest.approx([0.0, -0.1, 0.1])
