"""Reading ``metrics.csv`` and ``per_class_iw.csv``: the valid rows, and what was wrong with the
rest (a torn last row, a row with the wrong number of fields, steps out of order), said in one
line naming the file and the line."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.io.curves import check_curve
from interp.io.errors import DamagedFileError, RunDirectoryError, UnsafePathError
from interp.io.inputs import parse_csv, read_csv_text

__all__ = ["MetricsFile", "read_metrics", "read_per_class_iw", "PER_CLASS_IW_NAME"]

log = logging.getLogger("interp.io.rundir")

PER_CLASS_IW_NAME = "per_class_iw.csv"


@dataclass
class MetricsFile:
    """``metrics.csv`` as read: its valid rows, and what was wrong with the rest (None if nothing).

    Attributes:
        frame: the rows before the first damaged or out-of-order one.
        problem: one line saying what was dropped, or None.
    """

    frame: pd.DataFrame
    problem: str | None = None


def read_metrics(path: str | os.PathLike) -> MetricsFile:
    """Read ``metrics.csv``, detecting a torn last row, rows with a wrong number of fields and
    steps out of order. The valid prefix is kept; what was dropped is said in ``problem``."""
    path = Path(path)
    try:
        text = read_csv_text(path, follow_links=False, missing=None)  # limits checked first
    except UnsafePathError:
        raise UnsafePathError(
            f"{path} is a symbolic link; refusing to read a run's metrics through it "
            "(replace the link by the file)"
        ) from None
    if text is None:
        return MetricsFile(pd.DataFrame())
    if not text.strip():
        # The toolkit writes metrics.csv whole (header first) and atomically: an empty one was
        # damaged after it was written.
        raise DamagedFileError(f"{path} is empty: a damaged run file (it always has a header)")
    lines = text.split("\n")
    complete = text.endswith("\n")
    if complete:
        lines = lines[:-1]
    header = lines[0].split(",")
    if "step" not in header:
        raise RunDirectoryError(f"{path}: the column 'step' is missing; not a metrics file")
    if len(lines) == 1 and not complete:
        return MetricsFile(pd.DataFrame(), f"{path}: the header line is cut; no rows")
    keep, problem = _whole_rows(lines, len(header), complete, path)
    frame = parse_csv("\n".join(keep) + "\n", path)
    if len(frame):
        frame, problem = _ordered_prefix(frame, path, problem)
        frame["step"] = frame["step"].astype(int)
        _refuse_text(frame, path)
    # Every column is a number from here on, also when no row was kept (a column of text rows
    # all dropped would stay text, and fail later in whatever reads it).
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return MetricsFile(frame, problem)


def _whole_rows(
    lines: list[str], n_fields: int, complete: bool, path: Path
) -> tuple[list[str], str | None]:
    """The header and the rows before the first cut or malformed one, and what was dropped."""
    for number, line in enumerate(lines[1:], start=2):
        if number == len(lines) and not complete:
            problem = f"{path}: line {number} (the last) is cut off mid-row; dropped"
            return lines[: number - 1], problem
        if line.count(",") != n_fields - 1:
            return lines[: number - 1], (
                f"{path}: line {number} has {line.count(',') + 1} fields, not {n_fields}; "
                f"it and the {len(lines) - number} lines after it dropped"
            )
    return lines, None


def _ordered_prefix(
    frame: pd.DataFrame, path: Path, problem: str | None
) -> tuple[pd.DataFrame, str | None]:
    """The rows before the first whose step is not a number after the previous one's."""
    steps = pd.to_numeric(frame["step"], errors="coerce")
    bad = steps.isna() | (steps.diff() <= 0)
    if not bad.any():
        return frame, problem
    first = int(bad.to_numpy().argmax())
    problem = (
        f"{path}: row {first + 1} has step {_plain(frame['step'].iloc[first])!r}, not after the "
        f"previous one; it and {len(frame) - first - 1} rows after it dropped"
    )
    return frame.iloc[:first].reset_index(drop=True), problem


def _plain(value):
    """A cell as Python writes it (``nan``, ``3``, ``'x'``), not as numpy's repr does."""
    return value.item() if hasattr(value, "item") else value


def _refuse_text(frame: pd.DataFrame, path: Path) -> None:
    """Every value of metrics.csv is a number (or empty): text is damage, named by line."""
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]):
            continue
        values = frame[column]
        text = values.notna() & pd.to_numeric(values, errors="coerce").isna()
        if text.any():
            row = int(text.to_numpy().argmax())
            raise DamagedFileError(
                f"{path}: line {row + 2}, column {column!r} holds {values.iloc[row]!r}, not a "
                "number: a damaged run file"
            )


def read_per_class_iw(run_dir: str | os.PathLike, n_classes: int | None = None) -> pd.DataFrame:
    """Read a run's ``per_class_iw.csv``: one row per evaluation, ``step`` then ``c0, c1, ...``
    (the IW accuracy of each class, :attr:`TrainConfig.per_class_iw` sequences each).

    Damaged rows are dropped as :func:`read_metrics` drops them (a warning says what).

    Args:
        run_dir: the run directory.
        n_classes: the number of class columns expected (the task's ``K``); None: any.

    Returns:
        The valid rows, ``step`` as int, class columns in class order.

    Raises:
        RunDirectoryError: the file is missing (the run was trained with ``per_class_iw=0``), or
            its columns are not ``step, c0, .., c{K-1}``.
    """
    path = Path(run_dir) / PER_CLASS_IW_NAME
    if not path.is_file():
        raise RunDirectoryError(
            f"{path} is missing: the run was trained without the per-class IW evaluation (train "
            "it with --set per_class_iw=8)"
        )
    read = read_metrics(path)
    if read.problem:
        log.warning("warning: %s", read.problem)
    _check_class_columns(read.frame, n_classes, path)
    # every class is evaluated at every row: an empty (NaN) or infinite accuracy is damage
    check_curve(read.frame, list(read.frame.columns), path, bound=None)
    return read.frame


def _check_class_columns(frame: pd.DataFrame, n_classes: int | None, path: Path) -> None:
    columns = [c for c in frame.columns if c != "step"]
    expected = [f"c{k}" for k in range(len(columns) if n_classes is None else n_classes)]
    if columns != expected:
        first = next((c for c, e in zip(columns, expected) if c != e), None)
        raise RunDirectoryError(
            f"{path}: the class columns must be {', '.join(expected[:3])}, ... up to "
            f"c{len(expected) - 1} ({len(expected)} classes); found {len(columns)} columns"
            + (f", {first!r} out of place" if first is not None else "")
        )
