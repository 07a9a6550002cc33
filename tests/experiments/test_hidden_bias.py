"""The hidden-bias page, rendered from a synthetic CSV of known transition steps."""

import pandas as pd

from experiments.catalog.hidden_bias import COLUMNS, paired
from interp.experiments import get_experiment, read_rows


def _csv(tmp_path):
    rows = []
    for lr, seed, scalar, per_unit in [
        (0.03, 0, 10000, 10500),
        (0.03, 1, 10100, 10600),
        (0.03, 2, 10200, 10700),
        (0.01, 0, 30000, None),
    ]:
        for form, step in (("scalar", scalar), ("per_unit", per_unit)):
            rows.append(
                {
                    "hidden_bias": form,
                    "lr": lr,
                    "seed": seed,
                    "steps": 40000,
                    "eval_every": 250,
                    "transition_ic_acc": step,
                    "transition_ic_loss": step,
                    "transitioned": step is not None,
                    "final_ic_acc": 0.99 if step else 0.2,
                    "wall_s": 60.0,
                    "commit": "abc1234",
                    "command": f"induction-cliff sweep --set lr={lr}",
                }
            )
    path = tmp_path / "hidden-bias.csv"
    pd.DataFrame(rows, columns=list(COLUMNS)).to_csv(path, index=False)
    return path


def test_the_page_shows_both_forms_side_by_side_with_the_spread_and_the_pairs(tmp_path):
    e = get_experiment("hidden-bias")
    rows = read_rows(_csv(tmp_path), e.meta)
    page = e.page(e, rows)
    assert "| 0.03 | scalar | 3 of 3 | 10100 ± 100 (3 seeds, 10000-10200) | 0.990-0.990 |" in page
    assert "| 0.03 | per_unit | 3 of 3 | 10600 ± 100 (3 seeds, 10500-10700) |" in page
    assert "| 0.01 | per_unit | 0 of 1 | none |" in page
    # a form or a seed without a run has no row ("per_unit 0 of 0", "| 0.01 | 1 | - | - |")
    assert " 0 of 0 " not in page and "| 0.01 | 1 |" not in page
    assert "| 0.03 | 1 | 10100 | 10600 | +500 | 1.050 |" in page
    assert "| 0.01 | 0 | 30000 | no jump | - | - |" in page
    assert "- lr 0.03: 500 ± 0 steps (3 seeds, 500-500)" in page
    assert "- lr 0.01: none" in page
    assert "**Wall time:** 8.0 min in all." in page and "`abc1234`" in page
    for placeholder in ("TODO", "TBD", "nan", "None"):
        assert placeholder not in page
    assert page == e.page(e, read_rows(tmp_path / "hidden-bias.csv", e.meta))  # deterministic


def test_pairs_are_per_unit_minus_scalar_per_seed(tmp_path):
    p = paired(read_rows(_csv(tmp_path), ("commit",)))
    got = p.set_index(["lr", "seed"])["difference"]
    assert got[(0.03, 0)] == 500 and pd.isna(got[(0.01, 0)])
