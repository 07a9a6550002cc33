"""The one atomic file writer of the toolkit.

Every file the toolkit writes (run directories, sweeps, figures, notebooks, token runs) goes
through :func:`write_bytes_atomic` (``tests/test_mechanisms.py`` fails on any other write in
``interp/``, ``phenomenology/`` and ``experiments/``):

- the data go to a temporary file in the destination's directory (``.NAME.XXXX.tmp``), which is
  flushed and fsynced, then renamed over the destination (``os.replace`` is atomic on POSIX), and
  the directory is fsynced, so a crash at any moment leaves either the old file or the new one;
- a destination that is a symbolic link (dangling or not) or a regular file with more than one
  hard link is refused, and so is any link between ``root`` and the destination
  (:mod:`interp.io.paths`: the folders are opened with ``O_NOFOLLOW``): writing through one
  could overwrite a file elsewhere (a shared run folder must not make ``fit`` write outside it);
  a command refuses the outputs the user named this way before any work
  (:func:`interp.io.paths.check_output_path`, through :func:`interp.io.outputs.writing_into`),
  and this check at write time remains the last guard;
- the file gets the permissions the user's umask gives a new file (a shared run folder stays
  readable to colleagues);
- a failure (disk full, read-only disk) is a :class:`~interp.io.errors.WriteError` naming the
  destination, never the temporary file, and leaves the previous file as it was;
- temporary files left by a killed writer are recognised by :func:`is_temp_file` and removed by
  :func:`clean_temp_files` when a writer takes a run directory's lock.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

from interp.io.errors import UnsafePathError, WriteError
from interp.io.paths import enclosing_root, link_error, open_directory

__all__ = [
    "UnsafeDestinationError",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "write_with_atomic",
    "is_temp_file",
    "clean_temp_files",
    "check_can_write",
]

_TEMP_RE = re.compile(r"^\..+\.[A-Za-z0-9_]{6,}\.tmp$")

# The destination is a symbolic link (or not a regular file), or a link lies on the way to it.
UnsafeDestinationError = UnsafePathError


def _check_destination(name: str, dir_fd: int, path: Path) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):  # a dangling one too: it would create a file elsewhere
        raise link_error(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(f"{path} exists and is not a regular file; nothing written")
    if st.st_nlink > 1:
        raise UnsafePathError(
            f"{path} has {st.st_nlink} hard links (a file elsewhere shares it); refusing to "
            "write over it (remove it first)"
        )


def _write_error(err: OSError, path: Path) -> WriteError:
    reason = err.strerror or str(err)
    return WriteError(err.errno or errno.EIO, f"cannot write {path}: {reason}")


def _atomic(path: str | os.PathLike, write, root: str | os.PathLike | None = None) -> None:
    path = Path(path)
    if root is None:  # inside a run or sweep directory, whoever writes: no link below it
        root = enclosing_root(path.parent)
    try:
        dir_fd = open_directory(path.parent, root)
    except UnsafePathError:
        raise
    except OSError as err:
        raise _write_error(err, path) from None
    try:
        name = path.name
        _check_destination(name, dir_fd, path)
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            # mode 0o666 less the umask, as for any new file
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
        except OSError as err:
            raise _write_error(err, path) from None
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            # Checked again just before the rename: a link may have appeared meanwhile.
            _check_destination(name, dir_fd, path)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as err:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            said = _said_as_write_error(err, path)
            if said is not None:
                raise said from None
            raise
        with contextlib.suppress(OSError):  # some filesystems do not sync directories
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _said_as_write_error(err: BaseException, path: Path) -> WriteError | None:
    """The one-line error a failed write of ``path`` is said as (None: raised as it is)."""
    if isinstance(err, OSError) and not isinstance(err, (UnsafePathError, WriteError)):
        if err.errno is not None:  # the disk's complaint, said of the destination
            return _write_error(err, path)
    if isinstance(err, RuntimeError) and "write" in str(err).lower():
        # torch.save's stream writer reports a full disk as a RuntimeError
        full = shutil.disk_usage(path.parent).free < (1 << 20)
        reason = "No space left on device" if full else str(err).splitlines()[0]
        return WriteError(errno.ENOSPC if full else errno.EIO, f"cannot write {path}: {reason}")
    return None


def _probe(existing: Path, root, directory: Path) -> None:
    """Create and remove a probe file in ``existing`` (opened below ``root``), or refuse."""
    try:
        dir_fd = open_directory(existing, root)
    except UnsafePathError:
        raise
    except OSError as err:
        raise _write_error(err, directory) from None
    try:
        probe = f".write-probe.{secrets.token_hex(4)}.tmp"  # a temp name: cleaned if left
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.close(os.open(probe, flags, 0o600, dir_fd=dir_fd))
            os.unlink(probe, dir_fd=dir_fd)
        except OSError as err:
            raise WriteError(
                err.errno or errno.EIO, f"cannot write to {existing}: {err.strerror or err}"
            ) from None
    finally:
        os.close(dir_fd)


def check_can_write(
    directory: str | os.PathLike, nbytes: int = 0, root: str | os.PathLike | None = None
) -> None:
    """Refuse early, before a long computation, when ``directory`` cannot take a new file of
    ``nbytes``: a probe file is created and removed there (this catches read-only disks, which
    permission bits do not show), and the free space is compared with ``nbytes``.

    Raises:
        WriteError: read-only, no permission, or not enough free space (the message names the
            folder and both sizes).
        UnsafePathError: a link below ``root``.
    """
    directory = Path(os.path.abspath(directory))
    existing = directory
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent  # nothing is created before the computation
    if root is None:
        root = enclosing_root(existing)
    elif existing != directory:
        root = None if Path(os.path.abspath(root)) not in [existing, *existing.parents] else root
    _probe(existing, root, directory)
    directory = existing
    if nbytes:
        free = shutil.disk_usage(directory).free
        if free < nbytes:
            raise WriteError(
                errno.ENOSPC,
                f"cannot write {nbytes / 1e6:.1f} MB to {directory}: only {free / 1e6:.1f} MB free",
            )


def write_bytes_atomic(
    path: str | os.PathLike, data: bytes, *, root: str | os.PathLike | None = None
) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring).

    Args:
        root: the run or sweep directory ``path`` lies in: no component between it and ``path``
            may be a symbolic link. None: the outermost run or sweep directory among the
            ancestors of ``path`` (:func:`interp.io.paths.enclosing_root`), if any; else only
            ``path`` itself is checked (and folders this call creates).
    """
    _atomic(path, lambda f: f.write(data), root)


def write_text_atomic(
    path: str | os.PathLike, text: str, *, root: str | os.PathLike | None = None
) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes_atomic(path, text.encode(), root=root)


def _finite_or_null(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def write_json_atomic(
    path: str | os.PathLike, obj, *, root: str | os.PathLike | None = None
) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically. NaN and infinities, which JSON does
    not have, are written as ``null``."""
    text = json.dumps(_finite_or_null(obj), indent=2, sort_keys=True, allow_nan=False)
    write_text_atomic(path, text + "\n", root=root)


def write_with_atomic(
    path: str | os.PathLike, write, *, root: str | os.PathLike | None = None
) -> None:
    """Atomically write whatever ``write(binary_file)`` writes (e.g. ``torch.save``)."""
    _atomic(path, write, root)


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
