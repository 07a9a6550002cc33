"""Early-warning scores of the dead-unit measure against hand-computed answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.catalog.collapse_warning import (
    auroc,
    best_threshold,
    check_steps,
    warning_lines,
    warning_scores,
)


def test_auroc_counts_pairs_and_ties_half():
    assert auroc([3, 4], [1, 2]) == 1.0
    assert auroc([1, 2], [3, 4]) == 0.0
    # wins 2>1, 5>1, 5>3, 3>1; a loss 2<3; a tie 3=3: (4 + 0.5) / 6
    assert auroc([2, 5, 3], [1, 3]) == pytest.approx(4.5 / 6)
    assert math.isnan(auroc([], [1]))


def test_the_threshold_separates_the_fitting_seeds_and_prefers_the_higher_on_a_tie():
    # dead runs read 0.01 and 0.02, the others 0.30 and 0.40: any t in (0.02, 0.30] separates;
    # the midpoint 0.16 is the candidate there
    assert best_threshold([0.01, 0.30, 0.02, 0.40], [True, False, True, False]) == 0.16
    assert math.isnan(best_threshold([0.1, 0.2], [False, False]))


def _table():
    """Six runs at lr 0.03: seeds 0-2 fit the rule (below the split, 6), seeds 6-8 test it."""
    fates = {0: "dead", 1: "transitioned", 2: "dead", 6: "dead", 7: "alive", 8: "transitioned"}
    active = {0: 0.01, 1: 0.40, 2: 0.03, 6: 0.015, 7: 0.05, 8: 0.5}
    fate_step = {0: 8000, 1: 10000, 2: 9000, 6: 8500, 7: math.nan, 8: 600}
    rows = pd.DataFrame(
        [
            {"hidden_bias": "scalar", "lr": 0.03, "seed": s, "fate": f, "fate_step": fate_step[s]}
            for s, f in fates.items()
        ]
    )
    curves = pd.DataFrame(
        [
            {"hidden_bias": "scalar", "lr": 0.03, "seed": s, "step": step, "active_last": a}
            | {"ic_acc": 0.03}
            for s, a in active.items()
            for step in (0, 250, 500, 1000)
        ]
    )
    return rows, curves


def test_scores_at_a_check_step_against_a_hand_worked_table():
    rows, curves = _table()
    s = warning_scores(rows, curves).set_index("check_step")
    assert list(s.index) == check_steps(0.03) == [250, 500, 1000, 2000, 4000]
    # at step 500 all six are open; dead 0.01, 0.03, 0.015 against others 0.40, 0.05, 0.5
    at = s.loc[500]
    assert (at["dead"], at["other"], at["auroc"]) == (3, 3, 1.0)
    # fitted on seeds 0-2: dead 0.01, 0.03 against 0.40 -> t = (0.03 + 0.40) / 2 = 0.215
    assert at["threshold"] == pytest.approx(0.215)
    # tested on 6-8: dead 0.015 warned (lead 8500 - 500), alive 0.05 warned (a false alarm)
    assert (at["hits"], at["test_dead"], at["false_alarms"], at["test_other"]) == (1, 1, 1, 2)
    assert at["lead"] == 8000
    # at step 1000 seed 8 has transitioned (its fate step 600): no longer open
    assert (s.loc[1000, "dead"], s.loc[1000, "other"]) == (3, 2)
    # no run reached step 2000: nothing open there
    assert s.loc[2000, "dead"] == 0 and math.isnan(s.loc[2000, "auroc"])


def test_the_page_section_shows_each_check_and_says_when_nothing_is_recorded():
    rows, curves = _table()
    text = "\n".join(warning_lines(rows, curves))
    assert "| 0.03 | 500 | 3 / 3 | 1.00 | 0.215 | 1 of 1 | 1 of 2 | 8000 |" in text
    assert "From the 6 runs whose curves are recorded" in text
    assert "| 0.03 | 2000 |" not in text  # nothing open there
    assert "No held-out test" not in text  # seed 6 died and was held out
    empty = warning_lines(rows, curves.iloc[0:0])
    assert "No run here has its curve recorded: nothing is scored." in empty
    # without seed 6's death nothing held out died: said, with the deaths the AUROC rests on
    rows.loc[rows["seed"] == 6, "fate"] = "alive"
    text = "\n".join(warning_lines(rows, curves))
    assert (
        "**No held-out test.** No held-out seed died, so the warning has not been scored on a "
        "death it was not fitted on; its AUROC rests on the deaths with a recorded curve "
        "(scalar seed 0 at lr 0.03, scalar seed 2 at lr 0.03)" in text
    )


def test_the_table_script_refuses_a_damaged_run_and_writes_nothing(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "collapse_rate.py"
    spec = importlib.util.spec_from_file_location("collapse_rate_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "metrics.csv").write_text("")
    out = tmp_path / "collapse-rate.csv"
    assert script.main([str(run), "--commit", "abc", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged run file" in err and str(run) in err
    assert not out.exists() and not (tmp_path / "collapse-rate-curves.csv").exists()
