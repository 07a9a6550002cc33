"""The cope-tasks experiment: its directions' verdicts on hand-made rows (known answers), its page
rendered from its CSV, a measurement taken under other settings refused, which CoPE the toolkit
offers said where a user reads, and (about 30 s of one core) its quick tier end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from experiments.catalog.cope_tasks import GRIDS
from experiments.catalog.cope_tasks_page import DIRECTIONS, below, grows, sporadic
from interp.experiments import check_rows, get_experiment, page_text, read_rows, reproduce
from interp.experiments.token_grid import collect, run_name

ROOT = Path(__file__).resolve().parents[2]


def _rows(values: dict[tuple[str, str, str], tuple[float, ...]], column: str = "error_pct"):
    """Rows of (arm, encoding, set) -> one value per seed 0, 1, ..."""
    out = []
    for (arm, enc, set_), vals in values.items():
        for seed, v in enumerate(vals):
            out.append({"arm": arm, "positional": enc, "set": set_, "seed": seed, column: v})
    return pd.DataFrame(out)


def test_below_holds_fails_or_is_untested_seed_by_seed():
    verdict = below("counting-3", "cope", "learned", "id")
    rows = _rows(
        {("counting-3", "cope", "id"): (1.0, 2.0), ("counting-3", "learned", "id"): (50, 3)}
    )
    assert verdict(rows) == (True, "seed 0: 1 vs 50, seed 1: 2 vs 3")
    rows = _rows(
        {("counting-3", "cope", "id"): (1.0, 4.0), ("counting-3", "learned", "id"): (50, 3)}
    )
    assert verdict(rows)[0] is False  # one seed the other way
    rows = _rows(
        {("counting-3", "cope", "id"): (1.0, 3.0), ("counting-3", "learned", "id"): (50, 3)}
    )
    assert verdict(rows)[0] is False  # a tie is not below
    one = _rows({("counting-3", "cope", "id"): (1.0,), ("counting-3", "learned", "id"): (50,)})
    assert verdict(one)[0] is None and "one seed" in verdict(one)[1]
    assert verdict(_rows({("counting-3", "cope", "id"): (1.0, 2.0)})) == (None, "no runs of both")


def test_grows_and_the_sporadic_tail():
    up = grows("counting-1", "counting-5", "learned")
    rows = _rows(
        {("counting-1", "learned", "id"): (5.0, 6.0), ("counting-5", "learned", "id"): (70, 6.5)}
    )
    assert up(rows)[0] is True
    rows.loc[3, "error_pct"] = 6.0
    assert up(rows)[0] is False
    tail = sporadic("flipflop", ("cope", "rope"))
    rows = _rows(
        {("flipflop", "cope", "id"): (0.0, 2.5), ("flipflop", "rope", "id"): (150, 0)}, "per_10k"
    )
    assert tail(rows) == (True, "cope seed 1: 2.5")
    rows.loc[1, "per_10k"] = 0.0
    assert tail(rows) == (False, "no run in (0, 100) per 10^4")
    assert tail(rows.iloc[:3]) == (None, "rope: fewer than 2 seeds")


def test_every_direction_reads_only_columns_of_the_csv():
    e = get_experiment("cope-tasks")
    csv = ROOT / "docs" / "results" / "cope-tasks.csv"
    rows = read_rows(csv, e.meta)
    page = (ROOT / "docs" / "results" / "cope-tasks.md").read_text()
    for d in DIRECTIONS:
        held, evidence = d.verdict(rows)
        word = {True: "**held**", False: "**failed**", None: "untested"}[held]
        assert f"- {word}: {d.text} ({evidence})" in page
    assert page == page_text(e, csv.parent)


def test_a_run_measured_under_other_settings_is_refused_naming_its_file(tmp_path):
    grid = GRIDS["quick"]
    arm = grid.arms[0]
    done = tmp_path / f"{run_name(arm, 'cope', 0)}.done.json"
    done.write_text(json.dumps({"measurement": {"n_final": 1}, "counts": {}}))
    with pytest.raises(ValueError, match=r"cope-seed0\.done\.json was measured with"):
        collect(grid, tmp_path)


def test_which_cope_is_said_in_the_help_and_the_science_notes():
    out = subprocess.run(
        [sys.executable, "-m", "interp.cli", "train", "--help"], capture_output=True, text=True
    )
    text = " ".join(out.stdout.split())
    assert "cope (contextual position encoding, Golovneva et al. 2024" in text
    assert "a different 2026 method also called CoPE, clipped RoPE, is not this one" in text
    science = " ".join((ROOT / "docs" / "science.md").read_text().split())
    assert "contextual position encoding (Golovneva et al. 2024, arXiv 2405.18719)" in science
    assert "A different 2026 method also called CoPE (clipped RoPE) is not this one" in science


def test_the_quick_tier_trains_measures_and_renders(tmp_path):
    e = get_experiment("cope-tasks")
    kw = dict(tier="quick", out=tmp_path / "out", runs=tmp_path / "runs", figures=False)
    rows, written = reproduce(e, log=lambda _: None, **kw)
    results = check_rows(e, rows)
    assert results and all(ok for ok, _ in results), [line for ok, line in results if not ok]
    # 4 arms x 3 encodings x their sets (flip-flop and counting 3, selective copy 2), seed 0
    assert len(rows) == 3 * (3 + 2 + 3 + 3) and set(rows["seed"]) == {0}
    flip = rows[rows["arm"] == "flipflop"]
    assert (flip["answers"] >= GRIDS["quick"].min_answers).all()  # grown to the tail's size
    assert (rows["errors"] <= rows["answers"]).all()
    page = (tmp_path / "out" / "cope-tasks.md").read_text()
    assert page == page_text(e, tmp_path / "out")
    again, _ = reproduce(e, log=lambda _: None, **kw)  # nothing trains: the same numbers
    cols = [c for c in rows.columns if c not in e.meta]
    pd.testing.assert_frame_equal(rows[cols], again[cols])
