"""Evaluation of a network on the IC, IC2 and IW sets, with the progress measures on IC."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from interp.probes import cache_patterns, progress_measures
from interp.task import Batch

__all__ = ["evaluate", "accuracy_and_loss"]


def accuracy_and_loss(logits: torch.Tensor, batch: Batch) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``logits [batch, L]`` against ``batch.target``."""
    acc = float((logits.argmax(-1) == batch.target).float().mean())
    loss = float(F.cross_entropy(logits, batch.target))
    return acc, loss


@torch.no_grad()
def evaluate(
    model, eval_sets: dict[str, Batch], *, measures: bool = True, chunk: int = 2048
) -> dict[str, float]:
    """Accuracy and loss on every evaluation set, and the progress measures on ``"ic"``.

    Returns:
        ``{name}_acc`` and ``{name}_loss`` for each set, plus the columns of
        :data:`interp.probes.MEASURE_NAMES` when ``measures`` is true and an ``"ic"`` set is given.
    """
    was_training = model.training
    model.eval()
    out: dict[str, float] = {}
    try:
        for name, batch in eval_sets.items():
            if name == "ic" and measures:
                logits, patterns = cache_patterns(model, batch, chunk=chunk)
                extra = progress_measures(patterns, logits, batch)
            else:
                logits = torch.cat(
                    [
                        model(batch.tokens[i : i + chunk], batch.positions[i : i + chunk])
                        for i in range(0, len(batch), chunk)
                    ]
                )
                extra = {}
            out[f"{name}_acc"], out[f"{name}_loss"] = accuracy_and_loss(logits, batch)
            out.update(extra)
    finally:
        model.train(was_training)
    return out
