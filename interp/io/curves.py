"""Curves read from a CSV (``fit CURVE.csv``): refused, in one line naming the file, the row and the
step, when their steps repeat or go backwards or a value used is NaN or infinite. A fit of such a
curve would silently drop or reorder points."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["check_curve_rows"]


def _step(frame: pd.DataFrame, i: int) -> str:
    value = frame["step"].iloc[i].item()
    return f"{int(value)}" if float(value).is_integer() else f"{value!r}"


def _where(source: str, frame: pd.DataFrame, i: int) -> str:
    # row i of the frame is line i + 2 of the file (line 1 is the header)
    return f"{source}: line {i + 2} (step {_step(frame, i)})"


def check_curve_rows(frame: pd.DataFrame, columns: Sequence[str], source: str) -> None:
    """Refuse a curve whose ``step`` column repeats or decreases, or whose ``columns`` hold NaN or
    infinite values (columns that are absent or not numbers are left to the fit's own checks).

    Raises:
        ValueError: one line naming ``source``, the line of the file, the step and the column.
    """
    if "step" not in frame.columns or not pd.api.types.is_numeric_dtype(frame["step"]):
        return
    steps = frame["step"].to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(steps))
    if bad.size:
        raise ValueError(f"{_where(source, frame, int(bad[0]))}: the step is not a finite number")
    back = np.flatnonzero(np.diff(steps) <= 0)
    if back.size:
        i = int(back[0]) + 1
        what = "repeats" if steps[i] == steps[i - 1] else "comes before"
        raise ValueError(
            f"{_where(source, frame, i)}: the step {what} the previous line's "
            f"({_step(frame, i - 1)}); steps must increase down the file"
        )
    for column in columns:
        if column not in frame.columns or not pd.api.types.is_numeric_dtype(frame[column]):
            continue
        values = frame[column].to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            kind = "NaN (or empty)" if np.isnan(values[i]) else f"{values[i]:+g}"
            raise ValueError(f"{_where(source, frame, i)}: column {column!r} is {kind}")
