"""The in-context classification task with discrete tokens: for language-model-shaped networks.

The same task as :mod:`interp.data.task` (Reddy 2024), with items and labels as token ids from one
vocabulary instead of continuous vectors, so that a network that embeds token ids (a
TransformerLens ``TransformerBridge``, any ``HookedRootModule`` with an embedding) can learn it
and be probed with the same measures.

Vocabulary (``d_vocab = L + K + n_novel`` ids):

- ``0 .. L-1``: the labels (label ``y`` is token ``y``, so the query's logits over the labels are
  the first ``L`` logits);
- ``L .. L+K-1``: the items of the ``K`` known classes (class ``k`` is token ``L + k``; its label
  is ``k mod L``, as in the vector task);
- ``L+K .. L+K+n_novel-1``: novel items. A sequence that uses novel classes draws them from
  this pool and gives each a label drawn for that sequence, so a novel item's label can only be
  read from the context: they are the fresh classes of the IC set and of the ``p_C`` training
  sequences. (Each class is one token: the vector task's within-class noise has no counterpart.)

Sequences and metadata are those of :class:`interp.data.task.Batch`: item ``i`` at position
``2i``, its label at ``2i + 1``, the query last; ``item_classes`` (known classes ``0 .. K-1``,
novel classes ids ``>= K``, unique within a batch), ``item_labels``, ``query_class``, ``target``.
``tokens`` holds the ids ``[batch, pos]`` and ``positions`` is ``0 .. 2N`` (a token model brings
its own positional embedding). The evaluation sets are IC (novel classes, bursty), IC2 (known
classes, bursty, labels shifted ``y -> y + 1 mod L``) and IW (known classes, not bursty).

Generator API (the same as :class:`interp.data.task.TaskGenerator`)::

    task = TokenTaskConfig(K=128, L=16, N=8, B=2, p_C=0.5, n_novel=64)
    gen = TokenTaskGenerator(task, seed=0)
    batch = gen.sample(64, torch.Generator().manual_seed(1))   # TokenTaskBatch
    sets = gen.eval_sets(seed=2)                               # {"ic", "ic2", "iw"}

:func:`interp.experiments.token_bridge.train_token_model` trains any token model (e.g.
``TransformerBridge.boot_native``, see :func:`bridge_config`) on it with the toolkit's one training
loop, evaluating the registered progress measures; docs/transformerlens.md has the worked example.

All randomness flows through explicit ``torch.Generator`` objects; no global RNG is touched.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import no_type_check

import torch
from jaxtyping import Int
from torch import Tensor

from interp.data.task import Batch, draw_eval_sets
from interp.data.tasks import register_task

__all__ = [
    "TokenTaskConfig",
    "TokenTaskBatch",
    "TokenTaskGenerator",
    "bridge_config",
]


def _check(cond: bool, name: str, value, allowed: str) -> None:
    if not cond:
        raise ValueError(f"TokenTaskConfig.{name}={value!r} is invalid: {allowed}")


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# Self-validating (one-line errors naming the field); the runtime type checker skips it.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class TokenTaskConfig:
    """Parameters of the token task (the meaning of :class:`interp.data.task.TaskConfig`).

    Attributes:
        K: known classes (a multiple of L).
        L: labels.
        N: item-label pairs per sequence.
        B: burstiness: copies of each class in a bursty sequence (divides N, < N); 0: none.
        alpha: Zipf exponent of the known classes' frequencies.
        p_B: fraction of the known-class training sequences that are bursty.
        p_C: fraction of training sequences built from novel classes (bursty).
        n_novel: size of the pool of novel item tokens (at least the classes of one sequence).
        B_eval: burstiness of IC and IC2 (None: B, or 1 when B = 0).
        n_eval: sequences per evaluation set.
    """

    K: int = 128
    L: int = 16
    N: int = 8
    B: int = 2
    alpha: float = 0.0
    p_B: float = 1.0
    p_C: float = 0.5
    n_novel: int = 64
    B_eval: int | None = None
    n_eval: int = 512

    def __post_init__(self) -> None:
        for name in ("K", "L", "N", "n_novel", "n_eval"):
            value = getattr(self, name)
            _check(_positive_int(value), name, value, "must be a positive integer")
        _check(self.L >= 2, "L", self.L, "must be >= 2")
        _check(self.K % self.L == 0, "K", self.K, f"must be a multiple of L={self.L}")
        _check(math.isfinite(self.alpha) and self.alpha >= 0, "alpha", self.alpha, "must be >= 0")
        for name in ("p_B", "p_C"):
            value = getattr(self, name)
            _check(0.0 <= value <= 1.0, name, value, "must be a probability in [0, 1]")
        divisors = [b for b in range(1, self.N) if self.N % b == 0]
        _check(
            isinstance(self.B, int) and (self.B == 0 or self.B in divisors),
            "B",
            self.B,
            f"allowed values for N={self.N}: 0 (no bursty sequences) or one of {divisors}",
        )
        if self.B == 0:
            _check(self.p_B == 0.0, "p_B", self.p_B, "must be 0 when B=0 (no bursty sequences)")
            _check(self.p_C == 0.0, "p_C", self.p_C, "must be 0 when B=0 (novel are bursty)")
        if self.B_eval is not None:
            _check(self.B_eval in divisors, "B_eval", self.B_eval, f"one of {divisors} or None")
        for burst in {self.B, self.B_eval_effective} - {0}:
            n_cls = self.N // burst
            _check(n_cls <= self.L, "N", self.N, f"needs {n_cls} distinct labels but L={self.L}")
            _check(
                n_cls <= self.n_novel,
                "n_novel",
                self.n_novel,
                f"must be >= {n_cls}, the novel classes of one sequence",
            )

    @property
    def B_eval_effective(self) -> int:
        return self.B_eval if self.B_eval is not None else (self.B if self.B > 0 else 1)

    @property
    def d_vocab(self) -> int:
        """Vocabulary size ``L + K + n_novel``."""
        return self.L + self.K + self.n_novel

    @property
    def seq_len(self) -> int:
        """Tokens in a sequence, ``2N + 1``."""
        return 2 * self.N + 1

    def class_token(self, k: int | Tensor):
        """Token id of known class ``k``'s item."""
        return self.L + k

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class TokenTaskBatch(Batch):
    """A :class:`interp.data.task.Batch` whose ``tokens`` are token ids ``[batch, pos]``.

    Attributes:
        n_labels: L; the label tokens are ids ``0 .. n_labels - 1`` (the query's logits over the
            labels are the first ``n_labels`` columns of a vocabulary's logits).
    """

    tokens: Int[Tensor, "batch pos"]
    n_labels: int

    def __post_init__(self) -> None:
        if not _positive_int(self.n_labels):
            raise ValueError(
                f"TokenTaskBatch.n_labels={self.n_labels!r} is invalid: the number of labels L, "
                "a positive integer"
            )

    def _with(self, **fields) -> TokenTaskBatch:
        return TokenTaskBatch(**{**self._tensors(), **fields, "n_labels": self.n_labels})

    def _tensors(self) -> dict[str, Tensor]:
        return {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "n_labels"
        }

    def __getitem__(self, index) -> TokenTaskBatch:
        if isinstance(index, int):
            index = slice(index, index + 1)
        return self._with(**{k: v[index] for k, v in self._tensors().items()})

    def to(self, device: torch.device | str) -> TokenTaskBatch:
        return self._with(**{k: v.to(device) for k, v in self._tensors().items()})

    @staticmethod
    def cat(batches: list[TokenTaskBatch]) -> TokenTaskBatch:
        batches = [b for b in batches if len(b) > 0] or batches[:1]
        names = batches[0]._tensors().keys()
        tensors = {k: torch.cat([getattr(b, k) for b in batches]) for k in names}
        return TokenTaskBatch(**tensors, n_labels=batches[0].n_labels)


class TokenTaskGenerator:
    """Draws sequences of the token task (the interface of
    :class:`interp.data.task.TaskGenerator`).

    Args:
        config: the task.
        seed: kept for the generator interface; the vocabulary and the class-label map are
            fixed (class ``k`` has label ``k mod L``), so no draw depends on it.
    """

    def __init__(self, config: TokenTaskConfig, seed: int = 0) -> None:
        self.config = config
        self.seed = seed
        K, L = config.K, config.L
        ranks = torch.arange(1, K + 1, dtype=torch.float64)
        p = ranks.pow(-config.alpha)
        self.class_probs = (p / p.sum()).float()
        per_label = self.class_probs.view(K // L, L).T  # row m: classes m, m + L, ...
        self.label_probs = per_label.sum(dim=1)
        self.within_label_probs = per_label / per_label.sum(dim=1, keepdim=True)
        self._novel_counter = 0

    def _assemble(self, item_tok, item_classes, labels, query_tok, query_class, target) -> Batch:
        n, n_pairs = item_tok.shape
        tokens = torch.empty(n, 2 * n_pairs + 1, dtype=torch.long)
        tokens[:, 0:-1:2] = item_tok
        tokens[:, 1:-1:2] = labels
        tokens[:, -1] = query_tok
        seq_len = 2 * n_pairs + 1
        return TokenTaskBatch(
            tokens=tokens,
            positions=torch.arange(seq_len).expand(n, seq_len).clone(),
            item_classes=item_classes,
            item_labels=labels,
            query_class=query_class,
            target=target,
            n_labels=self.config.L,
        )

    def _bursty(self, n: int, n_pairs: int, B: int, g: torch.Generator, novel: bool) -> Batch:
        cfg = self.config
        n_cls = n_pairs // B
        weights = torch.ones(cfg.L) if novel else self.label_probs
        labels = torch.multinomial(weights.expand(n, cfg.L), n_cls, replacement=False, generator=g)
        if novel:
            pool = torch.ones(cfg.n_novel).expand(n, cfg.n_novel)
            slot = torch.multinomial(pool, n_cls, replacement=False, generator=g)  # [n, n_cls]
            toks = cfg.L + cfg.K + slot
            classes = cfg.K + self._novel_counter + torch.arange(n * n_cls).view(n, n_cls)
            self._novel_counter += n * n_cls
        else:
            rows = self.within_label_probs[labels.reshape(-1)]
            j = torch.multinomial(rows, 1, generator=g).view(n, n_cls)
            classes = labels + cfg.L * j
            toks = cfg.class_token(classes)
        slots = torch.arange(n_cls).repeat_interleave(B)
        which = slots[torch.argsort(torch.rand(n, n_pairs, generator=g), dim=1)]
        q = torch.randint(0, n_cls, (n,), generator=g)
        rows = torch.arange(n)
        return self._assemble(
            torch.gather(toks, 1, which),
            torch.gather(classes, 1, which),
            torch.gather(labels, 1, which),
            toks[rows, q],
            classes[rows, q],
            labels[rows, q],
        )

    def _non_bursty(self, n: int, n_pairs: int, g: torch.Generator) -> Batch:
        cfg = self.config
        classes = torch.multinomial(
            self.class_probs, n * (n_pairs + 1), replacement=True, generator=g
        ).view(n, n_pairs + 1)
        items, query = classes[:, :n_pairs], classes[:, n_pairs]
        return self._assemble(
            cfg.class_token(items),
            items,
            items % cfg.L,
            cfg.class_token(query),
            query,
            query % cfg.L,
        )

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A training batch: novel-class (p_C), else bursty (p_B), else non-bursty sequences."""
        cfg = self.config
        if isinstance(batch_size, bool) or not (isinstance(batch_size, int) and batch_size > 0):
            raise ValueError(f"batch_size={batch_size!r} is invalid: must be a positive integer")
        g = generator
        n_novel = int(
            torch.binomial(torch.tensor([float(batch_size)]), torch.tensor([cfg.p_C]), generator=g)
        )
        rest = torch.tensor([float(batch_size - n_novel)])
        n_bursty = int(torch.binomial(rest, torch.tensor([cfg.p_B]), generator=g))
        parts = []
        if n_novel:
            parts.append(self._bursty(n_novel, cfg.N, cfg.B, g, novel=True))
        if n_bursty:
            parts.append(self._bursty(n_bursty, cfg.N, cfg.B, g, novel=False))
        if batch_size - n_novel - n_bursty:
            parts.append(self._non_bursty(batch_size - n_novel - n_bursty, cfg.N, g))
        return TokenTaskBatch.cat(parts)

    def _eval_B(self, n_pairs: int) -> int:
        B = self.config.B_eval_effective
        if n_pairs % B or n_pairs // B > min(self.config.L, self.config.n_novel):
            raise ValueError(
                f"n_pairs={n_pairs} is invalid: must be a multiple of B_eval={B} with at most "
                f"min(L, n_novel)={min(self.config.L, self.config.n_novel)} classes"
            )
        return B

    def ic(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IC: novel classes, bursty. Measures in-context learning."""
        n_pairs = n_pairs or self.config.N
        return self._bursty(n, n_pairs, self._eval_B(n_pairs), generator, novel=True)

    def ic2(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IC2: known classes, bursty, every context label shifted ``y -> (y + 1) mod L``."""
        n_pairs = n_pairs or self.config.N
        b = self._bursty(n, n_pairs, self._eval_B(n_pairs), generator, novel=False)
        L = self.config.L
        shifted = (b.item_labels + 1) % L
        tokens = b.tokens.clone()
        tokens[:, 1:-1:2] = shifted
        return b._with(tokens=tokens, item_labels=shifted, target=(b.target + 1) % L)

    def iw(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IW: known classes, not bursty. Measures in-weights learning."""
        return self._non_bursty(n, n_pairs or self.config.N, generator)

    def eval_sets(
        self, seed: int, n: int | None = None, n_pairs: int | None = None
    ) -> dict[str, Batch]:
        """The IC, IC2 and IW sets, generated once from their own seed."""
        return draw_eval_sets(self, seed, n, n_pairs)


def bridge_config(task: TokenTaskConfig, *, d_model: int = 64, n_layers: int = 2, **overrides):
    """A ``TransformerBridgeConfig`` for ``TransformerBridge.boot_native`` on ``task``: attention
    only, one head per layer of width ``d_model``, no LayerNorm, learned positions, the task's
    vocabulary and context; nothing is downloaded.

    Example::

        from transformer_lens import TransformerBridge
        bridge = TransformerBridge.boot_native(bridge_config(task, seed=0))
    """
    from transformer_lens.config import TransformerBridgeConfig

    fields = dict(
        d_model=d_model,
        d_head=d_model,
        n_heads=1,
        n_layers=n_layers,
        n_ctx=task.seq_len,
        d_vocab=task.d_vocab,
        attn_only=True,
        normalization_type=None,
        seed=0,
    )
    fields.update(overrides)
    return TransformerBridgeConfig(**fields)


# The registry's entry (interp.data.tasks): the standard pair layout, so every registered measure
# reads it; its batches are token ids, for a model with an ordinary token embedding.
register_task(
    "discrete-tokens",
    TokenTaskGenerator,
    config=TokenTaskConfig,
    description="the in-context classification task as token ids (items, labels, fresh ids for "
    "novel classes) for a model with a token embedding "
    "(train: interp.experiments.token_bridge.train_token_model)",
)
