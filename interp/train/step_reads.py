"""What a training step reads on the host, and when: nothing at most steps.

A step that reads a tensor's value in Python (``loss.item()``, ``int(positions.max())``, ``bool``
of a comparison) waits for the device to finish everything queued before it; on a GPU that
starves the device at every step. The training loop instead sums the loss on the device and reads
the sum once per evaluation (:func:`loss_read_due`, :func:`read_loss_sums`), and skips the range
checks of positions that lie in the table by construction (:func:`positions_in_range_of`).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch

from interp.data.device_sampler import draws
from interp.model.position_range import positions_in_range

__all__ = [
    "positions_in_range_of",
    "add_loss",
    "add_stacked_losses",
    "loss_read_due",
    "read_loss_sums",
]


def positions_in_range_of(run: Any):
    """:func:`~interp.model.position_range.positions_in_range` for a run whose training positions
    lie in its model's table by construction (the in-context task's sampler draws offsets in
    ``[0, P - seq_len]``, a table of ``n_positions >= max(P, seq_len)`` holds them all), so its
    steps skip the per-step range checks; else a context that changes nothing."""
    generator, n_positions = getattr(run, "generator", None), None
    if generator is not None and draws(generator):  # the task's own sampler
        n_positions = getattr(getattr(run.model, "cfg", None), "n_positions", None)
    task = getattr(generator, "config", None)
    if n_positions is not None and max(task.P, task.seq_len) <= n_positions:
        return positions_in_range
    return contextlib.nullcontext


def loss_read_due(run: Any) -> bool:
    """Whether the step being taken is the last before an evaluation (or the run's end): the
    only steps that read the summed training loss on the host (a step that waits for the device
    at every step would starve a GPU). A non-finite loss is found there, so a diverging run
    stops at most ``eval_every`` steps later, before that evaluation writes anything."""
    done = run.step + 1
    return done % run.cfg.eval_every == 0 or done >= run.cfg.steps


def read_loss_sums(total: torch.Tensor, runs: list) -> list[float]:
    """Each run's summed loss since its last evaluation, read once; a run whose sum is not
    finite (a step's loss became NaN or inf since then) stops as diverged."""
    values = total.reshape(-1).tolist()  # the one host read of the losses per evaluation
    for run, value in zip(runs, values):
        if not math.isfinite(value):
            raise run.diverged(value)
    return values


def add_loss(run: Any, loss: torch.Tensor) -> None:
    """Add a step's loss to ``run.loss_sum`` on the device (a float after each read, a tensor
    between them); read it on the host when an evaluation is next."""
    run.loss_sum = run.loss_sum + loss.detach()
    run.loss_count += 1
    if loss_read_due(run):
        run.loss_sum = read_loss_sums(run.loss_sum, [run])[0]


def add_stacked_losses(total: torch.Tensor | None, losses: torch.Tensor, runs: list):
    """Add a stacked step's ``losses`` (one per run) to ``total``, their sum since the last
    evaluation on the device, and return it; each run's ``loss_sum`` is its element (a view, so a
    stop between evaluations saves it), a float after each read."""
    if total is None or runs[0].loss_count == 0:  # the first step since an evaluation
        before = [float(r.loss_sum) if r.loss_count else 0.0 for r in runs]  # a resumed run's
        total = torch.tensor(before, dtype=losses.dtype, device=losses.device)
        for i, run in enumerate(runs):
            run.loss_sum = total[i]
    total.add_(losses.detach())
    for run in runs:
        run.loss_count += 1
    if loss_read_due(runs[0]):
        for run, value in zip(runs, read_loss_sums(total, runs)):
            run.loss_sum = value
    return total
