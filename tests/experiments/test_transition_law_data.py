"""The committed transition-law data: the packaged law is the one fitted on the committed rows,
and the score tables beside the page are what the rows and curves give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp.experiments.core import RESULTS_DIR
from phenomenology.transition_law import FIELDS, LAW, LAW_FILE, StoredLaw, leave_one_out

ROWS = RESULTS_DIR / "transition-law.csv"
pytestmark = pytest.mark.skipif(not ROWS.exists(), reason="no transition-law data committed")


def _rows() -> pd.DataFrame:
    return pd.read_csv(ROWS)


def test_the_packaged_law_is_the_one_beside_the_page():
    beside = RESULTS_DIR / "transition-law-law.json"
    assert LAW_FILE.read_bytes() == beside.read_bytes(), (
        f"cp {beside} {LAW_FILE} (induction-cliff reproduce transition-law --tier full wrote it)"
    )


def test_the_packaged_law_is_the_fit_of_the_committed_rows():
    stored = json.loads(LAW_FILE.read_text())
    fitted = LAW.fit(_rows())
    # the third law's coefficients, to the nonlinear fit's tolerance
    np.testing.assert_allclose(
        stored["law"]["base"]["coef"], fitted.base.coef, rtol=1e-6, atol=1e-8
    )
    assert stored["law"]["base"]["sigma"] == pytest.approx(fitted.base.sigma, rel=1e-6)
    assert stored["transitioned"] == int(_rows()["transitioned"].astype(bool).sum())
    # the whole law, correction included, forecasts every configuration of the data alike
    packaged = StoredLaw.load()
    for _, r in _rows().drop_duplicates("point").iterrows():
        config = {f: float(r[f]) for f in FIELDS}
        a, b = packaged.forecast(config), fitted.predict(config)
        assert (a.step, a.low, a.high) == pytest.approx((b.step, b.low, b.high), rel=1e-5), r[
            "point"
        ]


def test_the_held_out_table_is_what_the_rows_give():
    # digit for digit, on any BLAS kernel and thread count: the correction's fit is one point
    # (phenomenology.law_correction.GaussianProcess.fit); OPENBLAS_CORETYPE=Haswell and SkylakeX,
    # one thread or two, give this table
    committed = pd.read_csv(RESULTS_DIR / "transition-law-loo.csv")
    fresh = leave_one_out(_rows()).round(6)
    pd.testing.assert_frame_equal(committed, fresh.reset_index(drop=True), check_dtype=False)


@pytest.mark.slow
def test_every_score_table_is_what_the_rows_and_curves_give():
    from experiments.catalog.transition_law import COMPANIONS, CURVES, score_tables

    curves = pd.read_csv(RESULTS_DIR / CURVES)
    tables = score_tables(_rows(), curves, log=lambda _: None)
    for name in COMPANIONS:
        if name == CURVES:
            continue
        committed = pd.read_csv(Path(RESULTS_DIR) / name)
        pd.testing.assert_frame_equal(
            committed, tables[name].reset_index(drop=True), check_dtype=False
        )


def _cut_after_observed(text: str, row: int) -> str:
    """The table cut off after the ``observed`` field of its line ``row`` (the header is row 1,
    as the refusal counts)."""
    lines = text.splitlines()
    return "\n".join(lines[: row - 1] + [",".join(lines[row - 1].split(",")[:4])]) + "\n"


def _one_field_too_many(text: str, row: int) -> str:
    """The table with one field more on its line ``row`` (the header is row 1)."""
    lines = text.splitlines()
    lines[row - 1] += ",x"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "damage", "words"),
    [
        (
            "transition-law-loo.csv",
            lambda t: _cut_after_observed(t, 5),
            "transition-law-loo.csv row 5 field predicted is empty",
        ),
        (
            "transition-law.csv",
            lambda t: t.replace("point,role", "pont,role", 1),
            "column 'point' is missing",
        ),
        ("transition-law-combined.csv", lambda t: "", "transition-law-combined.csv is empty, but"),
        (
            "transition-law.csv",
            lambda t: _one_field_too_many(t, 3),
            "transition-law.csv is not a readable CSV table "
            "(C error: Expected 28 fields in line 3, saw 29)",
        ),
    ],
)
def test_a_damaged_table_is_refused_by_name_and_the_page_is_kept(tmp_path, name, damage, words):
    import shutil

    from interp.experiments import get_experiment, render

    for f in RESULTS_DIR.glob("transition-law*"):
        shutil.copy(f, tmp_path / f.name)
    page = (tmp_path / "transition-law.md").read_bytes()
    (tmp_path / name).write_text(damage((tmp_path / name).read_text()))
    with pytest.raises(ValueError, match=re.escape(words)):
        render(get_experiment("transition-law"), tmp_path, figures=False)
    assert (tmp_path / "transition-law.md").read_bytes() == page
