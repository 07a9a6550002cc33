"""Directions stated before the runs, judged on the rows; the RoPE frequency-pair count of the
positional page. Known answers on hand-made tables (well under a second in all)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.catalog.positional import arm_name, pairs_between
from interp.experiments import get_experiment
from interp.experiments.directions import Direction, directions_table, verdict


def _table() -> pd.DataFrame:
    # two arms, three seeds; arm b's seed 2 has no value at N = 32
    return pd.DataFrame(
        {
            "arm": ["a", "a", "a", "b", "b", "b"],
            "seed": [0, 1, 2, 0, 1, 2],
            "acc": [0.9, 0.4, 0.7, 0.5, 0.6, math.nan],
            "formed": ["True", "False", "True", "True", "True", "False"],
        }
    )


def test_a_paired_direction_counts_the_seeds_where_it_holds():
    d = Direction(claim="a >= b", column="acc", where={"arm": "a"}, than={"arm": "b"}, at_least=1)
    status, evidence = verdict(d, _table())
    # seed 0: 0.9 >= 0.5 yes; seed 1: 0.4 >= 0.6 no; seed 2: b has no value, not counted
    assert status == "held"
    assert evidence == "1 of 2 (seed 0: 0.9 >= 0.5 yes; seed 1: 0.4 >= 0.6 no)"
    two = Direction(claim="", column="acc", where={"arm": "a"}, than={"arm": "b"}, at_least=2)
    assert verdict(two, _table())[0] == "failed"  # 2 seeds to tell, it holds on 1
    three = Direction(claim="", column="acc", where={"arm": "a"}, than={"arm": "b"}, at_least=3)
    assert verdict(three, _table())[0] == "untestable"  # only 2 seeds have both values
    below = Direction(
        claim="", column="acc", where={"arm": "a"}, than={"arm": "b"}, op="<", at_least=1
    )
    assert verdict(below, _table())[1].startswith("1 of 2 (seed 0: 0.9 < 0.5 no; seed 1")


def test_a_yes_no_column_against_a_value():
    d = Direction(claim="b forms", column="formed", where={"arm": "b"}, value=1, at_least=2)
    status, evidence = verdict(d, _table())
    assert status == "held" and evidence.startswith("2 of 3 (seed 0: 1 >= 1 yes;")
    d = Direction(claim="a forms", column="formed", where={"arm": "a"}, value=1, at_least=3)
    assert verdict(d, _table()) == (
        "failed",
        "2 of 3 (seed 0: 1 >= 1 yes; seed 1: 0 >= 1 no; seed 2: 1 >= 1 yes)",
    )
    missing = Direction(claim="", column="formed", where={"arm": "c"}, value=1, at_least=1)
    assert verdict(missing, _table()) == ("untestable", "no data")


def test_a_direction_may_compare_two_columns():
    rows = pd.DataFrame(
        {"arm": ["r", "r"], "scale": ["log_n", "none"], "seed": [0, 0], "x": [0.2, 0.3]}
    )
    rows["x_mixed"] = [0.8, 0.1]
    d = Direction(
        claim="",
        column="x_mixed",
        where={"scale": "log_n"},
        than={"scale": "none"},
        than_column="x",
        at_least=1,
    )
    assert verdict(d, rows) == ("held", "1 of 1 (seed 0: 0.8 >= 0.3 yes)")


def test_a_malformed_direction_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="Direction.op='=>' is invalid"):
        Direction(claim="", column="x", value=1, op="=>")
    with pytest.raises(ValueError, match="exactly one of `than` and `value`"):
        Direction(claim="", column="x")
    with pytest.raises(ValueError, match="Direction.at_least=0 is invalid"):
        Direction(claim="", column="x", value=1, at_least=0)


def test_the_page_lists_each_direction_with_its_verdict():
    d = Direction(
        claim="a forms on 3 of 3", column="formed", where={"arm": "a"}, value=1, at_least=3
    )
    text = directions_table((d,), _table())
    assert text.startswith("## Directions stated before the runs")
    assert "| a forms on 3 of 3 | **failed** | 2 of 3 (seed 0" in text


@pytest.mark.parametrize(
    ("d_head", "base", "n_train", "n_test", "expected"),
    [
        # theta_i = 100^(-i/4): wavelengths 6.3, 19.9, 62.8, 198.7; distances up to 16 and 128
        (8, 100.0, 17, 129, 2),
        # d_head 64, base 10000: wavelength 2 pi 10^(i/8); the first 4 turn fully within 16
        # tokens' distance; up to 32, 64 and 128 the first 6, 9 and 11 do
        (64, 10000.0, 17, 33, 2),
        (64, 10000.0, 17, 65, 5),
        (64, 10000.0, 17, 129, 7),
        (64, 10000.0, 17, 17, 0),
    ],
)
def test_the_frequency_pairs_between_the_lengths_are_counted(
    d_head, base, n_train, n_test, expected
):
    assert pairs_between(d_head, base, n_train, n_test) == expected


def test_an_arm_is_named_by_its_encoding_and_bias():
    assert arm_name("rope", True) == "rope+bias" and arm_name("rope", "True") == "rope+bias"
    assert arm_name("onehot", math.nan) == "onehot" and arm_name("cope", False) == "cope"


@pytest.mark.parametrize("name", ["positional", "log-n-scale"])
def test_the_pages_state_their_directions(name):
    from experiments.catalog import log_n_scale, positional

    module = {"positional": positional, "log-n-scale": log_n_scale}[name]
    assert len(module.DIRECTIONS) >= 5
    e = get_experiment(name)
    rows = pd.DataFrame({"arm": ["x"], "seed": [0], "attn_scale": ["none"]})
    text = e.notes(rows)
    for d in module.DIRECTIONS:
        assert f"| {d.claim} | **untestable** | no data |" in text


def test_an_arm_whose_head_never_formed_is_named_above_the_directions():
    """Two of three log_n seeds never jump: the page names that arm, its seeds and its steps; the
    arm whose every seed jumped is not named."""
    nan = float("nan")
    rows = pd.DataFrame(
        {
            "arm": ["rope+bias"] * 3 + ["onehot"] * 3,
            "attn_scale": ["log_n"] * 3 + ["none"] * 3,
            "seed": [0, 1, 2] * 2,
            "steps": [2000] * 6,
            "ic_acc_transition": [nan, 840.0, nan, 240.0, 260.0, 237.0],
        }
    )
    text = get_experiment("log-n-scale").notes(rows)
    assert (
        "**rope+bias / log_n: no IC jump within 2000 steps on 2 of 3 seeds** (seeds 0, 2)" in text
    )
    assert "onehot / none: no IC jump" not in text
