"""Early warning: budgets at the law's median step, and each run's signals read at fractions of
its budget, before its transition only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments.catalog.early_warning import (
    BUDGETS,
    CONFIGS,
    MEASURES,
    OBSERVE,
    _QuickLaw,
    budgets,
    signal_table,
)


def test_every_budget_is_the_stored_laws_median_step():
    """So that the law's probability of a jump within the budget is one half everywhere."""
    assert set(BUDGETS) == set(CONFIGS)
    assert budgets() == BUDGETS


def _run(point: str, seed: int, transitioned: bool, step: float, budget: int = 1000):
    return {
        "point": point,
        "seed": seed,
        "K": 256,
        "L": 32,
        "N": 8,
        "B": 1,
        "eps": 0.1,
        "p_C": 0.8,
        "lr": 0.1,
        "batch_size": 128,
        "budget": budget,
        "transitioned": str(transitioned),
        "transition_step": step,
    }


def _curve(point: str, seed: int, budget: int = 1000) -> pd.DataFrame:
    steps = np.arange(0, budget + 1, 50, dtype=float)
    return pd.DataFrame(
        {
            "point": point,
            "seed": seed,
            "step": steps,
            "ic_loss": 3.4 - steps / 1e4,
            "ic_acc": 0.03,
            "tila2": 0.1 + steps / 1e4,
            **{m: 0.5 + (i + 1) * steps / 1e4 for i, m in enumerate(MEASURES)},
        }
    )


def test_signals_are_read_at_fractions_of_the_budget_and_stop_at_the_transition():
    rows = pd.DataFrame(
        [
            _run("centre", 100, True, 320.0),  # jumps at 320: observed at 5% to 30% (300)
            _run("centre", 101, False, math.nan),  # never: observed at every fraction
            _run("centre", 102, True, 1500.0),  # after the budget: a negative
        ]
    )
    curves = pd.concat([_curve("centre", s) for s in (100, 101, 102)], ignore_index=True)
    t = signal_table(rows, curves, law=_QuickLaw())
    first = t[t["seed"] == 100]
    assert list(first["fraction"]) == [f for f in OBSERVE if f * 1000 < 320]
    assert first["positive"].all() and (first["transition_step"] == 320.0).all()
    never = t[t["seed"] == 101]
    assert list(never["fraction"]) == list(OBSERVE) and not never["positive"].any()
    assert (never["transition_step"] == math.inf).all()
    assert not t[t["seed"] == 102]["positive"].any()
    # at 25% (step 250) the last evaluation at or before it is step 250: value 0.5 + k x 0.025
    at = never.set_index("fraction").loc[0.25]
    for i, m in enumerate(MEASURES):
        assert at[m] == pytest.approx(0.5 + (i + 1) * 0.025)
        assert at[f"{m}_change"] == pytest.approx((i + 1) * 0.025)
    # at 15% (step 150) the last three tila2 values (0.105, 0.11, 0.115) average 0.11, against
    # 0.1 at the start: progress 0.1
    assert never.set_index("fraction").loc[0.15, "progress"] == pytest.approx(0.1)


def test_the_page_scores_every_family_on_held_out_configurations():
    """Three configurations, four runs each, half jumping; repetition bias separates them at
    every fraction, the other signals carry nothing (NaN): the page scores it 1.0 held out,
    names every family and says why the LLC is not among them."""
    from experiments.catalog.early_warning import FAMILIES, FRACTIONS, SIGNAL_NAMES, notes

    rows, signals = [], []
    for c in ("A", "B", "C"):
        for seed in range(4):
            jumped = seed % 2 == 0
            rows.append(
                {
                    "config": c,
                    "point": c,
                    "seed": seed,
                    "budget": 1000,
                    "positive": str(jumped),
                    "tier": "full",
                }
            )
            for f in FRACTIONS:
                signals.append(
                    {
                        "config": c,
                        "point": c,
                        "seed": seed,
                        "step": 1000 * f,
                        "fraction": f,
                        "positive": jumped,
                        "transition_step": 900.0 if jumped else math.inf,
                        **dict.fromkeys(SIGNAL_NAMES, math.nan),
                        "repetition_bias": (1.0 if jumped else 0.0) + 0.01 * seed,
                    }
                )
    text = notes(pd.DataFrame(rows), pd.DataFrame(signals))
    assert "6 runs jumped within their budget and 6 did not, over 3 configurations" in text
    assert "| repetition_bias | 1.00 | [1.00, 1.00] | 6 | 6 | 3 |" in text
    assert "best at 10% of the budget `repetition_bias`, AUROC 1.00" in text
    for family in FAMILIES:
        assert family in text
    assert "**heat capacity (after Corlouer and Hennick)**: no value at 10% of the budget" in text
    assert "**local learning coefficient**: not scored" in text
