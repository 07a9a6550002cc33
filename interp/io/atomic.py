"""The one atomic file writer of the toolkit.

Every file the toolkit writes (run directories, sweeps, figures' data) goes through
:func:`write_bytes_atomic`:

- the data go to a temporary file in the destination's directory (``.NAME.XXXX.tmp``), which is
  flushed and fsynced, then renamed over the destination (``os.replace`` is atomic on POSIX), and
  the directory is fsynced, so a crash at any moment leaves either the old file or the new one;
- a destination that is a symbolic link is refused: writing through it could overwrite a file
  elsewhere (a shared run folder must not make ``fit`` write outside it);
- the file gets the permissions the user's umask gives a new file (``mkstemp``'s 0600 would make a
  shared run folder unreadable to colleagues);
- temporary files left by a killed writer are recognised by :func:`is_temp_file` and removed by
  :func:`clean_temp_files` when a writer takes a run directory's lock.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import threading
from pathlib import Path

__all__ = [
    "UnsafeDestinationError",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "is_temp_file",
    "clean_temp_files",
]

_TEMP_RE = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")
_umask_lock = threading.Lock()


class UnsafeDestinationError(OSError):
    """The destination is a symbolic link (or not a regular file): nothing was written."""


def _current_umask() -> int:
    # os.umask can only be read by setting it; the lock keeps threads of this process consistent.
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems do not let a directory be opened; the rename stands
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_destination(path: Path) -> None:
    if path.is_symlink():
        raise UnsafeDestinationError(
            f"{path} is a symbolic link; refusing to write through it (remove the link first)"
        )
    if path.exists() and not path.is_file():
        raise UnsafeDestinationError(f"{path} exists and is not a regular file; nothing written")


def _atomic(path: str | os.PathLike, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_destination(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        # Checked again just before the rename: a link may have appeared meanwhile.
        _check_destination(path)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring)."""
    _atomic(path, lambda f: f.write(data))


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes_atomic(path, text.encode())


def _finite_or_null(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically. NaN and infinities, which JSON does
    not have, are written as ``null``."""
    text = json.dumps(_finite_or_null(obj), indent=2, sort_keys=True, allow_nan=False)
    write_text_atomic(path, text + "\n")


def write_with_atomic(path: str | os.PathLike, write) -> None:
    """Atomically write whatever ``write(binary_file)`` writes (e.g. ``torch.save``)."""
    _atomic(path, write)


def is_temp_file(name: str) -> bool:
    """Whether ``name`` is a temporary file of :func:`write_bytes_atomic`."""
    return bool(_TEMP_RE.match(name))


def clean_temp_files(directory: str | os.PathLike) -> list[Path]:
    """Remove the writer's temporary files in ``directory`` (not recursive). Only call this while
    holding the directory's lock: a live writer's temporary file would go too.

    Returns:
        The removed paths.
    """
    directory = Path(directory)
    removed = []
    if not directory.is_dir():
        return removed
    for p in directory.iterdir():
        if is_temp_file(p.name) and p.is_file() and not p.is_symlink():
            p.unlink()
            removed.append(p)
    return removed
