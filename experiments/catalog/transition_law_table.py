"""The transition-law experiment's CSVs: what each must hold (checked in one line naming the
file, the row and the field) and how the page reads their cells."""

from __future__ import annotations

import math

import pandas as pd

NAME = "transition-law"


def num_text(v, spec: str = "{:.0f}") -> str:
    """``v`` formatted by ``spec``; ``-`` for an empty or non-number cell, ``never`` for inf."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(v) else ("never" if math.isinf(v) else spec.format(v))


def safe_ratio(a: float, b: float) -> float:
    """``a / b``, NaN where ``b`` is 0 (a floor of seeds that all agree)."""
    return a / b if b > 0 else math.nan


def transitioned_mask(rows: pd.DataFrame) -> pd.Series:
    """Rows whose ``transitioned`` cell reads as true (as written by pandas or by hand)."""
    return rows["transitioned"].astype(str).str.lower().isin(["true", "1", "1.0"])


# What each CSV must hold: columns that must be numbers in every row, columns that may be empty.
SCHEMA = {
    f"{NAME}.csv": (
        ("seed", "K", "L", "N", "B", "eps", "p_C", "lr", "batch_size", "budget", "steps"),
        ("point", "role", "transitioned"),
        (),
    ),
    f"{NAME}-curves.csv": (("seed", "step"), ("point",), ()),
    f"{NAME}-loo.csv": (
        ("seed", "observed", "predicted", "low", "high", "abs_log_error"),
        ("model", "point", "covered"),
        (),
    ),
    f"{NAME}-combined.csv": (
        ("seed", "fraction", "seen", "observed", "law", "law_error", "combined"),
        ("point", "law_covered", "combined_covered"),
        ("curve", "curve_error", "combined_error"),
    ),
    f"{NAME}-warning.csv": (
        ("at", "value", "positives", "negatives"),
        ("signal", "measure"),
        ("low", "high"),
    ),
}
"""File -> (numeric columns, filled text columns, numeric columns that may be empty)."""


def check_table(name: str, table: pd.DataFrame) -> None:
    """Refuse a damaged table in one line naming the file, the column and the row (a missing
    column, a cell that is not a number, an empty cell where a value must be, a transitioned
    run without its step)."""
    if table.empty and name != f"{NAME}.csv":
        return  # too little data to score: the page says so
    numeric, filled, optional = SCHEMA[name]
    for col in (*numeric, *filled, *optional):
        if col not in table.columns:
            raise ValueError(f"{name}: column {col!r} is missing")
    for col in (*numeric, *optional):
        values = pd.to_numeric(table[col], errors="coerce")
        bad = values.isna() & (table[col].notna() if col in optional else True)
        if bad.any():
            i = int(bad[bad].index[0])
            cell = table[col][i]
            what = "is empty" if pd.isna(cell) else f"={str(cell)!r} is not a number"
            raise ValueError(f"{name} row {i + 2} field {col} {what}")
    for col in filled:
        if table[col].isna().any():
            i = int(table.index[table[col].isna()][0])
            raise ValueError(f"{name} row {i + 2} field {col} is empty")
    if name == f"{NAME}.csv":
        step = pd.to_numeric(table["transition_step"], errors="coerce")
        bad = transitioned_mask(table) & ~(step > 0)
        if bad.any():
            i = int(bad[bad].index[0])
            raise ValueError(
                f"{name} row {i + 2} field transition_step is missing or not a "
                "positive number for a run that transitioned"
            )
