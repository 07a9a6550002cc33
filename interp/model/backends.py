"""The training loss under each ``TrainConfig.backend``: which forward computes it.

- ``fast``: :func:`interp.model.fast.fast_logits` where it applies (no hooks on the model, an
  encoding that does not act inside attention), else the hooked forward;
- ``compiled``: the fast path's loss compiled (:class:`interp.model.compiled.CompiledLoss`) where
  it applies (the two-layer one-hot network, on the CPU), else as ``fast``;
- ``hooked``: always the hooked forward;
- ``auto``: ``fast`` or ``compiled``, chosen by the training loop for the run's steps
  (:mod:`interp.train.backend_choice`); here, as ``fast``.

All three compute the same function, equal to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.model.fast import fast_logits, supports_fast_path

__all__ = ["training_loss", "stacks"]


def stacks(backend: str, device: str | torch.device) -> bool:
    """Whether runs of ``backend`` on ``device`` can train stacked (:mod:`interp.model.stacked`,
    the fast path with a model axis): ``fast``, ``auto`` (stacked, it trains as ``fast``), and
    ``compiled`` where it does not compile (off the CPU,
    :func:`interp.model.compiled.compiles_on`)."""
    from interp.model.compiled import compiles_on

    return backend in ("fast", "auto") or (backend == "compiled" and not compiles_on(device))


def training_loss(
    model: torch.nn.Module, backend: str, hooked: bool = False
) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """``loss(tokens, positions, target)``: the cross-entropy of the query's label under
    ``model``, computed as ``backend`` says (``hooked``: hooks are active on the model, so only
    the hooked forward sees them)."""
    fast = backend in ("fast", "compiled", "auto") and not hooked and supports_fast_path(model)
    if fast and backend == "compiled":
        from interp.model.compiled import CompiledLoss, supports_compile

        if supports_compile(model):
            return CompiledLoss(model)
    if fast:
        return lambda tokens, positions, target: F.cross_entropy(
            fast_logits(model, tokens, positions), target
        )
    return lambda tokens, positions, target: F.cross_entropy(model(tokens, positions), target)
