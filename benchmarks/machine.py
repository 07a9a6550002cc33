"""What every timing benchmark prints beside its figures: the CPU model, the number of CPUs and
the load average when it starts and when it ends (a figure taken beside busy processes is not the
idle machine's, and two CPU models differ by more than most changes measured here).

Each ``benchmarks/bench_*.py`` calls :func:`announce` first thing in its ``__main__`` block
(``tests/test_benchmarks.py`` keeps it so)."""

from __future__ import annotations

import atexit
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor where it has none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def announce() -> None:
    """Print the CPU model and the load now; print the load again when the process ends."""
    print(f"CPU: {cpu_model()}; {os.cpu_count()} CPUs; load average at the start: {load()}")
    atexit.register(_at_end)


def _at_end() -> None:
    try:
        print(f"load average at the end: {load()}", flush=True)
    except OSError:  # the reader went away (a pipe closed): nothing to tell
        pass
