"""The lock of a run or sweep directory: one writer at a time, whatever it writes.

:class:`RunLock` is an exclusive ``flock`` on ``DIR/.lock``, which records the holder (pid, host,
start). A second writer is refused with :class:`~interp.io.errors.RunLockedError` naming the
holder's pid and host; a lock left by a dead process is taken over with a notice (the kernel drops
``flock`` locks of dead processes, so this cannot take a live writer's lock).

Training holds it for the whole run (:class:`interp.io.rundir.RunWriter`); every command that
writes an output into a run (``llc``, ``measures``, ``fit``, ``evaluate``, ``quanta``,
``figures`` and ``report`` when they write inside it) holds it from before it reads what it will
rewrite until its last write (:func:`holding`), so two of them never interleave.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from interp.io.errors import RunLockedError, UnsafePathError, WriteError

__all__ = ["LOCK_NAME", "RunLock", "holding", "held"]

log = logging.getLogger("interp.io.rundir")

LOCK_NAME = ".lock"
# The locks this process holds, by real path: a writer that already holds a run's lock (training,
# or a command's :func:`holding`) writes its outputs under it without locking again.
_HELD: dict[str, RunLock] = {}


def _key(directory: Path) -> str:
    return os.path.realpath(directory)


def held(directory: str | os.PathLike) -> bool:
    """Whether this process holds the lock of ``directory``."""
    return _key(Path(directory)) in _HELD


@contextmanager
def holding(directory: str | os.PathLike) -> Iterator[None]:
    """Hold the lock of ``directory`` for the block (reentrant within this process).

    Raises:
        RunLockedError: another live process holds it (its pid and host are named).
    """
    if held(directory):
        yield
        return
    lock = RunLock(directory).acquire()
    try:
        yield
    finally:
        lock.release()


class RunLock:
    """An exclusive ``flock`` on ``DIR/.lock``, which records the holder (pid, host, start)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None
        self.took_over: dict | None = None

    @staticmethod
    def _read(fd: int) -> dict | None:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 4096)
        if not raw.strip():
            return None
        from interp.io.inputs import parse_json

        try:
            info = parse_json(raw, LOCK_NAME)  # bounded above; depth and digits checked
        except ValueError:
            return {"pid": "?", "host": "?"}
        return info if isinstance(info, dict) else {"pid": "?", "host": "?"}

    def _open(self) -> int:
        """Open ``.lock`` for reading and writing, never truncating it, and only if it is a regular
        file with one link: a hard link to a file elsewhere, a FIFO, a directory or a device is
        refused naming it, so that nothing outside the run is ever emptied or overwritten."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise UnsafePathError(
                    f"{self.path} is a symbolic link; refusing to lock through it (remove it)"
                ) from None
            if err.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.ETXTBSY):
                raise UnsafePathError(
                    f"{self.path} is not a regular file; refusing to lock with it (remove it)"
                ) from None
            raise WriteError(
                err.errno or errno.EIO, f"cannot create the lock {self.path}: {err.strerror}"
            ) from None
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = "is not a regular file"
        elif st.st_nlink != 1:
            problem = f"has {st.st_nlink} hard links (a file elsewhere shares it)"
        if problem is not None:
            os.close(fd)
            raise UnsafePathError(f"{self.path} {problem}; refusing to lock with it (remove it)")
        os.set_blocking(fd, True)
        return fd

    def _write_record(self, fd: int, record: dict) -> None:
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(record) + "\n").encode())
            os.fsync(fd)
        except OSError as err:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise WriteError(
                err.errno or errno.EIO, f"cannot write the lock {self.path}: {err.strerror}"
            ) from None

    def acquire(self, wait_s: float = 2.0) -> RunLock:
        """Take the lock, or raise :class:`RunLockedError` naming its live holder.

        A holder writes its record just after taking the lock and empties it just before letting
        go, so a refused writer that reads no record is between the two: it tries the lock again
        (the holder may have gone) and reads again, for up to ``wait_s`` seconds, before naming
        the holder ``?``."""
        import time

        fd = self._open()
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                info = self._read(fd) or {}
                if info.get("pid", "?") == "?" and time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                os.close(fd)
                raise RunLockedError(
                    f"{self.directory} is being written by pid {info.get('pid', '?')} on host "
                    f"{info.get('host', '?')} (since {info.get('since', '?')}); wait for it to "
                    "finish or stop it"
                ) from None
        previous = self._read(fd)
        if previous is not None:
            # The kernel released the holder's flock, so it died without cleaning up.
            self.took_over = previous
            log.warning(
                "note: taking over the stale lock of %s (pid %s on host %s, since %s, no longer "
                "running)",
                self.directory,
                previous.get("pid", "?"),
                previous.get("host", "?"),
                previous.get("since", "?"),
            )
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        self._write_record(fd, me)
        self._fd = fd
        _HELD[_key(self.directory)] = self
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        if _HELD.get(_key(self.directory)) is self:
            del _HELD[_key(self.directory)]
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
