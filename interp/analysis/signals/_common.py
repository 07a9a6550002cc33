"""What the signal measures share: the query row they read and the query's residual stream."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.data.task import Batch

__all__ = ["FINAL_RESID", "final_vectors", "query_row"]

FINAL_RESID = "blocks.1.hook_resid_post"
"""The residual stream after the last attention layer of the 2-layer network."""


def query_row(batch: Batch) -> Tensor:
    """The query's row (the last position): the only row of the last layer's pattern read."""
    return torch.tensor([batch.tokens.shape[1] - 1], device=batch.tokens.device)


def final_vectors(x) -> Tensor:
    """The final (query) position's residual vectors after the last attention layer
    ``[batch, d_model]`` of a :class:`~interp.analysis.measures.MeasureInputs`, in float64."""
    return x[FINAL_RESID][:, -1].double()
