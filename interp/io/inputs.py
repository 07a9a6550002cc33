"""The one reader of the toolkit's CSV and JSON input files (``config.json``, ``sweep.json``,
``metrics.csv``, ``per_class_iw.csv``, ``fit.json``, ``llc.csv``, a curve given to ``fit``, the
committed result tables, ...), with its limits checked before anything is parsed.

A file is opened once (never a FIFO or a device: those are refused without blocking), and
before its text is parsed:

- its size (``fstat``) is at most ``max_bytes`` (:data:`MAX_JSON_BYTES`, :data:`MAX_CSV_BYTES`);
- a JSON file nests at most ``max_depth`` brackets deep (:data:`MAX_JSON_DEPTH`; counted on the
  bytes, outside strings) and holds no number literal of more than ``max_digits`` digits
  (:data:`MAX_NUMBER_DIGITS`);
- a CSV file's header line (read with a bounded ``readline``) is at most
  :data:`MAX_HEADER_BYTES` long and names at most ``max_columns`` columns
  (:data:`MAX_CSV_COLUMNS`), and the file has at most ``max_rows`` lines (:data:`MAX_CSV_ROWS`).

The limits are sized far above any file a real run writes (a ``metrics.csv`` of 10^5 evaluations
is about 40 MB). Every refusal, and every file that does not parse, is a
:class:`~interp.io.errors.DamagedFileError` (exit code 3) whose message is one line naming the
file and the limit or the problem; a missing file is a
:class:`~interp.io.errors.RunDirectoryError` (exit code 3) unless the caller gives ``missing``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interp.io.errors import DamagedFileError, RunDirectoryError, UnsafePathError

__all__ = [
    "DamagedFileError",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_DIGITS",
    "MAX_CSV_BYTES",
    "MAX_CSV_COLUMNS",
    "MAX_CSV_ROWS",
    "MAX_HEADER_BYTES",
    "read_json",
    "read_json_object",
    "parse_json",
    "read_csv",
    "read_csv_text",
    "parse_csv",
    "require",
]

MAX_JSON_BYTES = 16 * 2**20
"""Largest JSON file read (a ``config.json`` is about 2 kB, a ``fit.json`` tens of kB)."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of ``[`` and ``{`` in a JSON file (the toolkit's files nest at most 5 deep)."""
MAX_NUMBER_DIGITS = 100
"""Most digits of one number literal in a JSON file (a float is written with at most 17)."""
MAX_CSV_BYTES = 256 * 2**20
"""Largest CSV file read (a ``metrics.csv`` of 10^5 evaluations is about 40 MB)."""
MAX_CSV_COLUMNS = 65_536
"""Most columns of a CSV file (``per_class_iw.csv`` has one per class, ``K + 1``)."""
MAX_CSV_ROWS = 5_000_000
"""Most lines of a CSV file."""
MAX_HEADER_BYTES = 2**20
"""Longest header line of a CSV file."""

_RAISE = object()


# ---- opening ------------------------------------------------------------------------------------


def _open(path: Path, follow_links: bool) -> int | None:
    """A descriptor of the regular file ``path`` (None: there is no such file)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO must not block the open
    if not follow_links:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP and not follow_links:
            raise UnsafePathError(
                f"{path} is a symbolic link; refusing to read through it (replace the link by "
                "the file)"
            ) from None
        raise RunDirectoryError(f"cannot read {path}: {err.strerror or err}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise DamagedFileError(f"{path} is {what}; expected a file")
    return fd


def _too_big(path: Path, size: int, max_bytes: int) -> DamagedFileError:
    return DamagedFileError(
        f"{path} is {_size(size)}, over the limit of {_size(max_bytes)} for this file; not read"
    )


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("kiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def _read_bytes(
    path: Path, max_bytes: int, follow_links: bool, missing, check_header=None
) -> bytes | None:
    """The bytes of ``path`` when its size is within ``max_bytes`` (None: missing, allowed);
    ``check_header(line)``, if given, judges the first line (read with a bounded ``readline``)
    before the rest is read."""
    fd = _open(path, follow_links)
    if fd is None:
        if missing is _RAISE:
            raise RunDirectoryError(f"{path} is missing")
        return None
    with open(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise _too_big(path, size, max_bytes)
        try:
            head = b""
            if check_header is not None:
                head = f.readline(MAX_HEADER_BYTES + 1)
                check_header(head)
            data = head + f.read(max_bytes + 1 - len(head))
        except OSError as err:
            raise RunDirectoryError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > max_bytes:  # it grew while being read
        raise _too_big(path, len(data), max_bytes)
    return data


def _decode(data: bytes, source) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DamagedFileError(
            f"{source} is not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None


# ---- JSON ---------------------------------------------------------------------------------------


def _outside_strings(data: bytes) -> np.ndarray:
    """The bytes of ``data`` with every byte inside a JSON string (its quotes included) replaced
    by a space; in linear time, whatever the text (no regular expression that could rescan)."""
    codes = np.frombuffer(data, np.uint8)
    if not codes.size:
        return codes
    pos = np.arange(codes.size, dtype=np.int32)
    last_plain = np.where(codes == ord("\\"), -1, pos)
    np.maximum.accumulate(last_plain, out=last_plain)
    # backslashes just before each byte: an odd count escapes a quote
    run = np.zeros(codes.size, np.int32)
    run[1:] = pos[:-1] - last_plain[:-1]
    del pos, last_plain
    quotes = (codes == ord('"')) & (run % 2 == 0)
    del run
    inside = (np.cumsum(quotes, dtype=np.int32) % 2).astype(bool) | quotes
    return np.where(inside, np.uint8(ord(" ")), codes)


def _check_json_shape(data: bytes, source, max_depth: int, max_digits: int) -> None:
    """Refuse nesting deeper than ``max_depth`` and number literals longer than ``max_digits``
    digits, counted on the bytes outside strings (before any parsing)."""
    codes = _outside_strings(data)
    steps = (codes == ord("[")).astype(np.int8) + (codes == ord("{"))
    steps = steps.astype(np.int32) - (codes == ord("]")) - (codes == ord("}"))
    if steps.size and int(np.cumsum(steps).max()) > max_depth:
        raise DamagedFileError(
            f"{source} nests deeper than {max_depth} levels of brackets; not a file the toolkit "
            "writes, not read"
        )
    long = re.search(rb"\d{%d,}" % (max_digits + 1), codes.tobytes())
    if long:
        raise DamagedFileError(
            f"{source} holds a number of more than {max_digits} digits (at byte {long.start()}); "
            "not read"
        )


def parse_json(
    data: bytes | str,
    source,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_digits: int = MAX_NUMBER_DIGITS,
) -> Any:
    """The value JSON text ``data`` (already read from ``source``, with its size bounded) holds,
    its depth and number literals checked first.

    Raises:
        DamagedFileError: one line naming ``source``: too deep, too long a number, not JSON.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    _check_json_shape(raw, source, max_depth, max_digits)
    text = _decode(raw, source) if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DamagedFileError(f"{source} is not valid JSON ({err})") from None
    except (ValueError, RecursionError) as err:  # a limit of Python's own the checks missed
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DamagedFileError(f"{source} cannot be read as JSON ({first})") from None


def read_json(
    path: str | os.PathLike,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    max_digits: int = MAX_NUMBER_DIGITS,
    follow_links: bool = True,
    missing: Any = _RAISE,
) -> Any:
    """The value the JSON file ``path`` holds, every limit checked before it is parsed.

    Args:
        path: the file.
        max_bytes, max_depth, max_digits: the limits (see the module docstring).
        follow_links: False: a symbolic link is refused (:class:`UnsafePathError`).
        missing: returned when there is no such file (default: an error).

    Raises:
        DamagedFileError: over a limit, not UTF-8, not JSON, not a regular file (one line naming
            the file).
        RunDirectoryError: the file is missing (without ``missing``) or cannot be opened.
    """
    path = Path(path)
    data = _read_bytes(path, max_bytes, follow_links, missing)
    if data is None:
        return missing
    return parse_json(data, path, max_depth=max_depth, max_digits=max_digits)


def read_json_object(path: str | os.PathLike, **limits) -> dict:
    """:func:`read_json` of a file that must hold a JSON object (``missing`` is returned as is).

    Raises:
        DamagedFileError: as :func:`read_json`, or the file holds something else than an object.
    """
    data = read_json(path, **limits)
    if "missing" in limits and data is limits["missing"]:
        return data
    if not isinstance(data, dict):
        raise DamagedFileError(f"{path} must hold a JSON object, not {_json_type(data)}")
    return data


def _json_type(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false"}
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def require(data: Mapping, key: str, types: type | tuple[type, ...], source) -> Any:
    """``data[key]`` where ``data`` was read from ``source``, checked to be one of ``types``
    (``float`` admits an int; a bool is no number). ``key`` may be dotted (``observed.method``).

    Raises:
        DamagedFileError: one line naming ``source`` and the key: missing or of another type.
    """
    types = types if isinstance(types, tuple) else (types,)
    value: Any = data
    for i, part in enumerate(key.split(".")):
        if not isinstance(value, Mapping) or part not in value:
            where = ".".join(key.split(".")[:i]) or "the file"
            raise DamagedFileError(f"{source}: the key {key!r} is missing (in {where})")
        value = value[part]
    if isinstance(value, bool):
        ok = bool in types
    else:
        ok = isinstance(value, types) or (float in types and isinstance(value, int))
    if not ok:
        wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise DamagedFileError(
            f"{source}: the key {key!r} must be {wanted}, found {_json_type(value)}"
        )
    return value


# ---- CSV ----------------------------------------------------------------------------------------


def read_csv_text(
    path: str | os.PathLike,
    *,
    max_bytes: int = MAX_CSV_BYTES,
    max_columns: int = MAX_CSV_COLUMNS,
    max_rows: int = MAX_CSV_ROWS,
    follow_links: bool = True,
    missing: Any = _RAISE,
) -> str | Any:
    """The text of the CSV file ``path``: its size, its header's length and column count and its
    number of lines checked before it is read whole (``missing`` when there is no such file, if
    given).

    Raises:
        DamagedFileError: over a limit or not UTF-8 (one line naming the file and the limit).
        RunDirectoryError: the file is missing (without ``missing``) or cannot be opened.
    """
    path = Path(path)

    def check_header(header: bytes) -> None:
        if len(header) > MAX_HEADER_BYTES:
            raise DamagedFileError(
                f"{path}: the header line is longer than {_size(MAX_HEADER_BYTES)}; not read"
            )
        n_columns = header.count(b",") + 1
        if n_columns > max_columns:
            raise DamagedFileError(
                f"{path}: the header names {n_columns} columns, over the limit of {max_columns}; "
                "not read"
            )

    data = _read_bytes(path, max_bytes, follow_links, missing, check_header)
    if data is None:
        return missing
    lines = data.count(b"\n")
    if lines > max_rows:
        raise DamagedFileError(
            f"{path} has {lines} lines, over the limit of {max_rows} rows; not read"
        )
    return _decode(data, path)


def parse_csv(
    text: str, source, *, required: Sequence[str] = (), empty: Any = _RAISE, **options
) -> pd.DataFrame | Any:
    """The table CSV text ``text`` (read by :func:`read_csv_text` from ``source``) holds;
    ``options`` go to :func:`pandas.read_csv`; ``empty`` is returned for a text of nothing but
    white space, if given.

    Raises:
        DamagedFileError: the text does not parse, or is empty (without ``empty``), or a
            ``required`` column is missing (one line naming ``source`` and the column).
    """
    if not text.strip():
        if empty is not _RAISE:
            return empty
        raise DamagedFileError(f"{source} is empty: not a CSV table (it has no header)")
    try:
        frame = pd.read_csv(io.StringIO(text), **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError) as err:
        detail = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        detail = detail.removeprefix("Error tokenizing data. ")
        raise DamagedFileError(f"{source} is not a readable CSV table ({detail})") from None
    missing_columns = [c for c in required if c not in frame.columns]
    if missing_columns:
        raise DamagedFileError(
            f"{source}: the column {missing_columns[0]!r} is missing (columns: "
            f"{', '.join(map(str, frame.columns[:20]))}{', ...' if frame.shape[1] > 20 else ''})"
        )
    return frame


def read_csv(
    path: str | os.PathLike,
    *,
    required: Sequence[str] = (),
    max_bytes: int = MAX_CSV_BYTES,
    max_columns: int = MAX_CSV_COLUMNS,
    max_rows: int = MAX_CSV_ROWS,
    follow_links: bool = True,
    missing: Any = _RAISE,
    empty: Any = _RAISE,
    **options,
) -> pd.DataFrame | Any:
    """The table the CSV file ``path`` holds, its limits checked before it is parsed
    (:func:`read_csv_text`, then :func:`parse_csv` with ``required`` and the pandas
    ``options``); ``missing`` when there is no such file and ``empty`` when it holds nothing, if
    given.

    Raises:
        DamagedFileError: over a limit, not a CSV table, a required column missing.
        RunDirectoryError: the file is missing (without ``missing``) or cannot be opened.
    """
    text = read_csv_text(
        path,
        max_bytes=max_bytes,
        max_columns=max_columns,
        max_rows=max_rows,
        follow_links=follow_links,
        missing=missing,
    )
    if missing is not _RAISE and text is missing:
        return missing
    return parse_csv(text, Path(path), required=required, empty=empty, **options)
