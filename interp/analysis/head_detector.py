"""TransformerLens's head detector for the task's sequences: :func:`detect_head`.

``transformer_lens.head_detector.detect_head(model, seq, detection_pattern)`` scores every head of
a model against a detection pattern on text prompts (it tokenizes strings). This module's
:func:`detect_head` has the same name, arguments (a batch of the task in place of the prompts) and
meaning, and computes each head's score with TransformerLens's own
``compute_head_attention_similarity_score``, averaged over the sequences as TL averages over a
list of prompts. It works on any model :func:`interp.analysis.hooked.probed` accepts: this
toolkit's network, a TL ``HookedRootModule`` or a ``TransformerBridge`` on the token task.

The named patterns are TL's, built from each sequence's token identities: the token ids of a
token batch; in the vector task (continuous items, where "the same token" means "the same class",
as in :mod:`interp.analysis.probes`) an item or the query is its class and a label token is its
label. So ``previous_token_head`` is the previous-token head of layer 1 and ``induction_head``
(attend to the token after an earlier copy of the current one) scores the query's attention on
the label after an earlier item of its class, as the induction head of layer 2 does::

    scores = detect_head(model, sets["ic"], "induction_head")   # [n_layers, n_heads]
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import Tensor
from transformer_lens.head_detector import (
    HEAD_NAMES,
    compute_head_attention_similarity_score,
    get_duplicate_token_head_detection_pattern,
    get_induction_head_detection_pattern,
    get_previous_token_head_detection_pattern,
)

__all__ = ["HEAD_NAMES", "detect_head", "token_identities", "detection_patterns"]

_PATTERNS = {
    "previous_token_head": get_previous_token_head_detection_pattern,
    "duplicate_token_head": get_duplicate_token_head_detection_pattern,
    "induction_head": get_induction_head_detection_pattern,
}


def token_identities(batch) -> Tensor:
    """``[batch, pos]`` integer identities of the tokens: a token batch's ids; in the vector task
    the class of an item (and of the query), ``-1 - y`` for a label ``y`` (disjoint from
    classes)."""
    if not torch.is_floating_point(batch.tokens) and batch.tokens.ndim == 2:
        return batch.tokens.long()
    b, n = batch.item_classes.shape
    ids = torch.empty(b, 2 * n + 1, dtype=torch.long, device=batch.item_classes.device)
    ids[:, 0:-1:2] = batch.item_classes
    ids[:, 1:-1:2] = -1 - batch.item_labels
    ids[:, -1] = batch.query_class
    return ids


def detection_patterns(batch, name: str) -> Tensor:
    """TransformerLens's detection pattern ``name`` for every sequence ``[batch, pos, pos]``."""
    if name not in _PATTERNS:
        raise ValueError(
            f"detection_pattern={name!r} is invalid: a [pos, pos] tensor or one of {HEAD_NAMES}"
        )
    ids = token_identities(batch).cpu()
    return torch.stack([_PATTERNS[name](ids[i : i + 1]) for i in range(len(ids))])


@torch.no_grad()
def detect_head(
    model,
    batch,
    detection_pattern: Tensor | str,
    heads: list[tuple[int, int]] | dict[int, list[int]] | None = None,
    cache=None,
    *,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: str = "mul",
) -> Tensor:
    """Score every head (or ``heads``) against a detection pattern, as TransformerLens does.

    Args:
        model: anything :func:`interp.analysis.hooked.probed` accepts.
        batch: the sequences (TL: the prompts); scores are averaged over them.
        detection_pattern: a lower-triangular ``[pos, pos]`` tensor, or one of
            ``previous_token_head``, ``duplicate_token_head``, ``induction_head`` (built per
            sequence from its token identities, :func:`token_identities`).
        heads: only these heads, as ``[(layer, head)]`` or ``{layer: [heads]}``; the others
            score -1 (TL's convention).
        cache: the model's cache on ``batch`` (anything indexable by
            ``blocks.{l}.attn.hook_pattern``) to reuse; None runs the model.
        exclude_bos: ignore attention to the first token.
        exclude_current_token: ignore attention to the token itself.
        error_measure: ``mul`` (share of each head's attention on the pattern) or ``abs`` (1 -
            the mean absolute difference, scaled as TL scales it).

    Returns:
        ``[n_layers, n_heads]`` scores.
    """
    from interp.analysis.hooked import probed
    from interp.analysis.probes import cache_patterns

    if error_measure not in ("mul", "abs"):
        raise ValueError(f"error_measure={error_measure!r} is invalid: allowed values are mul, abs")
    pm = probed(model)
    if cache is None:
        _, patterns = cache_patterns(pm, batch)
    else:
        patterns = [cache[pm.pattern_hook(layer)] for layer in range(pm.n_layers)]
    n_pos = batch.tokens.shape[1]
    if isinstance(detection_pattern, str):
        per_seq = detection_patterns(batch, detection_pattern)
    else:
        pattern = torch.as_tensor(detection_pattern, dtype=torch.float32).cpu()
        if pattern.shape != (n_pos, n_pos) or not torch.equal(pattern, pattern.tril()):
            raise ValueError(
                f"detection_pattern must be a lower-triangular [{n_pos}, {n_pos}] tensor, got "
                f"shape {tuple(pattern.shape)}"
            )
        per_seq = pattern.expand(len(batch), n_pos, n_pos)
    n_heads = patterns[0].shape[1]
    if heads is None:
        layer_heads = {layer: list(range(n_heads)) for layer in range(pm.n_layers)}
    elif isinstance(heads, dict):
        layer_heads = heads
    else:
        layer_heads = defaultdict(list)
        for layer, head in heads:
            layer_heads[layer].append(head)
    scores = -torch.ones(pm.n_layers, n_heads)
    for layer, chosen in layer_heads.items():
        p = patterns[layer].float().cpu()
        for head in chosen:
            values = [
                compute_head_attention_similarity_score(
                    p[i, head],
                    detection_pattern=per_seq[i],
                    exclude_bos=exclude_bos,
                    exclude_current_token=exclude_current_token,
                    error_measure=error_measure,
                )
                for i in range(len(batch))
            ]
            scores[layer, head] = float(sum(values) / len(values))
    return scores
