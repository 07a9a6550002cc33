"""How much of an attention layer's scores depends on positions alone, not on content.

A previous-token head must prefer the key one position back whatever the tokens are: its scores
need a part that depends on the positions only. With one-hot positions concatenated to the content
that part is ``p_i^T W_Q W_K^T p_j``. With RoPE and bias-free projections of zero-mean items there
is none: the rotated score ``q_i^T R_(j-i) k_j`` is a product of two content projections. Trainable
query/key biases ``a, b`` (``ModelConfig.qk_bias``) add the term ``a^T R_(j-i) b``, which depends on
the distance alone (Su, "RoPE + bias"); without RoPE a key bias adds the same number to every key
of a query and cancels in the softmax.

:func:`score_terms` measures this on the label rows of a layer (the query is the label ``l_i``, the
previous token is its item ``x_i``: the rows ILA1 reads):

- ``pos_margin``: the score of the previous token minus the mean score of the other causal keys,
  averaged over sequences (in logits). The average over sequences removes what depends on content
  (up to the correlation between tokens), so this is the positional preference for the previous
  token that every sequence shares.
- ``pos_margin_content_free``: the same margin with every content vector set to zero, so only the
  positional and bias terms are left (exactly ``0`` for RoPE without biases).
- ``pos_share``: the fraction of the row-centred score variance that the mean over sequences
  explains (``1``: the scores depend on positions only; ``0``: on content only). Rows are centred
  first because the softmax ignores a per-row constant (a key bias without RoPE adds one).

``induction-cliff measures RUN_DIR --score-terms`` adds the three, for layer 1, at every checkpoint.
"""

from __future__ import annotations

import torch

from interp.data.task import Batch

__all__ = ["score_terms", "layer_scores", "SCORE_TERMS"]

SCORE_TERMS = ("pos_margin", "pos_margin_content_free", "pos_share")
"""The names :func:`score_terms` returns (prefixed ``l{layer+1}_`` by the measures command)."""


@torch.no_grad()
def layer_scores(model, tokens: torch.Tensor, positions: torch.Tensor, layer: int) -> torch.Tensor:
    """Attention scores ``[batch, head, query, key]`` of ``layer`` (scaled, causally masked with
    ``-inf``, as the softmax sees them)."""
    name = f"blocks.{layer}.attn.hook_attn_scores"
    _, cache = model.run_with_cache(tokens, positions, names_filter=[name])
    return cache[name]


def _label_rows(n_pairs: int) -> torch.Tensor:
    """Token indices of the labels ``l_1 .. l_N`` in ``x1 l1 x2 l2 ... xN lN xq``."""
    return torch.arange(n_pairs) * 2 + 1


def _margins(scores: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Score of key ``t - 1`` minus the mean of the other causal keys, per row ``t``:
    ``[batch, head, len(rows)]``. Row ``t`` has ``t + 1`` causal keys (itself included)."""
    out = []
    for t in rows.tolist():
        row = scores[..., t, : t + 1]
        prev = row[..., t - 1]
        others = (row.sum(-1) - prev) / t
        out.append(prev - others)
    return torch.stack(out, dim=-1)


def _positional_share(scores: torch.Tensor, rows: torch.Tensor) -> float:
    """Fraction of the row-centred score variance on ``rows`` explained by the mean over the
    batch."""
    explained = total = 0.0
    for t in rows.tolist():
        row = scores[..., t, : t + 1].double()
        centred = row - row.mean(-1, keepdim=True)
        mean = centred.mean(0)  # [head, key]: the part every sequence shares
        explained += float((mean**2).sum()) * centred.shape[0]
        total += float((centred**2).sum())
    return explained / total if total > 0 else float("nan")


@torch.no_grad()
def score_terms(model, batch: Batch, *, layer: int = 0) -> dict[str, float]:
    """The positional part of ``layer``'s scores on the label rows of ``batch`` (module docstring).

    Args:
        model: an :class:`~interp.model.network.InductionNet`.
        batch: sequences of ``N`` pairs and a query (e.g. the run's IC set).
        layer: attention layer, 0-based (0 is the layer where the previous-token head forms).

    Returns:
        ``{"pos_margin", "pos_margin_content_free", "pos_share"}`` (averaged over heads and rows).
    """
    if batch.tokens.shape[1] < 3:
        raise ValueError("score_terms needs at least one item-label pair before the query")
    was_training = model.training
    model.eval()
    try:
        rows = _label_rows((batch.tokens.shape[1] - 1) // 2)
        scores = layer_scores(model, batch.tokens, batch.positions, layer)
        blank = layer_scores(model, torch.zeros_like(batch.tokens), batch.positions, layer)
    finally:
        model.train(was_training)
    return {
        "pos_margin": float(_margins(scores, rows).mean(0).mean()),
        "pos_margin_content_free": float(_margins(blank, rows).mean()),
        "pos_share": _positional_share(scores, rows),
    }
