"""Progress measures of the induction circuit (docs/science.md section 3), from hooked activations.

The functions here are the mathematics; :mod:`interp.analysis.measures` registers them as the
progress measures that evaluation writes to ``metrics.csv`` (``ila1``, ``tila2``, ...), and
:func:`interp.analysis.measures.progress_measures` computes every registered one.

Every probe is a plain function of attention patterns (or a model) and a
:class:`~interp.data.task.Batch`, returning numbers or tensors with documented shapes. Patterns come
from ``model.run_with_cache(..., names_filter=PATTERN_HOOKS)``; see :func:`cache_patterns`. What a
model must provide for them (its hooks, how it is fed a batch) is one contract,
:mod:`interp.analysis.hooked`: this toolkit's network, any TransformerLens ``HookedRootModule``
with TL hook names and a ``TransformerBridge`` on the token task
(:mod:`interp.data.token_task`) qualify.

Masks are built from the batch's metadata (item classes and labels), not from token ids: in this
task tokens are continuous vectors, so "the same token" means "an item of the same class".

Position conventions (see :mod:`interp.data.task`): item ``i`` at ``2i``, its label at ``2i + 1``,
query at ``2N``. Layer indices are 0-based in hook names: layer 1 of the paper is ``blocks.0``,
layer 2 is ``blocks.1``. With several heads, scalar measures report the head with the largest value.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.analysis.hooked import ProbedModel, pattern_hook, probed
from interp.data.task import Batch

__all__ = [
    "PATTERN_HOOKS",
    "pattern_hook",
    "cache_patterns",
    "hooks_active",
    "ila1",
    "tila2",
    "tla2",
    "cla",
    "prev_token_mask",
    "induction_mask",
    "masked_attention_score",
    "prev_token_score",
    "induction_score",
    "attention_sparsity",
    "copied_item_probe",
]

Pattern = Float[Tensor, "batch head_index query_pos key_pos"]


def PATTERN_HOOKS(name: str) -> bool:  # noqa: N802 - used as a names_filter constant
    """``names_filter`` that keeps only attention patterns."""
    return name.endswith("attn.hook_pattern")


def hooks_active(model) -> bool:
    """Whether any hook point of ``model`` has a forward hook (an intervention, an ablation)."""
    if isinstance(model, ProbedModel):
        return model.hooks_active()
    return any(getattr(hp, "_forward_hooks", None) for hp in model.hook_dict.values())


@torch.no_grad()
def cache_patterns(
    model, batch: Batch, chunk: int = 512, last_layer_rows: Tensor | None = None
) -> tuple[Tensor, list[Pattern]]:
    """Logits and attention patterns of every layer, computed in chunks.

    Args:
        model: the network, or any model :func:`interp.analysis.hooked.probed` accepts (a
            TransformerLens ``HookedRootModule``, a ``TransformerBridge`` on token batches).
        batch: the sequences.
        chunk: sequences per forward pass.
        last_layer_rows: compute only these query rows of the last layer's pattern (and the query
            row); the other rows are zeros. ``None`` computes every row.
            :func:`interp.analysis.measures.last_layer_rows_read` gives the rows the registered
            measures read; the training loop's evaluation uses it (about half of layer 2's cost).

    Returns:
        ``(logits [batch, L], [pattern of layer l [batch, head_index, query_pos, key_pos]])``.

    Raises:
        interp.analysis.hooked.ModelContractError: the model lacks what the probes need, or
            ``batch`` is not what it is fed (one line naming it).
    """
    from interp.model.fast import fast_patterns, supports_fast_path

    pm = probed(model)
    pm.check(pm.pattern_hooks, batch)
    # Without active hooks, the hook-free forward gives the same patterns for less work; with hooks
    # (an intervention, an ablation) the hooked model must run so that they take effect.
    use_fast = not pm.hooks_active() and supports_fast_path(pm.module)
    logits, patterns = [], [[] for _ in range(pm.n_layers)]
    for start in range(0, len(batch), chunk):
        part = batch[start : start + chunk]
        if use_fast:
            out, layer_patterns = fast_patterns(
                pm.module, part.tokens, part.positions, last_layer_rows=last_layer_rows
            )
        else:
            out, cache = pm.run_with_cache(part, names_filter=PATTERN_HOOKS)
            layer_patterns = pm.patterns(cache, part)
        logits.append(out)
        for layer in range(pm.n_layers):
            patterns[layer].append(layer_patterns[layer])
    return torch.cat(logits), [torch.cat(p) for p in patterns]


def _head_max(values: Float[Tensor, " head_index"]) -> float:
    return float(values.max())


def ila1(pattern_l1: Pattern, batch: Batch) -> float:
    """Item-label association in layer 1: attention from each label token to its own item.

    Averaged over labels and sequences (docs/science.md section 3). The previous-token head
    scores 1.
    """
    n = batch.n_pairs
    labels = torch.arange(n, device=pattern_l1.device) * 2 + 1
    a = pattern_l1[:, :, labels, labels - 1]  # [batch, head, n]
    return _head_max(a.mean(dim=(0, 2)))


def tila2(pattern_l2: Pattern, batch: Batch) -> float:
    """Target-item-label association in layer 2: query attention on the labels whose item has the
    query's class (the induction head's target)."""
    q_row = pattern_l2[:, :, -1, 1:-1:2]  # [batch, head, n_pairs] attention on label tokens
    mask = batch.query_class_mask().to(q_row.dtype)[:, None, :]
    return _head_max((q_row * mask).sum(-1).mean(0))


def tla2(pattern_l2: Pattern, batch: Batch) -> float:
    """Target-label association in layer 2: query attention on all label tokens."""
    return _head_max(pattern_l2[:, :, -1, 1:-1:2].sum(-1).mean(0))


def cla(logits: Float[Tensor, "batch L"], batch: Batch) -> float:
    """Context-label accuracy: share of predictions that are one of the context's labels."""
    pred = logits.argmax(-1)
    return float((batch.item_labels == pred[:, None]).any(-1).float().mean())


def prev_token_mask(batch: Batch) -> Bool[Tensor, "batch query_pos key_pos"]:
    """Target mask of a previous-token head: row ``t >= 1`` targets key ``t - 1``."""
    n_pos = batch.tokens.shape[1]
    m = torch.zeros(n_pos, n_pos, dtype=torch.bool, device=batch.tokens.device)
    idx = torch.arange(1, n_pos, device=m.device)
    m[idx, idx - 1] = True
    return m.expand(len(batch), n_pos, n_pos)


def induction_mask(batch: Batch) -> Bool[Tensor, "batch query_pos key_pos"]:
    """Target mask of an induction head, from class metadata.

    Row of item ``j`` (and the query) targets the label tokens ``2i + 1`` with ``i < j`` whose item
    has the same class as the row's item: "attend to the token after an earlier copy of me".
    """
    b, n = batch.item_classes.shape
    classes = torch.cat([batch.item_classes, batch.query_class[:, None]], dim=1)  # [b, n+1]
    same = classes[:, :, None] == batch.item_classes[:, None, :]  # [b, n+1 rows, n earlier items]
    earlier = torch.ones(n + 1, n, dtype=torch.bool, device=same.device).tril(-1)
    n_pos = 2 * n + 1
    m = torch.zeros(b, n_pos, n_pos, dtype=torch.bool, device=same.device)
    rows = torch.arange(n + 1, device=same.device) * 2
    cols = torch.arange(n, device=same.device) * 2 + 1
    m[:, rows[:, None], cols[None, :]] = same & earlier
    return m


def masked_attention_score(
    pattern: Pattern, mask: Bool[Tensor, "batch query_pos key_pos"]
) -> Tensor:
    """Mean attention mass on ``mask`` over rows that have at least one target.

    The "attention on a target mask" idea of TransformerLens's head detector, with the mask given
    per sequence. Returns ``[head_index]``; ``nan`` where no row has a target.
    """
    mass = (pattern * mask[:, None].to(pattern.dtype)).sum(-1)  # [batch, head, query_pos]
    has = mask.any(-1)[:, None, :].expand_as(mass)  # [batch, head, query_pos]
    total = (mass * has).sum(dim=(0, 2))
    count = has.sum(dim=(0, 2))
    return total / count.clamp(min=1) + torch.where(count > 0, 0.0, float("nan"))


def prev_token_score(pattern_l1: Pattern, batch: Batch) -> float:
    """Previous-token score of layer 1 over every token (not only labels)."""
    return _head_max(masked_attention_score(pattern_l1, prev_token_mask(batch)))


def induction_score(pattern_l2: Pattern, batch: Batch) -> float:
    """Induction score of layer 2 over every item row and the query (see :func:`induction_mask`)."""
    return _head_max(masked_attention_score(pattern_l2, induction_mask(batch)))


def attention_sparsity(pattern: Pattern, rows: Tensor | None = None) -> dict[str, Tensor]:
    """Sparsity of attention rows, each normalised by the causal row length ``n`` (keys visible).

    Args:
        pattern: ``[batch, head_index, query_pos, key_pos]``.
        rows: query positions to use (default: all rows with at least 2 visible keys).

    Returns:
        Per head ``[head_index]``: ``entropy`` (row entropy / log n; 1 = uniform, 0 = one-hot),
        ``n_eff`` (``1/sum a^2`` divided by n; 1 = uniform, 1/n = one-hot) and ``l1_l2``
        (``mean|a| / sqrt(mean a^2)`` over the n visible keys; 1 = uniform, ``1/sqrt(n)`` =
        one-hot).
    """
    n_pos = pattern.shape[-1]
    if rows is None:
        rows = torch.arange(1, n_pos, device=pattern.device)
    a = pattern[:, :, rows, :]  # [batch, head, rows, key]
    n = (rows + 1).to(a.dtype)[None, None, :]  # visible keys per row
    ent = -(a * torch.log(a.clamp(min=1e-30))).sum(-1) / torch.log(n)
    n_eff = 1.0 / (a * a).sum(-1) / n
    mean_abs = a.abs().sum(-1) / n
    rms = torch.sqrt((a * a).sum(-1) / n)
    return {
        "entropy": ent.mean(dim=(0, 2)),
        "n_eff": n_eff.mean(dim=(0, 2)),
        "l1_l2": (mean_abs / rms).mean(dim=(0, 2)),
    }


@torch.no_grad()
def copied_item_probe(
    model,
    batch: Batch,
    *,
    layer: int = 0,
    test_size: float = 0.25,
    seed: int = 0,
    max_iter: int = 500,
) -> dict[str, float]:
    """Linear probe: decode the class of the preceding item from the residual at label tokens.

    Reads ``blocks.{layer}.hook_resid_post`` at every label position ``2i + 1`` and fits a
    scikit-learn logistic regression to predict the class of item ``i`` (the "copied item" the
    induction head later matches against). Only meaningful on known classes (IC2 or IW sets, or
    training batches without novel classes); classes are re-indexed to ``0..C-1``.

    Returns:
        ``{"train_acc", "test_acc", "chance", "n_classes"}``; ``chance`` is the accuracy of always
        predicting the most frequent class in the test split.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    hook = f"blocks.{layer}.hook_resid_post"
    pm = probed(model)
    pm.check([hook], batch)
    _, cache = pm.run_with_cache(batch, names_filter=lambda n: n == hook)
    resid = cache[hook][:, 1:-1:2]  # [batch, n_pairs, d_model]
    X = resid.reshape(-1, resid.shape[-1]).cpu().numpy()
    _, y = np.unique(batch.item_classes.reshape(-1).cpu().numpy(), return_inverse=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_size, random_state=seed)
    clf = LogisticRegression(max_iter=max_iter)
    clf.fit(X_tr, y_tr)
    counts = np.bincount(y_tr, minlength=y.max() + 1)
    return {
        "train_acc": float(clf.score(X_tr, y_tr)),
        "test_acc": float(clf.score(X_te, y_te)),
        "chance": float(np.mean(y_te == counts.argmax())),
        "n_classes": int(y.max() + 1),
    }
