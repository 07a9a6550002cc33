"""A fast training forward pass with exactly the mathematics of
:class:`~interp.model.network.InductionNet`.

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
and gradients). Encodings that act inside attention (a ``rotate``, ``setup_layer`` or
``score_bias`` hook: RoPE, CoPE, ALiBi) and training-time interventions fall back to the hooked
forward (:func:`supports_fast_path`).

With ``qk_bias`` the query bias enters as a fixed vector per head (``(u_i W_Q + b_Q) W_K^T`` scores
key ``j`` by its dot product with ``u_j``); the key bias adds ``q_i . b_K``, the same for every key
of query ``i``, which the softmax cancels, so the fast path leaves it out wherever ``W_Q W_K^T`` is
formed: there ``b_K`` gets no gradient (``None``; the hooked model's is zero up to rounding).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.model.attention import attention_scale
from interp.model.network import InductionNet
from interp.model.position_range import positions_trusted
from interp.model.positional import OneHotConcat

__all__ = [
    "fast_logits",
    "fast_patterns",
    "supports_fast_path",
    "query_row_one_head",
    "output_is_identity",
    "check_positions",
    "causal_masks",
]


def supports_fast_path(model: torch.nn.Module) -> bool:
    """Whether :func:`fast_logits` computes this model's function (else use ``model(...)``)."""
    # Other HookedRootModules (the minimal model, the token-task nets) take the hooked path, and
    # so do encodings that act inside attention. Those that only build the residual stream use
    # their own forward/combine here (one-hot: a row gather).
    return isinstance(model, InductionNet) and not model.positional.acts_in_attention


@functools.lru_cache(maxsize=16)
def causal_masks(n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(n_keys, future)`` of ``n`` tokens: the keys each query row sees (``1 .. n``) and the
    mask of the keys after each query (``[n, n]``, True above the diagonal). Built once per length
    and device, not at every step; read-only."""
    n_keys = torch.arange(1, n + 1, device=device)
    return n_keys, torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def _pattern(q: Tensor, k: Tensor, scale, future: Tensor | None) -> Tensor:
    # q [b, h, nq, e], k [b, h, nk, e] -> attention pattern [b, h, nq, nk]
    scores = q @ k.transpose(-1, -2)
    if not isinstance(scale, float) or scale != 1.0:
        scores = scores * scale
    if future is not None:
        scores = scores.masked_fill(future, float("-inf"))
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
    if len(model.blocks) == 2:
        return _two_layer(model, _Inputs(model, tokens, positions), rows=None)[0]
    return _forward(model, tokens, positions, keep_patterns=False)[0]


def fast_patterns(
    model: InductionNet,
    tokens: Float[Tensor, "batch pos d_content"],
    positions: Int[Tensor, "batch pos"],
    last_layer_rows: Int[Tensor, " rows"] | None = None,
) -> tuple[Float[Tensor, "batch L"], list[Float[Tensor, "batch head_index query_pos key_pos"]]]:
    """Logits and every layer's attention pattern, as ``blocks.{l}.attn.hook_pattern`` would
    record them, without hooks. Ignores any hooks on the model: use it only when none are active
    (:func:`interp.analysis.probes.cache_patterns` checks).

    Args:
        last_layer_rows: query positions of the last layer's pattern to compute (default: all).
            The query row is always computed; the other rows of that pattern are returned as
            zeros. The earlier layers are always complete. The progress measures read only item and
            query rows of layer 2 (:func:`interp.analysis.measures.last_layer_rows_read`).
    """
    if len(model.blocks) == 2:
        inp = _Inputs(model, tokens, positions)
        return _two_layer(
            model,
            inp,
            rows=torch.arange(tokens.shape[1], device=tokens.device)
            if last_layer_rows is None
            else last_layer_rows,
        )
    logits, patterns = _forward(model, tokens, positions, keep_patterns=True)
    if last_layer_rows is not None:
        keep = torch.zeros(tokens.shape[1], dtype=torch.bool, device=tokens.device)
        keep[last_layer_rows] = True
        keep[-1] = True  # the query row, as in the two-layer path
        patterns[-1] = patterns[-1] * keep[:, None]
    return logits, patterns


def check_positions(
    model: InductionNet, positions: Int[Tensor, "batch pos"], dtype: torch.dtype
) -> tuple[Int[Tensor, "batch pos"], Float[Tensor, "batch pos 1"] | None]:
    """One-hot positions as the fast path reads them: ``(index into the table, in-range mask)``,
    the mask ``None`` when every position is in the table (the usual case). Warns for positions
    past the table (:class:`~interp.model.positional.UntrainedPositionWarning`)."""
    if positions_trusted():  # in the table by construction: no host read of the positions
        return positions, None
    positions = model.positional._check_range(positions)
    P = model.cfg.n_positions
    in_range = positions < P
    mask = None if bool(in_range.all()) else in_range[..., None].to(dtype)
    return positions.clamp(max=P - 1), mask


class _Inputs:
    """Layer 1's input ``u`` (content, plus one-hot positions or added embeddings), with
    ``proj(W) = u @ W`` computed as a row gather for the one-hot half."""

    def __init__(self, model: InductionNet, tokens: Tensor, positions: Tensor) -> None:
        self.tokens, self.D = tokens, tokens.shape[-1]
        self.onehot = isinstance(model.positional, OneHotConcat)
        if self.onehot:
            self.pos_idx, self.in_range = check_positions(model, positions, tokens.dtype)
            P = model.cfg.n_positions
            # [tokens ; one_hot(position)], written in place: no int64 one-hot and no
            # concatenation to allocate and copy at every step.
            b, n, D = tokens.shape
            u = tokens.new_zeros(b, n, D + P)
            u[..., :D] = tokens
            index = (self.pos_idx + D)[..., None]
            if self.in_range is None:
                self.u = u.scatter_(-1, index, 1.0)
            else:
                self.u = u.scatter_(-1, index, self.in_range)
        else:
            self.u = model.positional.combine(tokens, model.positional(positions))

    def proj(self, W: Float[Tensor, "d_model m"]) -> Float[Tensor, "batch pos m"]:
        if not self.onehot:
            return self.u @ W
        b, n, D = self.tokens.shape
        out = (self.tokens.reshape(-1, D) @ W[:D]).view(b, n, -1)
        gathered = F.embedding(self.pos_idx, W[D:])  # its backward is much faster than indexing's
        return out + (gathered if self.in_range is None else gathered * self.in_range)


def _per_head_matrix(W: Tensor) -> Tensor:
    """``[h, d, m]`` -> ``[d, h * m]`` (heads side by side)."""
    return W.permute(1, 0, 2).reshape(W.shape[1], -1)


def output_is_identity(W_O: Float[Tensor, "head_index d_head d_model"]) -> bool:
    """Whether the heads' fixed output map (heads side by side) is the identity, as in the paper,
    so that its matmul can be skipped. Checked once per version of the buffer, not at every step."""
    cached = getattr(W_O, "_identity_at_version", None)
    if cached is not None and cached[0] == W_O._version:
        return cached[1]
    flat = W_O.reshape(-1, W_O.shape[-1])
    result = flat.shape[0] == flat.shape[1] and torch.equal(
        flat, torch.eye(flat.shape[0], dtype=flat.dtype, device=flat.device)
    )
    W_O._identity_at_version = (W_O._version, result)
    return result


def _value_output(attn, identity: bool | None = None) -> Tensor:
    """``W_V W_O`` per head, ``[h, d_model, d_model]`` (``W_V`` itself when ``W_O`` is the
    paper's fixed identity; ``identity``: that test's result, if already known)."""
    if identity is None:
        identity = output_is_identity(attn.W_O)
    if attn.n_heads == 1 and identity:
        return attn.W_V
    return attn.W_V @ attn.W_O


def _scaled(scores: Tensor, scale: Tensor | float, rows: Tensor | int | slice) -> Tensor:
    """Scores times the attention scale of their query rows (``scale`` from
    :func:`~interp.model.attention.attention_scale`: a float, or ``[query_pos, 1]``)."""
    if isinstance(scale, float):
        return scores if scale == 1.0 else scores * scale
    return scores * scale[rows]


def _project(x, W: Tensor) -> Tensor:
    """``x @ W`` of a residual or an :class:`_Inputs` (a module-level function, not a closure:
    the compiled path traces it, see :mod:`interp.model.compiled`)."""
    return x.proj(W) if isinstance(x, _Inputs) else x @ W


def _scores(attn, left, right) -> Tensor:
    """Attention scores ``(left W_Q)(right W_K)^T`` of every head, ``[b, h, rows, keys]``.

    ``left`` and ``right`` are either residuals ``[b, n, d]`` or an :class:`_Inputs`. With one
    head as wide as the residual, ``W_Q W_K^T`` is formed once per step and applied to one side
    only (a third fewer FLOPs than projecting both sides); otherwise q and k are projected.
    """
    h, d, e = attn.W_Q.shape
    if 2 * e >= d:
        G = attn.W_Q @ attn.W_K.transpose(-1, -2)  # [h, d, d]
        L = _project(left, _per_head_matrix(G))  # [b, rows, h * d]
        if attn.qk_bias:  # (u_i G + b_Q W_K^T) . u_j; the key bias cancels in the softmax
            L = L + (attn.b_Q[:, None] @ attn.W_K.transpose(-1, -2)).reshape(-1)
        L = L.view(L.shape[0], L.shape[1], h, d).transpose(1, 2)
        R = right.u if isinstance(right, _Inputs) else right
        return L @ R[:, None].transpose(-1, -2)
    q = _project(left, _per_head_matrix(attn.W_Q))
    k = _project(right, _per_head_matrix(attn.W_K))
    if attn.qk_bias:
        q, k = q + attn.b_Q.reshape(-1), k + attn.b_K.reshape(-1)
    q = q.view(q.shape[0], q.shape[1], h, e).transpose(1, 2)
    k = k.view(k.shape[0], k.shape[1], h, e).transpose(1, 2)
    return q @ k.transpose(-1, -2)


def query_row_one_head(
    u: Float[Tensor, "SB n d"],
    a1: Float[Tensor, "SB n n"],
    r_last: Float[Tensor, "S b d"],
    W_Q: Float[Tensor, "S d e"],
    W_K: Float[Tensor, "S d e"],
    W_VO: Float[Tensor, "S d d"],
    scale: Tensor | float,
    b_Q: Float[Tensor, "S e"] | None = None,
) -> tuple[Float[Tensor, "S b d"], Float[Tensor, "SB 1 n"]]:
    """Layer 2's query row of one-head layers, for ``S`` models of ``b`` sequences each.

    ``u`` is layer 1's input and ``a1`` its pattern (sequences of all models flattened), ``r_last``
    the query's residual after layer 1, ``W_VO = W_V W_O`` of layer 1. Key ``j`` scores
    ``r_j . w`` with ``w = W_K (W_Q^T r_last + b_Q)`` and ``r_j . w = u_j . w + a1_j . (u W_VO w)``;
    the attended residual is ``a2 u + (a2 a1) u W_VO``. A key bias would add the same score to
    every key, which the softmax cancels.

    Returns ``(sum_j a2_j r_j [S, b, d], a2 [S*b, 1, n])``.
    """
    S, b, d = r_last.shape
    q = r_last.bmm(W_Q)
    if b_Q is not None:
        q = q + b_Q[:, None]
    w = q.bmm(W_K.transpose(1, 2))  # [S, b, d]
    wv = w.bmm(W_VO.transpose(1, 2))  # W_VO w
    # [S*b, 2, d] @ [S*b, d, n]: u.w and u.(W_VO w) as two rows. The same product as
    # u @ [w, wv] ([S*b, n, 2]), but MKL's batched GEMM runs this layout ~5x faster at these
    # sizes, forward and backward (benchmarks/bench_train.py, docs/results/speed.md).
    uw = torch.stack([w, wv], dim=2).view(S * b, 2, d) @ u.transpose(1, 2)  # [S*b, 2, n]
    s2 = uw[:, 0] + (a1 * uw[:, 1, None, :]).sum(-1)  # + a1 @ (u W_VO w), elementwise
    a2 = torch.softmax(_scaled(s2, scale, -1), dim=-1)[:, None]  # [S*b, 1, n]
    a2a1 = (a2.transpose(1, 2) * a1).sum(1, keepdim=True)  # a2 @ a1, elementwise: [S*b, 1, n]
    m = torch.cat([a2, a2a1], dim=1) @ u  # [S*b, 2, d]: a2 u and (a2 a1) u
    return m[:, 0].view(S, b, d) + m[:, 1].view(S, b, d).bmm(W_VO), a2


def _two_layer(
    model: InductionNet,
    inp: _Inputs,
    rows: Tensor | None,
    identity: tuple[bool, bool] | None = None,
    masks: tuple[Tensor, Tensor] | None = None,
):
    """The two-layer network, reassociated so that layer 2 never projects every token for the
    logits.

    Layer 2's query row scores key ``j`` by ``r_j . w`` with ``w = W_K q``, and its output is
    ``(sum_j a_j r_j) W_V``: both need the residual ``r = u + A1 u W_VO`` only through products
    with a few vectors per sequence, so neither layer 1's values nor layer 2's keys and values are
    ever computed for every token. With ``rows`` (the pattern path), layer 2's pattern on those
    query rows is computed too (from the full residual, only when rows other than the query's are
    asked for), and the patterns are returned.

    ``identity`` (whether each layer's ``W_O`` is the identity) and ``masks`` (what
    :func:`causal_masks` returns) are computed here unless given: a compiled caller
    (:mod:`interp.model.compiled`) passes them, so that the traced function has no
    data-dependent test and no cached call.

    Returns ``(logits, [pattern_1, pattern_2])`` (``[]`` when ``rows`` is None).
    """
    attn1, attn2 = model.blocks[0].attn, model.blocks[1].attn
    u = inp.u
    b, n, d = u.shape
    n_keys, future = masks if masks is not None else causal_masks(n, u.device)
    if identity is None:
        identity = (output_is_identity(attn1.W_O), output_is_identity(attn2.W_O))

    # Layer 1: full pattern [b, h, n, n].
    scale1 = attention_scale(attn1.attn_scale, n_keys, attn1.d_head, attn1.n_train)
    s1 = _scaled(_scores(attn1, inp, inp), scale1, slice(None))
    a1 = torch.softmax(s1.masked_fill(future, float("-inf")), dim=-1)
    W_VO1 = _value_output(attn1, identity[0])  # [h, d, d]

    # The query's residual after layer 1: r_T = u_T + sum_h (a1_h[T] u) W_VO1_h.
    u_bar = a1[:, :, -1] @ u  # [b, h, d]
    if W_VO1.shape[0] == 1:  # one head: a plain matmul (no einsum dispatch, forward and back)
        r_last = torch.addmm(u[:, -1], u_bar[:, 0], W_VO1[0])
    else:
        r_last = u[:, -1] + torch.einsum("bhd,hdf->bf", u_bar, W_VO1)

    patterns = []
    scale2 = attention_scale(attn2.attn_scale, n_keys, attn2.d_head, attn2.n_train)
    # Layer 2's query row, without the per-token residual.
    if attn1.n_heads == 1 and attn2.n_heads == 1:
        # The paper's one-head layers: the algebra of the branch below, in (b)mm calls.
        mixed, a2 = query_row_one_head(
            u,
            a1[:, 0],
            r_last[None],
            attn2.W_Q,
            attn2.W_K,
            W_VO1,
            scale2,
            attn2.b_Q if attn2.qk_bias else None,
        )
        mixed = mixed[0][:, None]  # [b, 1, d] = sum_j a2_j r_j
    else:
        q2 = torch.einsum("bf,gfe->bge", r_last, attn2.W_Q)
        if attn2.qk_bias:
            q2 = q2 + attn2.b_Q
        w = torch.einsum("bge,gde->bgd", q2, attn2.W_K)  # [b, g, d]: r_j . w is key j's score
        v = torch.einsum("bgd,hfd->bhgf", w, W_VO1)  # W_VO1_h w
        c = torch.einsum("btf,bhgf->bhgt", u, v)  # (u W_VO1_h w)_t
        s2 = torch.einsum("btd,bgd->bgt", u, w) + torch.einsum("bhjt,bhgt->bgj", a1, c)
        a2 = torch.softmax(_scaled(s2, scale2, -1), dim=-1)  # [b, g, n]
        rho = torch.einsum("bgj,bhjt->bhgt", a2, a1)  # a2 a1_h
        mixed = a2 @ u + torch.einsum("bhgt,btd,hdf->bgf", rho, u, W_VO1)  # sum_j a2_j r_j
    if rows is not None:
        # The pattern path: layer 2's other requested rows need the full residual after layer 1.
        g = a2.shape[1]
        a2_full = a2.new_zeros(b, g, n, n)
        a2_full[:, :, -1] = a2
        other = rows[rows != n - 1]
        if other.numel():
            h = W_VO1.shape[0]
            vo = inp.proj(_per_head_matrix(W_VO1)).view(b, n, h, d).transpose(1, 2)
            r = u + (a1 @ vo).sum(1)  # [b, n, d]
            s2 = _scaled(_scores(attn2, r[:, other], r), scale2, other)  # [b, g, rows, n]
            a2_full[:, :, other] = torch.softmax(
                s2.masked_fill(future[other], float("-inf")), dim=-1
            )
        patterns = [a1, a2_full]
    if attn2.n_heads == 1:
        z2 = mixed[:, 0] @ attn2.W_V[0]
    else:
        z2 = torch.einsum("bgd,gde->bge", mixed, attn2.W_V).reshape(b, -1)
    if identity[1]:
        out2 = z2
    else:
        out2 = z2 @ attn2.W_O.reshape(-1, attn2.W_O.shape[-1])
    return model.classifier(r_last + out2), patterns


def _forward(model: InductionNet, tokens: Tensor, positions: Tensor, keep_patterns: bool):
    cfg = model.cfg
    b, n_pos, D = tokens.shape
    n_keys, future = causal_masks(n_pos, tokens.device)
    onehot = isinstance(model.positional, OneHotConcat)

    if onehot:
        positions = model.positional._check_range(positions)  # warns past the table
        P = cfg.n_positions
        in_range = positions < P
        # the usual case: skip the masking multiplies
        all_in_range = positions_trusted() or bool(in_range.all())
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
            gathered = F.embedding(pos_idx, W_qkv[D:])
            qkv = qkv + (gathered if all_in_range else gathered * in_range[..., None])
            q, k, v = (_heads(t, h, e) for t in qkv.split(h * e, dim=-1))
        else:
            kv = (resid.reshape(b * n_pos, -1) @ _stack(attn.W_K, attn.W_V)).view(b, n_pos, -1)
            k, v = (_heads(t, h, e) for t in kv.split(h * e, dim=-1))
            q_in = resid[:, -1:] if last_row_only else resid
            q = _heads(q_in @ _stack(attn.W_Q), h, e)
        if attn.qk_bias:  # [h, e] -> [1, h, 1, e]
            q, k = q + attn.b_Q[None, :, None], k + attn.b_K[None, :, None]
        scale = attention_scale(attn.attn_scale, n_keys, e, attn.n_train)
        # Heads summed through the fixed output map; the paper's is the identity: skip it.
        W_O = None if output_is_identity(attn.W_O) else attn.W_O.reshape(h * e, -1)
        if last_row_only:
            scale = scale[-1:] if isinstance(scale, Tensor) else scale
            pattern = _pattern(q[:, :, -1:], k, scale, None)  # the query row sees every key
        else:
            pattern = _pattern(q, k, scale, future)  # [b, h, pos, pos]
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
