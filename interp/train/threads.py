"""The thread policy of training and evaluation processes: one torch thread unless asked otherwise.

The network's shapes are small (batch 128 of 17 tokens, ``d_model = 128``): a second thread gains
nothing on an idle machine, and beside any other busy process torch's default (one thread per
core, spinning at every synchronisation) collapses to a small fraction of the one-thread rate.
``benchmarks/bench_load.py`` measures both beside a competing process. Every training run
(:class:`~interp.train.train_config.TrainConfig` ``num_threads``, default 1) and every
``induction-cliff`` command (:func:`interp.cli.main`) applies the policy; ``num_threads`` (or
``llc --threads``) overrides it. Many runs use many cores as many one-thread processes (``sweep``).
"""

from __future__ import annotations

import torch

__all__ = ["DEFAULT_NUM_THREADS", "apply_thread_policy"]

DEFAULT_NUM_THREADS = 1


def apply_thread_policy(num_threads: int | None = None) -> int:
    """Set torch's intra-op thread count to ``num_threads`` (``None``: :data:`DEFAULT_NUM_THREADS`)
    and return it. Changes nothing when the count is already that."""
    n = DEFAULT_NUM_THREADS if num_threads is None else int(num_threads)
    if n < 1:
        raise ValueError(f"num_threads={num_threads!r} is invalid: an integer >= 1")
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
