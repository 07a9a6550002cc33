"""The settings every run of the transition law's grid shares, and the grids declared beside it
(:mod:`experiments.catalog.law_axes`, :mod:`experiments.catalog.transience`,
:mod:`experiments.catalog.early_warning`) start from: kept apart from the law's experiment so that
its page can read theirs without an import cycle."""

from __future__ import annotations

BASE = {
    "hidden_bias": "per_unit",
    "lr": 0.1,
    "n_eval": 1024,
    "eval_every": 100,
    "live_forecast": False,
    "num_threads": 1,
    "sample_on": "host",
    "backend": "fast",
}
"""What every point shares: paper-fig3's task and plain SGD (batch 128, the author's weight decay),
with per-unit hidden biases (the author's scalar biases collapse at these learning rates) and
lr 0.1 at the centre. The sampler and the backend are pinned (the host sampler and the fast path,
what the grid began with), so that a change of the toolkit's defaults never stops a run from
resuming and a run trained again equals its committed row."""
