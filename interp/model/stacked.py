"""Several models of the same shape trained together in one process ("stacked").

Seeds of one configuration differ only in their weights and their data, so their training steps
can run as one computation whose every weight has a leading model axis: the projections become
batched matrix products over models, and the fixed cost of each operation (dispatch, autograd,
thread start) is paid once for all of them. The optimisers (SGD, Adam) are elementwise, so one
optimiser over the stacked weights is S independent optimisers.

:class:`ModelStack` stacks the parameters of S :class:`~interp.model.network.InductionNet` instances
and re-points every model's parameters at its slice of the stack, so each model stays a normal
hooked network (evaluation, probes and checkpoints see the weights the optimiser just updated) while
the training step runs on the stack. :func:`stacked_logits` is the training forward: the mathematics
of :func:`interp.model.fast.fast_logits` (and so of the hooked model), with a model axis.

Supported: the two-layer, one-head networks that the fast path supports with one-hot, learned or
no positions (any attention scale, with or without ``qk_bias``): :func:`supports_stacking`.
Anything else trains one model per process.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.model.attention import attention_scale
from interp.model.fast import output_is_identity, query_row_one_head, supports_fast_path
from interp.model.network import InductionNet
from interp.model.position_range import positions_trusted
from interp.model.positional import LearnedAdded, NoPositions, OneHotConcat

__all__ = ["ModelStack", "stacked_logits", "supports_stacking"]


def supports_stacking(model: InductionNet) -> bool:
    """Whether :class:`ModelStack` can train copies of this model together."""
    return (
        supports_fast_path(model)
        and type(model.positional) in (OneHotConcat, LearnedAdded, NoPositions)
        and model.cfg.n_layers == 2
        and model.cfg.n_heads == 1
    )


class ModelStack:
    """The parameters of S same-shaped models as leaf tensors with a leading model axis.

    After construction, ``models[i]``'s parameters are views of slice ``i`` of the stack: an
    in-place optimiser step on :attr:`params` updates every model. Gradients live on the stack only.

    Args:
        models: S :class:`InductionNet` with the same config (each keeps its own initial weights).

    Attributes:
        params: ``{name: Tensor [S, *shape]}``, leaf tensors with ``requires_grad``.
        models: the models.
    """

    def __init__(self, models: Sequence[InductionNet]) -> None:
        if not models:
            raise ValueError("models is empty: give at least one model to stack")
        cfg = models[0].cfg
        for m in models:
            if m.cfg != cfg:
                raise ValueError("models have different configs; only identical shapes stack")
            if not supports_stacking(m):
                raise ValueError(
                    "this model cannot be stacked (needs 2 layers, 1 head, and one-hot, learned or "
                    f"no positions; got n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, "
                    f"positional={cfg.positional!r})"
                )
        self.models = list(models)
        self.cfg = cfg
        self.params: dict[str, Tensor] = {}
        for name, _ in models[0].named_parameters():
            stacked = torch.stack([dict(m.named_parameters())[name].detach() for m in models])
            self.params[name] = stacked.requires_grad_(True)
            for i, m in enumerate(models):
                dict(m.named_parameters())[name].data = stacked.data[i]
        ref = models[0]
        self._W_O = [ref.blocks[k].attn.W_O for k in range(2)]  # fixed buffers, shared
        self._attn = [ref.blocks[k].attn for k in range(2)]
        self._onehot = isinstance(ref.positional, OneHotConcat)
        self._learned = isinstance(ref.positional, LearnedAdded)
        self._n_hidden = len(ref.classifier.hidden)

    def __len__(self) -> int:
        return len(self.models)

    def parameters(self) -> list[Tensor]:
        """The stacked leaf tensors, in the models' ``parameters()`` order (for an optimiser)."""
        return list(self.params.values())


def _gather_rows(table: Float[Tensor, "S P m"], idx: Int[Tensor, "S b n"]) -> Tensor:
    """``table[s][idx[s]]`` for every model ``s``, as one embedding lookup: ``[S, b, n, m]``."""
    S, P, m = table.shape
    offset = (torch.arange(S, device=idx.device) * P).view(S, 1, 1)
    return F.embedding(idx + offset, table.reshape(S * P, m))


def stacked_logits(
    stack: ModelStack,
    tokens: Float[Tensor, "S batch pos d_content"],
    positions: Int[Tensor, "S batch pos"],
) -> Float[Tensor, "S batch L"]:
    """Query-token logits of every stacked model on its own batch (``tokens[s]`` for model s).

    The same function as :func:`interp.model.fast.fast_logits` of each model (equal to float
    rounding).
    """
    p, cfg = stack.params, stack.cfg
    S, b, n, D = tokens.shape
    if S != len(stack):
        raise ValueError(f"tokens has {S} models on its first axis; the stack has {len(stack)}")
    if stack._onehot:
        P = cfg.n_positions
        if not positions_trusted() and int(positions.max()) >= P:
            raise ValueError(f"positions reach {int(positions.max())}; the one-hot table has {P}")
        u = torch.cat([tokens, F.one_hot(positions, P).to(tokens.dtype)], -1)
    elif stack._learned:
        u = tokens + _gather_rows(p["positional.W_pos"], positions)
    else:
        u = tokens
    d = u.shape[-1]

    def proj(W: Tensor) -> Tensor:  # u @ W[s] per model; the one-hot half is a row gather
        if not stack._onehot:
            return u.view(S, b * n, d).bmm(W).view(S, b, n, -1)
        out = tokens.reshape(S, b * n, D).bmm(W[:, :D]).view(S, b, n, -1)
        return out + _gather_rows(W[:, D:], positions)

    attn1, attn2 = stack._attn
    n_keys = torch.arange(1, n + 1, device=u.device)
    causal = torch.ones(n, n, dtype=torch.bool, device=u.device).tril()
    WQ1, WK1, WV1 = (p[f"blocks.0.attn.{w}"][:, 0] for w in ("W_Q", "W_K", "W_V"))
    e = WQ1.shape[-1]
    bias = cfg.qk_bias
    bQ1, bK1, bQ2 = (
        (p["blocks.0.attn.b_Q"][:, 0], p["blocks.0.attn.b_K"][:, 0], p["blocks.1.attn.b_Q"][:, 0])
        if bias
        else (None, None, None)
    )
    if 2 * e >= d:  # W_Q W_K^T once per step (see interp.model.fast._scores)
        left = proj(WQ1 @ WK1.transpose(1, 2))
        if bias:  # b_Q W_K^T per model; the key bias cancels in the softmax
            left = left + bQ1[:, None].bmm(WK1.transpose(1, 2))[:, None]
        s1 = left.view(S * b, n, d) @ u.view(S * b, n, d).transpose(1, 2)
    else:
        q, k = proj(WQ1), proj(WK1)
        if bias:
            q, k = q + bQ1[:, None, None], k + bK1[:, None, None]
        q, k = q.view(S * b, n, e), k.view(S * b, n, e)
        s1 = q @ k.transpose(1, 2)
    scale1 = attention_scale(attn1.attn_scale, n_keys, attn1.d_head, attn1.n_train)
    s1 = s1 if isinstance(scale1, float) and scale1 == 1.0 else s1 * scale1
    a1 = torch.softmax(s1.masked_fill(~causal, float("-inf")), dim=-1)  # [S*b, n, n]

    W_O1, W_O2 = stack._W_O  # [1, e, d] each
    W_VO = WV1 if output_is_identity(W_O1) else WV1 @ W_O1[0]  # [S, d, d]
    u_flat = u.view(S * b, n, d)
    u_bar = (a1[:, -1:] @ u_flat).view(S, b, d)
    r_last = u[:, :, -1] + u_bar.bmm(W_VO)  # [S, b, d]
    scale2 = attention_scale(attn2.attn_scale, n_keys, attn2.d_head, attn2.n_train)
    WQ2, WK2, WV2 = (p[f"blocks.1.attn.{w}"][:, 0] for w in ("W_Q", "W_K", "W_V"))
    mixed = query_row_one_head(u_flat, a1, r_last, WQ2, WK2, W_VO, scale2, bQ2)[0]  # [S, b, d]
    out2 = mixed.bmm(WV2)
    if not output_is_identity(W_O2):
        out2 = out2 @ W_O2[0]
    x = r_last + out2
    for i in range(stack._n_hidden):
        W, bias = p[f"classifier.hidden.{i}.weight"], p[f"classifier.hidden.{i}.bias"]
        x = torch.relu(torch.baddbmm(bias[:, None], x, W.transpose(1, 2)))
    W, bias = p["classifier.readout.weight"], p.get("classifier.readout.bias")
    if bias is None:  # readout_init="author": no readout bias
        return x.bmm(W.transpose(1, 2))
    return torch.baddbmm(bias[:, None], x, W.transpose(1, 2))
