"""Keep freed memory in the process instead of handing it back to the kernel at every step.

A training step allocates and frees the same few-hundred-kilobyte to megabyte tensors thousands
of times. With glibc's defaults, blocks above the mmap threshold are mapped fresh and unmapped on
free, and the top of the heap is trimmed back to the kernel, so every step page-faults on (and the
kernel zeroes) memory it had a moment before. :func:`retain_freed_memory` raises glibc's mmap and
trim thresholds so those blocks are reused: the training step is about 15% faster at the paper's
shapes on one thread (``benchmarks/bench_train.py`` prints the step with and without it). The price
is that the process keeps its peak heap instead of shrinking after it; a training process does not
shrink anyway.

It changes only the allocator's thresholds (the numbers computed are the same), only on Linux with
glibc, and does nothing elsewhere. ``INDUCTION_CLIFF_MALLOC=default`` in the environment turns it
off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["retain_freed_memory"]

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

# glibc caps the mmap threshold at HEAP_MAX_SIZE / 2 (32 MiB on 64-bit); larger values are refused.
_MMAP_THRESHOLD = 32 * 2**20
_TRIM_THRESHOLD = 2**30
_TOP_PAD = 64 * 2**20

_done: bool | None = None


def retain_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once). Returns whether they are
    set: False off glibc, when ``INDUCTION_CLIFF_MALLOC=default``, or when glibc refused."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if (
        not sys.platform.startswith("linux")
        or os.environ.get("INDUCTION_CLIFF_MALLOC") == "default"
    ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or another libc without mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = [
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD),
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD),
        mallopt(_M_TOP_PAD, _TOP_PAD),
    ]
    _done = all(v == 1 for v in ok)
    return _done
