"""Stopping a long job cleanly: SIGTERM to a parent of worker processes taken as Ctrl-C, so that the
workers save their state (a sweep's points, ``llc``'s checkpoints) instead of running on
orphaned, and the signal that stopped the job kept for its exit code (128 + the signal)."""

from __future__ import annotations

import contextlib
import signal

__all__ = ["Interrupted", "sigterm_as_ctrl_c", "signal_of"]


class Interrupted(KeyboardInterrupt):
    """A job stopped by SIGINT (Ctrl-C) or SIGTERM, its state saved.

    Attributes:
        signum: the signal that asked for the stop.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(int(signum))  # the args unpickle it (from a worker process)
        self.signum = int(signum)

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


def signal_of(err: BaseException) -> int:
    """The signal behind a KeyboardInterrupt: its ``signum`` (:class:`Interrupted`, a training's
    ``TrainingInterrupted``), else SIGINT (Python's own Ctrl-C)."""
    return int(getattr(err, "signum", signal.SIGINT))


def _sigterm_raises_interrupt(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one does not cut the shutdown short
    raise Interrupted(signal.SIGTERM)


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While a process pool runs (:class:`interp.io.pool.WorkerPool`), SIGTERM to the parent (what
    ``kill``, ``timeout`` and schedulers send) raises :class:`Interrupted` (a KeyboardInterrupt
    whose ``signum`` is SIGTERM) in it, so that the pool stops as on Ctrl-C and the command exits
    143. Without it the parent died alone. Only in the main thread."""
    try:
        previous = signal.signal(signal.SIGTERM, _sigterm_raises_interrupt)
    except ValueError:  # not the main thread: signals keep their usual meaning
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
