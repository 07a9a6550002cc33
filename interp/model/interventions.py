"""Training-time interventions on attention heads, through hooks (after Singh et al. 2024).

Each intervention replaces an attention pattern in the forward pass, during training and
evaluation alike, to test which part of the circuit is necessary and how it moves the transition:

- ``clamp_prev_token``: layer 1 attends exactly to the previous token (token 0 to itself): the ideal
  previous-token head is given for free; only the rest of the circuit has to be learned.
- ``uniform_layer1``: layer 1 attends uniformly over its causal prefix: no previous-token head can
  form.
- ``uniform_layer2``: layer 2 attends uniformly over its causal prefix: no induction head can form.

The replaced pattern carries no gradient to that layer's ``W_Q`` and ``W_K`` (they stay at their
initial values up to weight decay); ``W_V`` still learns.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from interp.config.train_config import INTERVENTIONS as NAMES

__all__ = ["INTERVENTIONS", "intervention_hooks", "ideal_prev_token_pattern", "uniform_pattern"]


def ideal_prev_token_pattern(pattern: Tensor) -> Tensor:
    """``[batch, head, q, k]`` pattern with row ``t >= 1`` one-hot on ``t - 1`` and row 0 on 0."""
    n = pattern.shape[-1]
    ideal = torch.zeros(n, n, dtype=pattern.dtype, device=pattern.device)
    ideal[0, 0] = 1.0
    idx = torch.arange(1, n, device=pattern.device)
    ideal[idx, idx - 1] = 1.0
    return ideal.expand_as(pattern).clone()


def uniform_pattern(pattern: Tensor) -> Tensor:
    """``[batch, head, q, k]`` pattern uniform over each causal row."""
    n = pattern.shape[-1]
    causal = torch.ones(n, n, dtype=pattern.dtype, device=pattern.device).tril()
    return (causal / causal.sum(-1, keepdim=True)).expand_as(pattern).clone()


def _replace(fn: Callable[[Tensor], Tensor]):
    def hook(pattern: Tensor, hook) -> Tensor:  # TransformerLens hook signature
        return fn(pattern)

    return hook


INTERVENTIONS: dict[str, tuple[int, Callable[[Tensor], Tensor]]] = {
    "clamp_prev_token": (0, ideal_prev_token_pattern),
    "uniform_layer1": (0, uniform_pattern),
    "uniform_layer2": (1, uniform_pattern),
}
assert tuple(INTERVENTIONS) == NAMES, "TrainConfig's interventions are the ones carried out here"


def intervention_hooks(name: str, model, task=None) -> list[tuple[str, Callable]]:
    """Forward hooks ``[(hook_name, fn)]`` that carry out intervention ``name``.

    Use with ``model.hooks(fwd_hooks=...)`` or ``model.run_with_hooks``.
    """
    if name not in INTERVENTIONS:
        raise ValueError(
            f"intervention={name!r} is invalid: allowed values are {tuple(INTERVENTIONS)}"
        )
    layer, fn = INTERVENTIONS[name]
    if layer >= model.cfg.n_layers:
        raise ValueError(
            f"intervention={name!r} needs layer {layer}, the model has {model.cfg.n_layers}"
        )
    return [(f"blocks.{layer}.attn.hook_pattern", _replace(fn))]
