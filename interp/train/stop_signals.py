"""Stopping the training loop cleanly: Ctrl-C (SIGINT), a scheduler's SIGTERM or its warning
SIGUSR1 / SIGUSR2 (:data:`interp.io.interrupt.STOP_SIGNALS`) ends the loop after the current step,
so an interrupted run resumes to the same bits as an uninterrupted one."""

from __future__ import annotations

import contextlib
import signal
import sys

from interp.io.interrupt import STOP_SIGNALS

__all__ = ["stop_at_step_boundary"]

_STOP_SIGNALS = STOP_SIGNALS


@contextlib.contextmanager
def stop_at_step_boundary():
    """While training, Ctrl-C (SIGINT) or a scheduler's SIGTERM, SIGUSR1 or SIGUSR2 asks the loop
    to stop after the current step instead of interrupting it half-way (a batch drawn but not
    learned from would make the resumed run differ from an uninterrupted one). Yields a function
    returning the signal number that asked for a stop (0: none). Only in the main thread
    (elsewhere, the signals keep their usual meaning)."""
    requested: list[int] = []

    def handler(signum, frame):
        if not requested:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            print(f"\n{name}: stopping after this step...", file=sys.stderr, flush=True)
        requested.append(signum)

    previous = {}
    try:
        for sig in _STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread
        yield lambda: 0
        return
    try:
        yield lambda: requested[0] if requested else 0
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
