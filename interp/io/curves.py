"""The one check of a curve read from a file (a CSV given to ``fit``, a run's ``metrics.csv``,
``per_class_iw.csv``): its steps are finite and strictly increasing, its values are numbers,
finite and within :data:`MAX_CURVE_VALUE`, and a column is not empty throughout. Such a curve is
a damaged file: refused in one line naming the file, the line, the step and the column
(:class:`~interp.io.errors.DamagedFileError`, exit code 3). A fit or a transition of it would
silently drop or reorder points, or report NaN."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from interp.io.errors import DamagedFileError

__all__ = ["MAX_CURVE_VALUE", "check_curve"]

MAX_CURVE_VALUE = 1e6
"""Largest magnitude a curve may hold: losses, accuracies and progress measures are of order one,
so a value beyond it is a damaged or mislabelled column that would only overflow."""


def _step(frame: pd.DataFrame, i: int) -> str:
    value = frame["step"].iloc[i].item()
    return f"{int(value)}" if float(value).is_integer() else f"{value!r}"


def _where(source, frame: pd.DataFrame, i: int) -> str:
    # row i of the frame is line i + 2 of the file (line 1 is the header)
    return f"{source}: line {i + 2} (step {_step(frame, i)})"


def check_curve(
    frame: pd.DataFrame,
    columns: Sequence[str],
    source,
    *,
    gaps: bool = False,
    bound: float | None = MAX_CURVE_VALUE,
) -> None:
    """Refuse a curve whose ``step`` column is not finite and strictly increasing, or whose
    ``columns`` hold text, infinite values, values beyond ``bound`` (None: no bound) or nothing
    but empty values (NaN). Without ``gaps`` one empty value is refused too; with it
    (``metrics.csv``, whose measures are empty where they were not evaluated) only a column empty
    throughout is.
    Columns that are absent are left to the caller's own checks.

    Raises:
        DamagedFileError: one line naming ``source``, the line of the file, the step and the
            column.
    """
    if "step" not in frame.columns or frame.empty:
        return
    if not pd.api.types.is_numeric_dtype(frame["step"]):
        raise DamagedFileError(f"{source}: column 'step' holds values that are not numbers")
    steps = frame["step"].to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(steps))
    if bad.size:
        raise DamagedFileError(
            f"{_where(source, frame, int(bad[0]))}: the step is not a finite number"
        )
    back = np.flatnonzero(np.diff(steps) <= 0)
    if back.size:
        i = int(back[0]) + 1
        what = "repeats" if steps[i] == steps[i - 1] else "comes before"
        raise DamagedFileError(
            f"{_where(source, frame, i)}: the step {what} the previous line's "
            f"({_step(frame, i - 1)}); steps must increase down the file"
        )
    for column in columns:
        if column not in frame.columns or column == "step":
            continue
        if not pd.api.types.is_numeric_dtype(frame[column]):
            raise DamagedFileError(f"{source}: column {column!r} holds values that are not numbers")
        _check_values(frame, column, source, gaps, bound)


def _check_values(frame: pd.DataFrame, column: str, source, gaps: bool, bound) -> None:
    values = frame[column].to_numpy(dtype=float)
    if np.isnan(values).all():
        raise DamagedFileError(
            f"{source}: column {column!r} is empty (NaN) on every one of its {len(values)} "
            "lines: no curve"
        )
    bad = np.isinf(values) if gaps else ~np.isfinite(values)
    if bound is not None:
        bad |= np.abs(np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)) > bound
    where = np.flatnonzero(bad)
    if where.size:
        i = int(where[0])
        v = values[i]
        kind = (
            "NaN (or empty)"
            if np.isnan(v)
            else f"{v:+g}"
            if np.isinf(v)
            else f"{v:g}, beyond +-{bound:g} (losses and accuracies are of order one)"
        )
        raise DamagedFileError(f"{_where(source, frame, i)}: column {column!r} is {kind}")
