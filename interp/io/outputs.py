"""Outputs beside a run (``fit.json``, ``llc.csv``, ``checkpoint_measures.csv``,
``length_eval.csv``, ``quanta.json``, ``report.html``, figures): written under the run's lock, never
through a link, never as an empty or all-NaN file.

A command that writes into runs holds them with :func:`writing` from before it reads anything it
will rewrite until its last write: a second writer (another analysis command, or ``train``) is
refused with the holder's pid (:class:`~interp.io.errors.RunLockedError`), and a link, a
read-only disk or a missing write permission is refused before the computation starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pandas as pd

from interp.io.atomic import (
    check_can_write,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from interp.io.errors import DamagedFileError, RunDirectoryError
from interp.io.lock import holding
from interp.io.paths import check_no_links, check_output_path, enclosing_roots

__all__ = [
    "output_path",
    "write_output",
    "writing",
    "writing_into",
    "check_not_empty",
    "read_json_object",
]


def output_path(run_dir: str | os.PathLike, name: str) -> Path:
    """The path of an output file beside a run (``name`` must be a plain file name)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise RunDirectoryError(f"output name {name!r} is invalid: a plain file name is needed")
    return Path(run_dir) / name


@contextmanager
def writing(run_dirs: str | os.PathLike | Sequence[str | os.PathLike]) -> Iterator[None]:
    """Hold the lock of every run in ``run_dirs`` for the block, after checking that none holds a
    symbolic link among its files and that each can be written (all before any work).

    Raises:
        RunLockedError: another process writes one of them (its pid named).
        UnsafePathError: a link inside one of them.
        WriteError: one cannot be written (read-only, permission).
    """
    from interp.io.layout import check_run_tree

    if isinstance(run_dirs, (str, os.PathLike)):
        run_dirs = [run_dirs]
    with ExitStack() as stack:
        for run_dir in run_dirs:
            check_run_tree(run_dir)
            stack.enter_context(holding(run_dir))
            check_can_write(run_dir, root=run_dir)
        yield


@contextmanager
def writing_into(
    destinations: Sequence[str | os.PathLike], *, folders: bool = False
) -> Iterator[None]:
    """For outputs the user placed (``--out``, ``--json``, ``--figure``): refuse every destination
    that is a symbolic link (dangling or not) or lies behind one inside a run or sweep directory
    (:func:`~interp.io.paths.check_output_path`); where a destination lies inside a run or sweep
    directory, hold the lock of the innermost one for the block; check that each can be written;
    all before any work.

    Args:
        destinations: files (or, with ``folders``, folders) that the block will write.

    Raises:
        RunLockedError, UnsafePathError, WriteError: as :func:`writing`.
    """
    destinations = [check_output_path(dest) for dest in destinations]  # links: before any lock
    with ExitStack() as stack:
        for dest in destinations:
            roots = enclosing_roots(dest)
            if roots:
                stack.enter_context(holding(roots[-1]))
            check_can_write(dest if folders else dest.parent)
        yield


def check_not_empty(path: Path, data) -> None:
    """Refuse to replace ``path`` with nothing: an empty table or one whose every number is NaN.

    Raises:
        RunDirectoryError: naming the file.
    """
    if isinstance(data, pd.DataFrame):
        if data.empty:
            raise RunDirectoryError(
                f"{path}: nothing was computed (no rows); the file is left as it was"
            )
        numbers = data.select_dtypes("number").to_numpy(dtype=float).ravel()
        if numbers.size and not any(math.isfinite(v) for v in numbers):
            raise RunDirectoryError(
                f"{path}: every value computed is NaN or infinite; the file is left as it was"
            )
    elif isinstance(data, (dict, list)) and not data:
        raise RunDirectoryError(f"{path}: nothing was computed; the file is left as it was")


def write_output(
    run_dir: str | os.PathLike, name: str, data: str | bytes | dict | list | pd.DataFrame
) -> Path:
    """Write an output beside a run: under its lock (taken for the write unless this process holds
    it), atomically, never through a symbolic link, never empty.

    Args:
        run_dir: the run directory.
        name: a plain file name (``fit.json``, ``checkpoint_measures.csv``, ...).
        data: text, bytes, a JSON-serialisable dict/list, or a DataFrame (written as CSV).
    """
    path = output_path(run_dir, name)
    check_no_links(run_dir, name)
    check_not_empty(path, data)
    with holding(run_dir):
        if isinstance(data, pd.DataFrame):
            write_text_atomic(path, data.to_csv(index=False), root=run_dir)
        elif isinstance(data, (dict, list)):
            write_json_atomic(path, data, root=run_dir)
        elif isinstance(data, bytes):
            write_bytes_atomic(path, data, root=run_dir)
        else:
            write_text_atomic(path, data, root=run_dir)
    return path


def read_json_object(path: str | os.PathLike) -> dict:
    """Read an output that holds a JSON object (``fit.json``, ``quanta.json``, ...).

    Raises:
        DamagedFileError: not readable, not JSON, or not an object (one line naming the file).
    """
    from interp.io.inputs import read_json_object as read

    try:
        return read(path)
    except DamagedFileError:
        raise
    except RunDirectoryError as err:  # missing or unreadable: as damaged as it gets for an output
        raise DamagedFileError(str(err)) from None
