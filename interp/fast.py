"""A fast training forward pass with exactly the mathematics of :class:`~interp.model.InductionNet`.

Training needs only the logits of the query token, and the hooked model computes more than that.
:func:`fast_logits` reads the hooked model's own parameters (so the optimiser updates the one model
that evaluation and probes use) and skips the work the loss does not depend on:

- **one-hot positions are a row gather, not a matmul**: with the paper's concatenated one-hot
  encoding, ``[x ; e_p] @ W = x @ W[:D] + W[D + p]``; layer 1's projections shrink from
  ``d_model = 128`` to ``D = 63`` input dimensions;
- **the last layer needs only the query's row**: its keys and values are needed for every token, its
  query and its attention row only for the last token;
- **no hook points** are called.

The result equals the hooked forward to float rounding (``tests/interp/test_fast.py`` checks logits
and gradients). Encodings that act inside attention (anything with a non-trivial ``rotate``) and
training-time interventions fall back to the hooked forward (:func:`supports_fast_path`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.attention import attention_scale
from interp.model import InductionNet
from interp.positional import LearnedAdded, NoPositions, OneHotConcat

__all__ = ["fast_logits", "fast_patterns", "supports_fast_path"]


def supports_fast_path(model: InductionNet) -> bool:
    """Whether :func:`fast_logits` computes this model's function (else use ``model(...)``)."""
    # Other HookedRootModules (the minimal model, the token-task nets) take the hooked path.
    return isinstance(model, InductionNet) and type(model.positional) in (
        OneHotConcat,
        LearnedAdded,
        NoPositions,
    )


def _pattern(q: Tensor, k: Tensor, scale, causal: Tensor | None) -> Tensor:
    # q [b, h, nq, e], k [b, h, nk, e] -> attention pattern [b, h, nq, nk]
    scores = q @ k.transpose(-1, -2)
    if not isinstance(scale, float) or scale != 1.0:
        scores = scores * scale
    if causal is not None:
        scores = scores.masked_fill(~causal, float("-inf"))
    return torch.softmax(scores, dim=-1)


def _stack(*weights: Tensor) -> Tensor:
    """``[h, d_model, e]`` weights side by side as one ``[d_model, n * h * e]`` matrix."""
    return torch.cat([w.permute(1, 0, 2).reshape(w.shape[1], -1) for w in weights], dim=-1)


def _heads(t: Tensor, h: int, e: int) -> Tensor:
    """``[b, pos, h*e]`` -> ``[b, h, pos, e]``."""
    return t.view(t.shape[0], t.shape[1], h, e).transpose(1, 2)


def fast_logits(
    model: InductionNet,
    tokens: Float[Tensor, "batch pos d_content"],
    positions: Int[Tensor, "batch pos"],
) -> Float[Tensor, "batch L"]:
    """Query-token logits of ``model``, computed without hooks and without unused work."""
    return _forward(model, tokens, positions, keep_patterns=False)[0]


def fast_patterns(
    model: InductionNet,
    tokens: Float[Tensor, "batch pos d_content"],
    positions: Int[Tensor, "batch pos"],
) -> tuple[Float[Tensor, "batch L"], list[Float[Tensor, "batch head_index query_pos key_pos"]]]:
    """Logits and every layer's full attention pattern, as ``blocks.{l}.attn.hook_pattern`` would
    record them, without hooks. Ignores any hooks on the model: use it only when none are active
    (:func:`interp.probes.cache_patterns` checks)."""
    return _forward(model, tokens, positions, keep_patterns=True)


def _forward(model: InductionNet, tokens: Tensor, positions: Tensor, keep_patterns: bool):
    cfg = model.cfg
    b, n_pos, D = tokens.shape
    n_keys = torch.arange(1, n_pos + 1, device=tokens.device)
    causal = torch.ones(n_pos, n_pos, dtype=torch.bool, device=tokens.device).tril()
    onehot = isinstance(model.positional, OneHotConcat)

    if onehot:
        P = cfg.n_positions
        in_range = positions < P
        all_in_range = bool(in_range.all())  # the usual case: skip the masking multiplies
        pos_idx = positions.clamp(max=P - 1)
        resid = torch.cat(
            [tokens, F.one_hot(pos_idx, P).to(tokens.dtype) * in_range[..., None]]
            if not all_in_range
            else [tokens, F.one_hot(pos_idx, P).to(tokens.dtype)],
            -1,
        )
    else:
        resid = model.positional.combine(tokens, model.positional(positions))

    patterns = []
    n_layers = len(model.blocks)
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        h, e = attn.n_heads, attn.d_head
        # The last layer needs its query and attention row for the last token only (unless the
        # full pattern is asked for).
        last_row_only = layer == n_layers - 1 and not keep_patterns
        if layer == 0 and onehot:
            # [x ; e_p] @ W == x @ W[:D] + W[D + p]: a row gather replaces the position half of the
            # matmul. One GEMM for q, k and v of all heads.
            W_qkv = _stack(attn.W_Q, attn.W_K, attn.W_V)  # [d_model, 3*h*e]
            qkv = (tokens.reshape(-1, D) @ W_qkv[:D]).view(b, n_pos, -1)
            gathered = W_qkv[D:][pos_idx]
            qkv = qkv + (gathered if all_in_range else gathered * in_range[..., None])
            q, k, v = (_heads(t, h, e) for t in qkv.split(h * e, dim=-1))
        else:
            kv = (resid.reshape(b * n_pos, -1) @ _stack(attn.W_K, attn.W_V)).view(b, n_pos, -1)
            k, v = (_heads(t, h, e) for t in kv.split(h * e, dim=-1))
            q_in = resid[:, -1:] if last_row_only else resid
            q = _heads(q_in @ _stack(attn.W_Q), h, e)
        scale = attention_scale(attn.attn_scale, n_keys, e, attn.n_train)
        W_O = attn.W_O.reshape(h * e, -1)  # heads summed through the fixed output map
        # The paper's W_O is a fixed identity (one head of width d_model): skip that matmul.
        if W_O.shape[0] == W_O.shape[1] and torch.equal(
            W_O, torch.eye(W_O.shape[0], device=W_O.device)
        ):
            W_O = None
        if last_row_only:
            scale = scale[-1:] if isinstance(scale, Tensor) else scale
            pattern = _pattern(q[:, :, -1:], k, scale, None)  # the query row sees every key
        else:
            pattern = _pattern(q, k, scale, causal)  # [b, h, pos, pos]
            patterns.append(pattern)
        if layer == n_layers - 1:
            z_last = pattern[:, :, -1:] @ v  # [b, h, 1, e]
            z_last = z_last[:, :, 0].reshape(b, h * e)
            final = resid[:, -1] + (z_last if W_O is None else z_last @ W_O)
        else:
            z = pattern @ v  # [b, h, pos, e]
            z = z.transpose(1, 2).reshape(b, n_pos, h * e)
            resid = resid + (z if W_O is None else z @ W_O)
    logits = model.classifier(final)
    return logits, patterns
