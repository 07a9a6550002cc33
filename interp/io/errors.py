"""The kinds of failure a user can cause, and the one exit code of each (``docs/run-format.md``,
"Exit codes").

Every command maps an error to its code through :func:`exit_code`, so the same failure (a damaged
``config.json``, a run being written by another process, a full disk) exits with the same code
from every command.
"""

from __future__ import annotations

__all__ = [
    "EXIT_UNEXPECTED",
    "EXIT_INVALID",
    "EXIT_UNUSABLE",
    "EXIT_BUSY",
    "EXIT_RESOURCES",
    "RunDirectoryError",
    "RunLockedError",
    "CheckpointError",
    "UnsafePathError",
    "DamagedFileError",
    "WriteError",
    "ResourceError",
    "DidNotConverge",
    "exit_code",
]

EXIT_UNEXPECTED = 1  # a defect of the toolkit (INDUCTION_CLIFF_TRACEBACK=1 shows where)
EXIT_INVALID = 2  # invalid arguments or settings (a value, a key, a bound, two spellings of one)
EXIT_UNUSABLE = 3  # a run, sweep or input file that cannot be used (missing, damaged, a link)
EXIT_BUSY = 4  # another live process is writing the run or sweep (its pid is named)
EXIT_RESOURCES = 5  # the machine cannot do it: no space, read-only, no permission, no memory


class RunDirectoryError(RuntimeError):
    """A run directory cannot be used as asked (the message is one line naming file and field)."""


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated or corrupted (or does not fit the model)."""


class RunLockedError(RunDirectoryError):
    """Another live process is writing this run directory."""


class DamagedFileError(RunDirectoryError, ValueError):
    """A file of a run or sweep (``llc.csv``, ``fit.json``, ...) is not what its name says: the
    message names it and what is wrong. (A ValueError too, for callers that catch those.)"""


class UnsafePathError(RunDirectoryError):
    """A path to write or delete goes through a symbolic link (or a non-regular file) inside a run
    or sweep directory, or leaves it: nothing was written or deleted."""


class WriteError(OSError):
    """A file could not be written (disk full, read-only, permission): ``str()`` is one line
    naming the destination, never a temporary name."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class ResourceError(ValueError):
    """The settings need more of the machine (memory, disk) than it has: refused before any
    allocation; the message names the field and the estimate."""


class DidNotConverge(RuntimeError):
    """A numerical fit or integration ran out of its budget of evaluations: the answer is "did not
    converge" (the message names the curve), not a result."""


def exit_code(err: BaseException) -> int:
    """The exit code of a failure (see the module docstring); 1 for anything unexpected."""
    if isinstance(err, RunLockedError):
        return EXIT_BUSY
    if isinstance(err, (ResourceError, WriteError)):
        return EXIT_RESOURCES
    if isinstance(err, (RunDirectoryError, CheckpointError, DidNotConverge)):
        return EXIT_UNUSABLE
    if isinstance(err, (ValueError, OverflowError)):
        return EXIT_INVALID
    if isinstance(err, OSError):
        import errno

        if err.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT):
            return EXIT_RESOURCES
        return EXIT_UNUSABLE
    return EXIT_UNEXPECTED
