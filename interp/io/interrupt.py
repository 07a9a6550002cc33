"""Stopping a long job cleanly: the signals that ask a job to stop and save its state, and how a
parent of worker processes turns them into Ctrl-C, so that the workers save their state (a
sweep's points, ``llc``'s checkpoints) instead of running on orphaned, and the signal that stopped
the job kept for its exit code (128 + the signal).

The stop signals (:data:`STOP_SIGNALS`) are SIGINT (Ctrl-C), SIGTERM (``kill``, ``timeout``, a
scheduler's cancellation or preemption) and SIGUSR1 / SIGUSR2 (what SLURM sends ahead of a job's
time limit with ``--signal``; submitit asks for SIGUSR2). Training stops at the next step
boundary on any of them (:mod:`interp.train.stop_signals`), saves its resume state, and the
command exits 128 + the signal: 130, 143, 138 or 140.
"""

from __future__ import annotations

import contextlib
import signal

__all__ = ["STOP_SIGNALS", "Interrupted", "sigterm_as_ctrl_c", "signal_of"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
"""The signals that stop a training at a step boundary with its state saved."""

# The stop signals other than Ctrl-C, which Python already raises as KeyboardInterrupt.
_AS_CTRL_C = tuple(s for s in STOP_SIGNALS if s != signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """A job stopped by one of :data:`STOP_SIGNALS`, its state saved.

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


def _raise_interrupt(signum, frame):
    for sig in _AS_CTRL_C:  # a second one does not cut the shutdown short
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While a process pool or a job's points run (:class:`interp.io.pool.WorkerPool`, a SLURM
    job of a sweep), SIGTERM, SIGUSR1 or SIGUSR2 (what ``kill``, ``timeout`` and schedulers send)
    raises :class:`Interrupted` (a KeyboardInterrupt whose ``signum`` is that signal), so that the
    work stops as on Ctrl-C and the command exits 128 + the signal (143 for SIGTERM). Without it
    the process died alone. Only in the main thread; the previous handlers are restored."""
    previous = {}
    try:
        for sig in _AS_CTRL_C:
            previous[sig] = signal.signal(sig, _raise_interrupt)
    except ValueError:  # not the main thread: signals keep their usual meaning
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
