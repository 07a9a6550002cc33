"""Paths the toolkit writes or deletes, checked component by component.

Inside a run or sweep directory (the *root*), every component below the root must be a real
directory or a regular file: a symbolic link anywhere there (``checkpoints/``, ``figures/``, an
output) is refused with :class:`~interp.io.errors.UnsafePathError` naming it, for writing, for
reading a file in order to rewrite it, and for deleting. Whatever such a directory holds, nothing
is written or deleted outside it. The part of a path above the root is the user's: it is followed
as given (a home directory that is a link is fine).

An output the user names (``--out``, ``--json``, ``--figure``, a run folder to create) is checked
before any work by :func:`check_output_path`: the path itself must not be a symbolic link
(dangling or not: writing through one would create or replace a file elsewhere), nor any folder
on the way to it that does not exist yet, nor, inside a run or sweep directory, any component
below it.

Directories are walked with ``openat`` and ``O_NOFOLLOW`` (:func:`open_directory`), so a link
that appears between the check and the write is refused too.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from interp.io.errors import UnsafePathError

__all__ = [
    "open_directory",
    "check_no_links",
    "check_output_path",
    "link_error",
    "enclosing_root",
    "enclosing_roots",
    "is_run_or_sweep",
    "unlink_in",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _link_error(path: Path) -> UnsafePathError:
    return UnsafePathError(
        f"{path} is a symbolic link inside a run or sweep directory; refusing to write, read to "
        "rewrite or delete through it (replace the link by a real folder or file)"
    )


def link_error(path: str | os.PathLike) -> UnsafePathError:
    """The one-line refusal of a path to write that is a symbolic link outside any run or sweep
    directory (a dangling one is said to be: writing would create a file where it points)."""
    if os.path.exists(path):
        why = "remove the link first"
    else:
        why = "a dangling symbolic link: writing would create a file where it points; remove it"
    return UnsafePathError(f"{path} is a symbolic link; refusing to write through it ({why})")


def _is_link_at(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _below(path: Path, root: Path) -> tuple[str, ...]:
    if path != root and root not in path.parents:
        raise UnsafePathError(f"{path} is outside {root}; refusing to write there")
    return path.relative_to(root).parts


def open_directory(path: str | os.PathLike, root: str | os.PathLike | None = None) -> int:
    """Open directory ``path`` (creating what is missing) and return its file descriptor.

    Below ``root`` (None: below the deepest part of ``path`` that exists), every component is
    opened without following links: one that is a symbolic link, or not a directory, is refused.

    Raises:
        UnsafePathError: a component below the root is a link or not a directory, or ``path`` is
            not inside ``root``.
        OSError: the root cannot be opened, or a folder cannot be created.
    """
    path = Path(os.path.abspath(path))
    if root is None:
        start = path
        while not os.path.lexists(start) and start != start.parent:
            start = start.parent
    else:
        start = Path(os.path.abspath(root))
    parts = _below(path, start)
    try:
        fd = os.open(start, _DIR_FLAGS)
    except NotADirectoryError:
        raise UnsafePathError(f"{start} is not a directory; nothing written") from None
    where = start
    try:
        for part in parts:
            where = where / part
            try:
                new = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened (and checked) below
                new = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    if _is_link_at(part, fd):
                        raise _link_error(where) from None
                    raise UnsafePathError(f"{where} is not a directory; nothing written") from None
                raise
            os.close(fd)
            fd = new
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_no_links(root: str | os.PathLike, relative: str | os.PathLike) -> Path:
    """Refuse ``root/relative`` if any component below ``root`` (the last one included) is a
    symbolic link; nothing needs to exist. Returns the path."""
    root = Path(root)
    parts = Path(relative).parts
    if any(part in ("", ".", "..") or os.sep in part for part in parts):
        raise UnsafePathError(f"{root / relative} leaves {root}; refused")
    where = root
    for part in parts:  # every component checked above, including those past a missing one
        where = where / part
        if where.is_symlink():
            raise _link_error(where)
        if not where.exists():
            break
    return root / relative


def check_output_path(path: str | os.PathLike) -> Path:
    """Refuse, before any work, an output (a file or a folder) the user named that would be
    written through a symbolic link: ``path`` itself (dangling or not), a folder on the way to it
    that does not exist but is a dangling link, and, where ``path`` lies inside a run or sweep
    directory, any component below the outermost one (:func:`check_no_links`). Existing folders
    above ``path`` outside a run are the user's and are followed. Nothing is created.

    Returns:
        The absolute path.

    Raises:
        UnsafePathError: one line naming the link (exit code 3).
    """
    given, path = path, Path(os.path.abspath(path))
    roots = enclosing_roots(path.parent)
    if roots:  # the last component included
        check_no_links(roots[0], path.relative_to(roots[0]))
    if path.is_symlink():
        raise link_error(given)  # named as the user gave it
    where = path.parent
    while not where.exists() and where != where.parent:  # folders this write would create
        if where.is_symlink():
            raise link_error(where)
        where = where.parent
    return path


def is_run_or_sweep(path: Path) -> bool:
    """Whether ``path`` is a run directory (a ``config.json`` of a run) or a sweep folder."""
    if os.path.isfile(path / "sweep.json"):
        return True
    config = path / "config.json"
    if not os.path.isfile(config):
        return False
    from interp.io.errors import RunDirectoryError
    from interp.io.inputs import read_json

    try:
        data = read_json(config)
    except (OSError, RunDirectoryError):
        return False
    return isinstance(data, dict) and {"task", "model", "train"} <= set(data)


def enclosing_roots(path: str | os.PathLike) -> list[Path]:
    """The run and sweep directories among the lexical ancestors of ``path`` (``path`` itself
    included), outermost first."""
    path = Path(os.path.abspath(path))
    found = []
    for ancestor in [path, *path.parents]:
        if ancestor == ancestor.parent:
            break
        try:
            if is_run_or_sweep(ancestor):
                found.append(ancestor)
        except OSError:
            continue
    return found[::-1]


def enclosing_root(path: str | os.PathLike) -> Path | None:
    """The outermost run or sweep directory among the (lexical) ancestors of ``path``, or None:
    the root below which no link may lie (the outermost one, so that a link inside a run that
    points to another run cannot make that other run the root)."""
    roots = enclosing_roots(path)
    return roots[0] if roots else None


def unlink_in(dir_fd: int, name: str, shown: Path) -> None:
    """Delete the regular file ``name`` of an opened directory, refusing a link (``shown`` is the
    path named in the error)."""
    if _is_link_at(name, dir_fd):
        raise _link_error(shown)
    os.unlink(name, dir_fd=dir_fd)
