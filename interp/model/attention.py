"""Causal self-attention with TransformerLens hook points and a pluggable score scale.

The paper's layer (docs/science.md section 2) is
``u_t <- u_t + sum_{j<=t} softmax_j((W_K u_j).(W_Q u_t)) W_V u_j``:
no biases, no ``1/sqrt(d)`` scale, a token may attend to itself, and no separate output projection.
``W_O`` is kept as a fixed (non-trainable) identity so that weights and hooks have TransformerLens
shapes (``W_O [n_heads, d_head, d_model]``).

Position-aware attention asks the model's positional encoding (:mod:`interp.model.positional`)
through its hooks, with no branch for a particular encoding:

- an encoding that overrides ``rotate`` (RoPE) transforms q and k: ``hook_q``/``hook_k`` record
  the unrotated queries and keys, and the extra hook points ``hook_rot_q``/``hook_rot_k`` the
  rotated ones used in the scores (as in TransformerLens);
- ``setup_layer(attn)`` adds the encoding's per-layer parameters and hook points (CoPE: the table
  ``W_cope`` and ``hook_cope_gates``/``hook_cope_positions``);
- an encoding that overrides ``score_bias`` (CoPE, ALiBi) adds a term to the scaled, causally
  masked scores, which are then masked causally again.

These hook points exist only in layers whose encoding needs them. With the other encodings the
forward pass is the original one, operation for operation.

``qk_bias=True`` adds trainable biases ``b_Q``, ``b_K`` (``[n_heads, d_head]``, zero-initialised,
TransformerLens names) to the queries and keys before ``hook_q``/``hook_k`` (and before any
rotation). Without rotation a key bias adds ``q_i . b_K``, the same for every key of query ``i``,
which the softmax cancels; under RoPE the rotated bias depends on ``i - j`` and does not cancel.
"""

from __future__ import annotations

import math

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from interp.config.model_config import ATTN_SCALES
from interp.model.positional import PositionalEncoding

__all__ = ["Attention", "ATTN_SCALES", "attention_scale"]


def attention_scale(
    kind: str, n_keys: Tensor, d_head: int, n_train: int
) -> Float[Tensor, "query_pos 1"] | float:
    """Multiplier of the attention scores of each query row.

    Args:
        kind: ``"none"`` (the paper: 1), ``"sqrt"`` (``1/sqrt(d_head)``) or ``"log_n"``, the
            entropy-invariant ``log_{n_train}(n_i) / sqrt(d_head)`` with ``n_i`` the keys row ``i``
            sees (Su's log-n scaling). It equals ``1/sqrt(d_head)`` when ``n_i = n_train``.
        n_keys: visible keys per query row, ``[query_pos]``.
        d_head: head width.
        n_train: training sequence length (keys visible to the last query at training length).
    """
    if kind == "none":
        return 1.0
    if kind == "sqrt":
        return 1.0 / math.sqrt(d_head)
    if kind == "log_n":
        # Row 0 sees one key: log(1) = 0 makes its (single-entry) softmax unaffected anyway.
        scale = torch.log(n_keys.float()) / math.log(n_train) / math.sqrt(d_head)
        return scale[:, None]
    raise ValueError(f"attn_scale={kind!r} is invalid: allowed values are {ATTN_SCALES}")


class Attention(nn.Module):
    """One causal attention layer of ``n_heads`` heads.

    Args:
        d_model: residual width.
        n_heads: heads (the paper: 1).
        d_head: head width (the paper: ``d_model``).
        attn_scale: one of :data:`ATTN_SCALES`.
        n_train: training sequence length, used by the ``log_n`` scale.
        positional: the model's positional encoding (rotations of q and k, per-layer parts,
            score biases).
        init_std: standard deviation of the ``W_Q, W_K, W_V`` entries (the paper: ``1/sqrt(D)``).
        qk_bias: add trainable biases ``b_Q``, ``b_K`` to queries and keys (the paper: no).
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_head: int,
        attn_scale: str,
        n_train: int,
        positional: PositionalEncoding,
        init_std: float,
        qk_bias: bool = False,
    ) -> None:
        super().__init__()
        self.n_heads, self.d_head, self.attn_scale, self.n_train = (
            n_heads,
            d_head,
            attn_scale,
            n_train,
        )
        self.W_Q = nn.Parameter(torch.randn(n_heads, d_model, d_head) * init_std)
        self.W_K = nn.Parameter(torch.randn(n_heads, d_model, d_head) * init_std)
        self.W_V = nn.Parameter(torch.randn(n_heads, d_model, d_head) * init_std)
        self.qk_bias = qk_bias
        if qk_bias:
            self.b_Q = nn.Parameter(torch.zeros(n_heads, d_head))
            self.b_K = nn.Parameter(torch.zeros(n_heads, d_head))
        # Fixed output map: identity for one head of width d_model (the paper); heads are summed.
        W_O = torch.zeros(n_heads, d_head, d_model)
        W_O[:, : min(d_head, d_model), : min(d_head, d_model)] = torch.eye(min(d_head, d_model))
        self.register_buffer("W_O", W_O)
        # Kept outside the module tree so the positional parameters are registered once.
        self._positional = [positional]

        self.hook_q = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_k = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_v = HookPoint()  # [batch, pos, head_index, d_head]
        self.hook_attn_scores = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_pattern = HookPoint()  # [batch, head_index, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]

        # Any encoding that overrides rotate() (RoPE) gets its q/k transform and the rot hooks.
        self.rotary = positional.rotates
        self.biases_scores = positional.biases_scores
        if self.rotary:
            self.hook_rot_q = HookPoint()  # [batch, pos, head_index, d_head]
            self.hook_rot_k = HookPoint()  # [batch, pos, head_index, d_head]
        positional.setup_layer(self)

    def forward(
        self, resid: Float[Tensor, "batch pos d_model"], positions: Tensor
    ) -> Float[Tensor, "batch pos d_model"]:
        q = einsum(
            resid,
            self.W_Q,
            "batch pos d_model, head_index d_model d_head -> batch pos head_index d_head",
        )
        k = einsum(
            resid,
            self.W_K,
            "batch pos d_model, head_index d_model d_head -> batch pos head_index d_head",
        )
        v = einsum(
            resid,
            self.W_V,
            "batch pos d_model, head_index d_model d_head -> batch pos head_index d_head",
        )
        if self.qk_bias:
            q, k = q + self.b_Q, k + self.b_K
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if self.rotary:
            q, k = self._positional[0].rotate(q, k, positions)
            q, k = self.hook_rot_q(q), self.hook_rot_k(k)
        scores = einsum(
            q,
            k,
            "batch query_pos head_index d_head, batch key_pos head_index d_head "
            "-> batch head_index query_pos key_pos",
        )
        n_pos = resid.shape[1]
        n_keys = torch.arange(1, n_pos + 1, device=resid.device)
        scores = scores * attention_scale(self.attn_scale, n_keys, self.d_head, self.n_train)
        causal = torch.ones(n_pos, n_pos, dtype=torch.bool, device=resid.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        if self.biases_scores:
            bias = self._positional[0].score_bias(
                self, scores=scores, q=q, k=k, positions=positions, causal=causal
            )
            scores = (scores + bias).masked_fill(~causal, float("-inf"))
        scores = self.hook_attn_scores(scores)
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        z = self.hook_z(
            einsum(
                pattern,
                v,
                "batch head_index query_pos key_pos, batch key_pos head_index d_head "
                "-> batch query_pos head_index d_head",
            )
        )
        return einsum(
            z,
            self.W_O,
            "batch pos head_index d_head, head_index d_head d_model -> batch pos d_model",
        )
