"""Waits that do not depend on the machine's speed, and the processes a test leaves behind.

A test waits for an event (a file's rows, a process's exit, a line on a pipe), never for a length
of time: :data:`HANG_S` only bounds a wait that would otherwise never end, and is many times what
the slowest event takes on an idle machine, so that a loaded machine is slow, not failed."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path

HANG_S = float(os.environ.get("INDUCTION_CLIFF_TEST_HANG_S", "900"))
"""Seconds after which a wait is a hang (the slowest event waited for, a tiny sweep's two
evaluations of each seed, takes about 30 s on an idle 2-core machine); the environment variable
``INDUCTION_CLIFF_TEST_HANG_S`` sets another."""


def wait_for(condition, what: str, timeout: float = HANG_S, every: float = 0.05) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"no {what} after {timeout:.0f} s: a hang")
        time.sleep(every)


def descendants(pid: int | None = None) -> dict[int, str]:
    """The processes below ``pid`` (this process by default): pid -> command line.
    Zombies (exited, not yet waited for) count: a zombie is a child nobody waited for."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    if not Path("/proc").is_dir():  # no process table to read: none known
        return {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - below
        # a lifelong helper and everything below it (a browser's own processes) are not counted
        frontier = {p for p in frontier if not lifelong(command_line(p))}
        below |= frontier
    return {p: command_line(p) for p in sorted(below)}


def command_line(pid: int) -> str:
    """``pid``'s command line (a zombie has none: its name, in brackets)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        if not raw:
            return "[" + Path(f"/proc/{pid}/comm").read_text().strip() + "]"
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


LIFELONG_HELPERS = (
    "multiprocessing.resource_tracker",  # multiprocessing's shared-memory bookkeeping
    "multiprocessing.forkserver",
    "torch._inductor.compile_worker",  # torch.compile's pool of compiler processes
    "choreographer",  # kaleido's browser, one per process (interp.viz.export), and its children
)
"""Helpers that a library starts once and keeps for the whole process by design: not a leak."""

LIFELONG_THREADS = ("ThreadPoolExecutor-",)
"""Threads of a pool a library keeps for the whole process (torch.compile's, kaleido's)."""


def lifelong(command: str) -> bool:
    """Whether ``command`` is one of the :data:`LIFELONG_HELPERS`."""
    return any(h in command for h in LIFELONG_HELPERS)


GRACE_S = 60.0
"""How long a process or thread that a test stopped may take to finish exiting before it counts
as left behind (waited only while one is still there)."""

_POPENS: weakref.WeakSet = weakref.WeakSet()
_MADE = [0]  # how many Popens were recorded


def record_popens() -> None:
    """From now on every ``subprocess.Popen`` of this process is recorded (numbered in order), so
    that one never waited for is found and waited for by the test that made it: collected
    unwaited, it warns in whichever test runs then."""
    init = subprocess.Popen.__init__
    if getattr(init, "records", False):
        return

    @functools.wraps(init)
    def recorded(self, *args, **kwargs):
        self._serial = _MADE[0]
        _MADE[0] += 1
        init(self, *args, **kwargs)
        _POPENS.add(self)

    recorded.records = True
    subprocess.Popen.__init__ = recorded


def popens_since(serial: int) -> list[subprocess.Popen]:
    """The recorded Popens made since ``serial`` (a value of :func:`next_serial`)."""
    return [p for p in list(_POPENS) if p._serial >= serial]


def next_serial() -> int:
    """The number the next recorded Popen will get."""
    return _MADE[0]


@contextlib.contextmanager
def nothing_left_running(name: str):
    """Fail (AssertionError naming ``name`` and what was left) when the block leaves behind a
    process it started, running or exited and never waited for, or a non-daemon thread alive;
    the processes are killed and waited for first, so that the next block starts clean."""
    if not Path("/proc").is_dir():  # the process table is read from /proc
        yield
        return
    before, serial, threads = descendants(), next_serial(), set(threading.enumerate())
    yield
    left = _started(before)
    end = time.monotonic() + GRACE_S
    while any(alive(p) for p in left) and time.monotonic() < end:  # a process may be exiting
        time.sleep(0.1)
        left = _started(before)
    new_threads = [
        t
        for t in threading.enumerate()
        if t not in threads and not t.daemon and not t.name.startswith(LIFELONG_THREADS)
    ]
    for t in new_threads:
        t.join(timeout=max(end - time.monotonic(), 0.1))
    unwaited = {
        p.pid: _args(p) for p in popens_since(serial) if _unwaited(p) and not lifelong(_args(p))
    }
    problems = [
        f"process {p} ({'running' if alive(p) else 'exited, never waited for'}): {cmd[:200]}"
        for p, cmd in {**unwaited, **left}.items()
    ] + [f"thread {t.name!r}" for t in new_threads if t.is_alive()]
    stop_started(before, serial)
    if problems:
        raise AssertionError(f"{name} left behind: " + "; ".join(problems))


def _unwaited(p: subprocess.Popen) -> bool:
    if p.returncode is not None:
        return False
    return alive(p.pid) or p.poll() is not None  # exited: waited for now, and so reported


def _args(p: subprocess.Popen) -> str:
    return p.args if isinstance(p.args, str) else " ".join(map(str, p.args))


def stop_started(before: dict[int, str], serial: int) -> None:
    """Kill every process started since ``before`` (a :func:`descendants`) and every recorded
    Popen made since ``serial`` that was not waited for, and wait for each."""
    popens = [p for p in popens_since(serial) if p.returncode is None and not lifelong(_args(p))]
    pids = set(_started(before)) | {p.pid for p in popens}
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for popen in popens:
        popen.wait()
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                pipe.close()
    for pid in pids:  # children that no Popen knew of
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)


def _started(before: dict[int, str]) -> dict[int, str]:
    import multiprocessing

    multiprocessing.active_children()  # waits for multiprocessing's finished children
    return {p: cmd for p, cmd in descendants().items() if p not in before and not lifelong(cmd)}
