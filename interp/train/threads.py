"""The thread policy of training and evaluation processes: one torch thread unless asked otherwise.

The network's shapes are small (batch 128 of 17 tokens, ``d_model = 128``): a second thread gains
nothing on an idle machine, and beside any other busy process torch's default (one thread per
core, spinning at every synchronisation) collapses to a small fraction of the one-thread rate.
``benchmarks/bench_load.py`` measures both beside a competing process. Every training run
(:class:`~interp.train.train_config.TrainConfig` ``num_threads``, default 1) and every
``induction-cliff`` command (:func:`interp.cli.main`) applies the policy; ``num_threads`` (or
``llc --threads``) overrides it. Many runs use many cores as many one-thread processes (``sweep``).

:func:`check_thread_counts` judges the thread and worker counts a user asks for against the cores
this process may run on (:func:`usable_cores`), before anything is started or written: more than
:data:`MAX_THREADS_PER_CORE` threads per core only makes every run slower, and a count far beyond
the machine ends in workers that cannot start their threads.
"""

from __future__ import annotations

import os

__all__ = [
    "DEFAULT_NUM_THREADS",
    "MAX_THREADS_PER_CORE",
    "apply_thread_policy",
    "check_thread_counts",
    "usable_cores",
]

DEFAULT_NUM_THREADS = 1
# Threads of all workers together, per core this process may run on: beyond this the runs only
# wait for each other (and a count far beyond the machine cannot even start its threads).
MAX_THREADS_PER_CORE = 4


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where the platform
    has none), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def check_thread_counts(
    threads,
    workers=None,
    *,
    threads_name: str = "num_threads",
    workers_name: str = "workers",
) -> None:
    """Refuse a thread count (and a count of concurrent workers with that many threads each)
    that is not an integer >= 1, or whose product exceeds :data:`MAX_THREADS_PER_CORE` times
    :func:`usable_cores`. ``threads`` None is the default, one; ``workers`` None is one process.

    Raises:
        ValueError: one line naming ``threads_name`` or ``workers_name``, the value and the bound.
    """
    cores = usable_cores()
    bound = MAX_THREADS_PER_CORE * cores
    where = f"this machine has {cores} usable core(s), so at most {bound} threads in all"
    for name, value in ((threads_name, threads), (workers_name, workers)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} is invalid: must be an integer >= 1")
        if value > bound:
            raise ValueError(f"{name}={value!r} is invalid: {where}")
    total = (threads or 1) * (workers or 1)
    if total > bound:
        raise ValueError(
            f"{workers_name}={workers!r} with {threads_name}={threads!r} is invalid: "
            f"{total} threads in all, but {where}"
        )


def apply_thread_policy(num_threads: int | None = None) -> int:
    """Set torch's intra-op thread count to ``num_threads`` (``None``: :data:`DEFAULT_NUM_THREADS`)
    and return it. Changes nothing when the count is already that."""
    import torch

    n = DEFAULT_NUM_THREADS if num_threads is None else int(num_threads)
    if n < 1:
        raise ValueError(f"num_threads={num_threads!r} is invalid: an integer >= 1")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
