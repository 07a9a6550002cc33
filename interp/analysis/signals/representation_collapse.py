"""``representation_collapse``: how alike the query's residual stream is across sequences.

Definition: ``x_b`` is the residual stream at the final (query) position after the last attention
layer (``blocks.1.hook_resid_post[b, -1]`` of the 2-layer network) for each of the ``n``
sequences of the evaluation batch, and ``u_b = x_b / |x_b|``. The measure is the mean cosine
similarity over the ``n (n - 1)`` ordered pairs of distinct sequences::

    collapse = (|sum_b u_b|^2 - sum_b |u_b|^2) / (n (n - 1))

which is ``1`` when every sequence maps to the same direction, ``0`` for mutually orthogonal
vectors and at least ``-1 / (n - 1)``. A zero vector (no direction) counts as ``u_b = 0``; with
fewer than two sequences the value is NaN. Computed in float64, in ``O(n d)``.

Cost per evaluation (``compute`` on the ``paper-fig3`` IC set: 2048 sequences, ``d_model`` 128;
median of 20 calls, one CPU thread): see :data:`COST`. Reading a residual stream makes
evaluation run the hooked model on that hook (:func:`interp.analysis.measures.compute_measures`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.analysis.measures import register_measure
from interp.analysis.signals._common import FINAL_RESID, final_vectors

__all__ = ["COST", "mean_pairwise_cosine"]

COST = "1.2 ms"
"""Measured cost of one ``compute`` on the ``paper-fig3`` IC set (module docstring), beside about
170 ms for the evaluation's forward pass on the same set (``compute_measures``, same thread)."""


def mean_pairwise_cosine(vectors: Tensor) -> float:
    """Mean cosine similarity over ordered pairs of distinct rows of ``vectors [n, d]`` (module
    docstring)."""
    n = vectors.shape[0]
    if n < 2:
        return float("nan")
    v = vectors.double()
    norms = v.norm(dim=-1, keepdim=True)
    u = torch.where(norms > 0, v / norms.clamp(min=torch.finfo(v.dtype).tiny), 0.0)
    total = u.sum(0)
    return float(((total @ total) - (u * u).sum()) / (n * (n - 1)))


register_measure(
    "representation_collapse",
    lambda x: mean_pairwise_cosine(final_vectors(x)),
    reads=(FINAL_RESID,),
    label="representation collapse",
    color="#117733",
    direction="falling",
    description="mean pairwise cosine of the query's residual after layer 2 across sequences "
    f"(1: all alike; {COST} per paper-fig3 evaluation)",
    panel="",
    optional=True,
)
