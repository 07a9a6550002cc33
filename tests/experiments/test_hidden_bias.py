"""The hidden-bias page: derived from collapse-rate rows of known fates and transition steps."""

import math

import pandas as pd

from experiments.catalog.hidden_bias import COLUMNS, from_collapse_rows, paired
from interp.experiments import get_experiment, read_rows


def _collapse_rows():
    rows = []
    for lr, seed, steps in [
        (0.03, 0, {"scalar": 10000, "per_unit": 10500, "tied": "dead"}),
        (0.03, 1, {"scalar": 10100, "per_unit": 10600, "tied": 10300}),
        (0.03, 2, {"scalar": 10200, "per_unit": 10700, "tied": "alive"}),
        (0.01, 0, {"scalar": "dead", "per_unit": "unfinished"}),
    ]:
        for form, step in steps.items():
            jumped = not isinstance(step, str)
            rows.append(
                {
                    "hidden_bias": form,
                    "lr": lr,
                    "seed": seed,
                    "steps": 15000,
                    "fate": "transitioned" if jumped else step,
                    "fate_step": step if jumped else (8000 if step == "dead" else math.nan),
                    "final_ic_acc": 0.99 if jumped else 0.02,
                    "commit": "abc1234",
                    "command": f"induction-cliff train --set lr={lr}",
                }
            )
    return pd.DataFrame(rows)


def _csv(tmp_path):
    path = tmp_path / "hidden-bias.csv"
    from_collapse_rows(_collapse_rows()).to_csv(path, index=False)
    return path


def test_the_rows_are_the_runs_with_a_fate_and_their_transition_steps():
    rows = from_collapse_rows(_collapse_rows())
    assert list(rows.columns) == list(COLUMNS)
    assert len(rows) == 10  # of 11 runs: the unfinished one has no fate
    dead = rows[(rows["lr"] == 0.03) & (rows["hidden_bias"] == "tied") & (rows["seed"] == 0)]
    assert dead["transitioned"].tolist() == [False] and dead["transition_ic_acc"].isna().all()


def test_the_page_shows_the_forms_side_by_side_and_pairs_only_complete_seeds(tmp_path):
    e = get_experiment("hidden-bias")
    rows = read_rows(_csv(tmp_path), e.meta)
    page = e.page(e, rows)
    assert "| 0.03 | scalar | 3 of 3 | 0 | 0 | 10100 ± 100 (3 seeds, 10000-10200) |" in page
    assert "| 0.03 | tied | 1 of 3 | 1 | 1 | 10300 (1 seed) | 0.020-0.990 |" in page
    assert "| 0.01 | scalar | 0 of 1 | 1 | 0 | none |" in page
    assert "| 0.03 | 0 | 10000 | 10500 | dead | +500 | - |" in page
    assert "| 0.03 | 1 | 10100 | 10600 | 10300 | +500 | +200 |" in page
    assert "| 0.03 | 2 | 10200 | 10700 | alive | +500 | - |" in page
    # lr 0.01 seed 0 has no per-unit run with a fate: no pair row, and no empty row anywhere
    assert "| 0.01 | 0 |" not in page and "no run" not in page and " 0 of 0 " not in page
    assert "- lr 0.03, per-unit - scalar: 500 ± 0 steps (3 seeds, 500-500)" in page
    assert "- lr 0.01, per-unit - scalar: none" in page
    for placeholder in ("TODO", "TBD", "nan", "None"):
        assert placeholder not in page
    assert page == e.page(e, read_rows(tmp_path / "hidden-bias.csv", e.meta))  # deterministic


def test_pairs_are_differences_to_the_scalar_form_per_seed(tmp_path):
    p = paired(read_rows(_csv(tmp_path), ("commit",))).set_index(["lr", "seed"])
    assert p.loc[(0.03, 0), "difference"] == 500 and p.loc[(0.03, 1), "tied_difference"] == 200
    assert pd.isna(p.loc[(0.03, 0), "tied_difference"])
