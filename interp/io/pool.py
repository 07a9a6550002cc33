"""The one process pool of every parallel command: workers that never outlive their parent.

:class:`WorkerPool` runs tasks in spawned processes (a ``ProcessPoolExecutor``), ``threads`` torch
threads each, with the parent's plugins loaded (their encodings and configs unpickle). Whatever
ends the parent, its workers end too, and none starts a task afterwards:

- **Parent killed** (``kill -9``, which it cannot catch): each worker asked the kernel for SIGKILL
  when its parent dies (Linux ``PR_SET_PDEATHSIG``), so it dies with it; multiprocessing's resource
  tracker (a child of the parent, which the workers hold a pipe to) then reads the end of its pipe
  and exits too. A point being trained keeps what it saved at its last evaluation.
- **Before each task** a worker checks that its parent is still the process that started it
  (``os.getppid()``) and that no stop was asked (:func:`check_start`; a task calls it again
  immediately before it creates its folder): after the parent's death it exits, after a stop it
  raises :class:`NotStarted`. So no task, and no task's folder, starts after either.
- **Ctrl-C or SIGTERM to the parent** (SIGTERM raises :class:`interp.io.interrupt.Interrupted` in
  it while the pool is open): :meth:`WorkerPool.stop` cancels the tasks not started and either
  sends SIGINT to the workers (``on_stop="interrupt"``: a training saves its state at the step
  boundary, and the task's future raises :class:`~interp.io.interrupt.Interrupted`) or kills them
  (``on_stop="kill"``: work with nothing worth saving). Leaving the ``with`` block on an exception
  stops the pool that way; it always waits for every worker to exit.

Workers ignore SIGINT while idle (the parent decides); while a task runs, the first SIGINT raises
KeyboardInterrupt in it (``on_stop="interrupt"``), and a worker interrupted once starts no other
task.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor

from interp.io.interrupt import Interrupted, signal_of, sigterm_as_ctrl_c
from interp.io.plugins import load_plugins, loaded_plugins

__all__ = ["Interrupted", "NotStarted", "WorkerPool", "check_start", "signal_of"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_ON_STOP = ("interrupt", "kill")


class NotStarted(Exception):
    """A task the pool did not start: a stop was asked before its turn."""


# The state of a worker process (None in any other process).
_PARENT: int | None = None
_STOP = None  # the pool's stop event
_INTERRUPTIBLE = True
_INTERRUPTED = False  # a task of this worker was interrupted: it starts no further task


def check_start() -> None:
    """In a pool worker, immediately before a task creates anything (its folder): exit the worker
    at once if the parent that started it has died, raise :class:`NotStarted` if the pool was
    stopped. Nothing outside a pool worker."""
    if _PARENT is None:
        return
    if os.getppid() != _PARENT:
        os._exit(1)  # orphaned: nobody waits for a result, and nothing may start
    if _INTERRUPTED or (_STOP is not None and _STOP.is_set()):
        raise NotStarted("the pool was stopped before this task started")


def _die_with_parent(parent: int) -> None:
    """SIGKILL from the kernel when the parent dies (Linux), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it died before the request above
        os._exit(1)


def _init_worker(parent, stop, pids, threads, interruptible, plugins, initializer, initargs):
    global _PARENT, _STOP, _INTERRUPTIBLE
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # idle: the parent decides
    _PARENT = parent
    _die_with_parent(parent)
    import torch

    torch.set_num_threads(threads)
    load_plugins(plugins)
    _STOP, _INTERRUPTIBLE = stop, interruptible
    pids.put(os.getpid())
    if initializer is not None:
        initializer(*initargs)


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one does not cut the saving short
    raise KeyboardInterrupt


def _run_task(fn, args, kwargs):
    global _INTERRUPTED
    try:
        if _INTERRUPTIBLE:
            signal.signal(signal.SIGINT, _interrupt_once)
        check_start()
        return fn(*args, **kwargs)
    except KeyboardInterrupt as err:
        _INTERRUPTED = True
        raise Interrupted(signal_of(err)) from None  # picklable, with its signal
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class WorkerPool:
    """A context-managed pool of ``workers`` spawned processes (see the module docstring).

    Args:
        workers: processes at most (started as tasks come).
        threads: torch threads of each worker.
        on_stop: what :meth:`stop` does to a running task: ``"interrupt"`` (SIGINT: a training
            saves its state and its future raises Interrupted) or ``"kill"``.
        initializer, initargs: called in each worker once it is set up (a module-level function).
    """

    def __init__(
        self,
        workers: int,
        *,
        threads: int = 1,
        on_stop: str = "interrupt",
        initializer: Callable | None = None,
        initargs: tuple = (),
    ) -> None:
        if on_stop not in _ON_STOP:
            raise ValueError(f"on_stop={on_stop!r} is invalid: allowed values are {_ON_STOP}")
        self.workers, self.threads, self.on_stop = workers, threads, on_stop
        self._initializer, self._initargs = initializer, initargs
        self._futures: list[Future] = []
        self._pids: set[int] = set()
        self._executor: ProcessPoolExecutor | None = None
        self._sigterm = None

    def __enter__(self) -> WorkerPool:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with torch's threads
        self._stop, self._pid_queue = ctx.Event(), ctx.SimpleQueue()
        self._executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(
                os.getpid(),
                self._stop,
                self._pid_queue,
                self.threads,
                self.on_stop == "interrupt",
                tuple(loaded_plugins()),
                self._initializer,
                self._initargs,
            ),
        )
        self._sigterm = sigterm_as_ctrl_c()
        self._sigterm.__enter__()
        return self

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        """Run ``fn(*args, **kwargs)`` in a worker (a module-level function, picklable arguments).
        Its future raises :class:`NotStarted` if the pool stopped before it started, and
        :class:`~interp.io.interrupt.Interrupted` if a stop interrupted it. Call it from the
        thread that opened the pool: a worker started here dies when this thread ends (the
        kernel's parent-death signal follows the thread that started it)."""
        future = self._executor.submit(_run_task, fn, args, kwargs)
        self._futures.append(future)
        return future

    def stop(self) -> None:
        """Start no further task and stop the running ones (``on_stop``); returns at once (the
        futures of interrupted tasks complete as their workers finish)."""
        self._stop.set()
        for future in self._futures:
            future.cancel()
        self._read_pids()
        how = signal.SIGINT if self.on_stop == "interrupt" else signal.SIGKILL
        for pid in self._pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, how)

    def _read_pids(self) -> None:
        while not self._pid_queue.empty():
            self._pids.add(self._pid_queue.get())

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None:
                self.stop()
            self._executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self._sigterm.__exit__(None, None, None)
            self._pid_queue.close()
