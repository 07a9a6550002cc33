"""``repetition_bias``: the query's attention bias towards earlier copies of its own item.

After Gopalani and Hu (2025), who report that attention favours repeated tokens before induction
heads form. On this task (:mod:`interp.data.task`: item ``i`` at position ``2i``, its label at
``2i + 1``, the query item last at ``2N``), "a copy of the query's item" is a context item of the
query's class (:meth:`~interp.data.task.Batch.query_class_mask`), present when the evaluation
set's burstiness puts the query's class in the context (every IC sequence).

Definition, for the attention pattern ``A`` of layer ``l`` and head ``h``, sequence ``b`` with
``N`` pairs and ``C_b`` its context item positions of the query's class (the query itself not
among them)::

    bias[l, h, b] = sum_{k in C_b} A[b, h, 2N, k]  -  |C_b| / (2N + 1)

the attention mass the query row puts on the copies minus the mass a uniform pattern over the
``2N + 1`` keys the query sees would put there (0 for uniform attention, ``1 - |C_b| / (2N + 1)``
for attention all on the copies). ``bias[l, h]`` is its mean over the sequences with
``|C_b| > 0`` (NaN where there are none, as on the IW set). The measure is the mean over the
layers of the largest head's value: ``mean_l max_h bias[l, h]``.

Cost per evaluation (``compute`` on the ``paper-fig3`` IC set: 2048 sequences of 17 positions, one
head, both layers' patterns; median of 20 calls, one CPU thread): see :data:`COST`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from interp.analysis.hooked import pattern_hook
from interp.analysis.measures import register_measure
from interp.analysis.signals._common import query_row
from interp.data.task import Batch

__all__ = ["COST", "repetition_bias", "repetition_bias_per_head"]

COST = "0.5 ms"
"""Measured cost of one ``compute`` on the ``paper-fig3`` IC set (module docstring), beside about
170 ms for the evaluation's forward pass on the same set (``compute_measures``, same thread)."""


def repetition_bias_per_head(patterns: Sequence[Tensor], batch: Batch) -> Tensor:
    """``bias[l, h]`` of the module docstring, ``[layer, head_index]``.

    Args:
        patterns: each layer's attention pattern ``[batch, head_index, query_pos, key_pos]`` (only
            the query row is read).
        batch: the sequences, with their metadata.
    """
    n = batch.n_pairs
    device = patterns[0].device
    copies = batch.query_class_mask().to(device)  # [batch, n_pairs]
    has = copies.any(-1)
    uniform = copies.sum(-1).double() / (2 * n + 1)  # [batch]
    rows = []
    for pattern in patterns:
        on_items = pattern[:, :, -1, 0 : 2 * n : 2].double()  # [batch, head, n_pairs]
        mass = (on_items * copies[:, None, :]).sum(-1)  # [batch, head]
        rows.append((mass - uniform[:, None])[has].mean(0))  # NaN where no sequence has copies
    return torch.stack(rows)


def repetition_bias(patterns: Sequence[Tensor], batch: Batch) -> float:
    """The measure: ``mean_l max_h bias[l, h]`` (module docstring)."""
    return float(repetition_bias_per_head(patterns, batch).max(dim=1).values.mean())


def _compute(x) -> float:
    return repetition_bias([x.pattern(0), x.pattern(1)], x.batch)


register_measure(
    "repetition_bias",
    _compute,
    reads=(pattern_hook(0), pattern_hook(1)),
    rows=query_row,
    label="repetition bias",
    color="#332288",
    direction="rising",
    description="query attention on earlier copies of its item minus a uniform pattern's share "
    f"(mean over layers of the largest head; {COST} per paper-fig3 evaluation)",
    panel="",
    optional=True,
)
