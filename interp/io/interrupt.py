"""Stopping a long job cleanly: SIGTERM to a parent of worker processes taken as Ctrl-C, so that the
workers save their state (a sweep's points, ``llc``'s checkpoints) instead of running on
orphaned."""

from __future__ import annotations

import contextlib
import signal

__all__ = ["sigterm_as_ctrl_c"]


def _sigterm_raises_interrupt(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one does not cut the shutdown short
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While a process pool runs (a sweep's, or ``llc``'s checkpoint workers), SIGTERM to the
    parent (what ``kill``, ``timeout`` and schedulers send) raises KeyboardInterrupt in it, so that
    the pool stops as on Ctrl-C: a sweep's workers save their points' state and exit. Without it
    the parent died alone and its workers ran on, orphaned. Only in the main thread."""
    try:
        previous = signal.signal(signal.SIGTERM, _sigterm_raises_interrupt)
    except ValueError:  # not the main thread: signals keep their usual meaning
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
