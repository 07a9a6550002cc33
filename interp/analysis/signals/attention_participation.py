"""``attention_participation``: how many keys layer 2's query row spreads its attention over.

Definition: for head ``h`` of layer 2 (the layer whose head becomes the induction head) and
sequence ``b``, ``p_j`` is the query row's attention on key ``j`` (the ``n_keys = 2N + 1``
positions the query sees) and its participation ratio is ``1 / sum_j p_j^2``. The measure is::

    participation = min_h  mean_b (1 / sum_j p_j^2)  /  n_keys

in ``(0, 1]``: ``1`` for a uniform row, ``1 / n_keys`` for a row all on one key. It is computed by
:func:`interp.analysis.probes.attention_sparsity` (``n_eff`` on the query row), the same
mathematics as the built-in ``l2_neff_query``, whose value it equals; registered under this name
so that the signals can be compared side by side.

Cost per evaluation (``compute`` on the ``paper-fig3`` IC set: 2048 sequences, 17 keys, one head;
median of 20 calls, one CPU thread): see :data:`COST`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.analysis.hooked import pattern_hook
from interp.analysis.measures import register_measure
from interp.analysis.probes import attention_sparsity
from interp.analysis.signals._common import query_row

__all__ = ["COST", "participation_per_head"]

COST = "0.3 ms"
"""Measured cost of one ``compute`` on the ``paper-fig3`` IC set (module docstring), beside about
170 ms for the evaluation's forward pass on the same set (``compute_measures``, same thread)."""


def participation_per_head(pattern: Tensor) -> Tensor:
    """``mean_b (1 / sum_j p_j^2) / n_keys`` of the last (query) row per head ``[head_index]``, of
    a pattern ``[batch, head_index, query_pos, key_pos]``."""
    last = torch.tensor([pattern.shape[-2] - 1], device=pattern.device)
    return attention_sparsity(pattern, last)["n_eff"]


register_measure(
    "attention_participation",
    lambda x: float(participation_per_head(x.pattern(1)).min()),
    reads=(pattern_hook(1),),
    rows=query_row,
    label="attention participation (L2 query)",
    color="#44AA99",
    direction="falling",
    description="layer 2: participation ratio 1/sum p^2 of the query row / keys, smallest head "
    f"(= l2_neff_query; {COST} per paper-fig3 evaluation)",
    panel="",
    optional=True,
)
