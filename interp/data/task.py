"""The in-context classification task of Reddy (ICLR 2024), docs/science.md section 1.

A sequence is ``x1, l1, x2, l2, ..., xN, lN, xq``: N item-label pairs and a query item. The network
must output the label of the query's class. Items are noisy copies of class means; labels are fixed
random vectors; class ``k`` has label ``k mod L``.

Layout of a :class:`Batch`: item ``i`` (0-based) sits at position ``2i``, its label at ``2i + 1``,
the query at ``2N`` (the last position). Content vectors live in ``tokens``; the absolute position
of each token (random offset per sequence plus ``arange``) lives in ``positions``. The model's
positional encoding turns ``positions`` into whatever it needs (one-hot concatenation in the paper).

All randomness flows through explicit ``torch.Generator`` objects: no global RNG is touched, and the
same seeds give the same tensors, bit for bit, on the same machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

# The config lives in a module without torch (commands that only build configs never load it);
# importing it from here is the old path, kept.
from interp.config.task_config import MAX_EPS, TaskConfig

__all__ = ["TaskConfig", "Batch", "TaskGenerator", "EVAL_SET_NAMES", "MAX_EPS"]

EVAL_SET_NAMES = ("ic", "ic2", "iw")


@dataclass
class Batch:
    """A batch of sequences with the metadata that probes need.

    Attributes:
        tokens: content vectors ``[batch, pos, D]``; item i at ``2i``, label at ``2i+1``, query
            last.
        positions: absolute position of every token ``[batch, pos]``.
        item_classes: class of each context item ``[batch, n_pairs]``; novel classes get ids
            ``>= K`` that are unique within the batch.
        item_labels: label id shown after each context item ``[batch, n_pairs]``.
        query_class: class of the query ``[batch]``.
        target: label the network must output ``[batch]``.
    """

    tokens: Float[Tensor, "batch pos d_content"]
    positions: Int[Tensor, "batch pos"]
    item_classes: Int[Tensor, "batch n_pairs"]
    item_labels: Int[Tensor, "batch n_pairs"]
    query_class: Int[Tensor, " batch"]
    target: Int[Tensor, " batch"]

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def n_pairs(self) -> int:
        """Number of item-label pairs ``N`` in these sequences."""
        return self.item_labels.shape[1]

    def __getitem__(self, index) -> Batch:
        if isinstance(index, int):
            index = slice(index, index + 1)
        return Batch(
            tokens=self.tokens[index],
            positions=self.positions[index],
            item_classes=self.item_classes[index],
            item_labels=self.item_labels[index],
            query_class=self.query_class[index],
            target=self.target[index],
        )

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on another device."""
        return Batch(
            tokens=self.tokens.to(device),
            positions=self.positions.to(device),
            item_classes=self.item_classes.to(device),
            item_labels=self.item_labels.to(device),
            query_class=self.query_class.to(device),
            target=self.target.to(device),
        )

    @staticmethod
    def cat(batches: list[Batch]) -> Batch:
        """Concatenate batches along the batch axis (they must share ``n_pairs``)."""
        batches = [b for b in batches if len(b) > 0] or batches[:1]
        return Batch(
            tokens=torch.cat([b.tokens for b in batches]),
            positions=torch.cat([b.positions for b in batches]),
            item_classes=torch.cat([b.item_classes for b in batches]),
            item_labels=torch.cat([b.item_labels for b in batches]),
            query_class=torch.cat([b.query_class for b in batches]),
            target=torch.cat([b.target for b in batches]),
        )

    def query_class_mask(self) -> Bool[Tensor, "batch n_pairs"]:
        """Context items whose class is the query's class: the pairs an induction head should
        use."""
        return self.item_classes == self.query_class[:, None]


class TaskGenerator:
    """Draws sequences of the task for one run.

    Class means ``mu [K, D]`` and label vectors ``v [L, D]`` are drawn once, from ``seed``, with
    entries ``N(0, 1/D)``. Each call to a sampling method takes its own ``torch.Generator``.

    Args:
        config: the task parameters.
        seed: seed for the class means and label vectors of this run.
    """

    def __init__(self, config: TaskConfig, seed: int = 0) -> None:
        self.config = config
        self.seed = seed
        g = torch.Generator().manual_seed(int(seed))
        D, K, L = config.D, config.K, config.L
        self.class_means: Float[Tensor, "K D"] = torch.randn(K, D, generator=g) / math.sqrt(D)
        self.label_vectors: Float[Tensor, "L D"] = torch.randn(L, D, generator=g) / math.sqrt(D)
        # Zipf weights p(k) ∝ (k+1)^-alpha, and their split by label: classes with label m are
        # m, m + L, m + 2L, ...; sampling distinct labels by their total weight, then a class
        # within each label, is exactly "draw classes from p(k), rejecting used labels".
        ranks = torch.arange(1, K + 1, dtype=torch.float64)
        p = ranks.pow(-config.alpha)
        self.class_probs = (p / p.sum()).float()
        per_label = self.class_probs.view(K // L, L).T  # [L, K/L]: row m = classes m, m+L, ...
        self.label_probs = per_label.sum(dim=1)
        self.within_label_probs = per_label / per_label.sum(dim=1, keepdim=True)
        self._novel_counter = 0

    # ----------------------------------------------------------------------------------------
    # building blocks

    def _items(self, means: Tensor, g: torch.Generator) -> Tensor:
        """Noisy items ``(mu + eps * eta) / sqrt(1 + eps^2)``, fresh noise for each occurrence."""
        eps = self.config.eps
        eta = torch.randn(means.shape, generator=g) / math.sqrt(self.config.D)
        return (means + eps * eta) / math.sqrt(1.0 + eps * eps)

    def _positions(self, n: int, n_pairs: int, g: torch.Generator) -> Tensor:
        seq_len = 2 * n_pairs + 1
        P = self.config.P
        max_offset = P - seq_len
        if max_offset < 0:
            # Longer than the positional table: positions run past P - 1. The one-hot encoding
            # reports them as untrained positions instead of crashing.
            offsets = torch.zeros(n, dtype=torch.long)
        else:
            offsets = torch.randint(0, max_offset + 1, (n,), generator=g)
        return offsets[:, None] + torch.arange(seq_len)[None, :]

    def _assemble(
        self,
        item_vecs: Tensor,
        item_classes: Tensor,
        item_labels: Tensor,
        shown_labels: Tensor,
        query_vec: Tensor,
        query_class: Tensor,
        target: Tensor,
        g: torch.Generator,
    ) -> Batch:
        n, n_pairs, D = item_vecs.shape
        tokens = torch.empty(n, 2 * n_pairs + 1, D)
        tokens[:, 0:-1:2] = item_vecs
        tokens[:, 1:-1:2] = self.label_vectors[shown_labels]
        tokens[:, -1] = query_vec
        return Batch(
            tokens=tokens,
            positions=self._positions(n, n_pairs, g),
            item_classes=item_classes,
            item_labels=shown_labels,
            query_class=query_class,
            target=target,
        )

    def _sample_distinct_labels(self, n: int, k: int, g: torch.Generator, novel: bool) -> Tensor:
        """``[n, k]`` pairwise-distinct labels per sequence."""
        L = self.config.L
        weights = torch.ones(L) if novel else self.label_probs
        return torch.multinomial(weights.expand(n, L), k, replacement=False, generator=g)

    def _bursty(self, n: int, n_pairs: int, B: int, g: torch.Generator, novel: bool) -> Batch:
        cfg = self.config
        n_cls = n_pairs // B
        labels = self._sample_distinct_labels(n, n_cls, g, novel)  # [n, n_cls]
        if novel and cfg.novel_pool is not None:
            # The author's form: one pool of K_c fresh class means for this call, shared by its
            # sequences; pool class c has label c mod L. Ids >= K, unique per generator.
            K_c = cfg.novel_pool
            pool = torch.randn(K_c, cfg.D, generator=g) / math.sqrt(cfg.D)
            j = torch.randint(0, K_c // cfg.L, (n, n_cls), generator=g)
            index = labels + cfg.L * j  # [n, n_cls], pool classes with the drawn labels
            means = pool[index]
            classes = cfg.K + self._novel_counter + index
            self._novel_counter += K_c
        elif novel:
            # Fresh class means for every novel class, never reused. Ids >= K, unique per generator.
            means = torch.randn(n, n_cls, cfg.D, generator=g) / math.sqrt(cfg.D)
            start = cfg.K + self._novel_counter
            classes = start + torch.arange(n * n_cls).view(n, n_cls)
            self._novel_counter += n * n_cls
        else:
            rows = self.within_label_probs[labels.reshape(-1)]  # [n*n_cls, K/L]
            j = torch.multinomial(rows, 1, generator=g).view(n, n_cls)
            classes = labels + cfg.L * j
            means = self.class_means[classes]
        # B copies of each class in random order.
        slot = torch.arange(n_cls).repeat_interleave(B)  # [n_pairs]
        perm = torch.argsort(torch.rand(n, n_pairs, generator=g), dim=1)
        which = slot[perm]  # [n, n_pairs] -> index into the n_cls classes
        item_classes = torch.gather(classes, 1, which)
        item_labels = torch.gather(labels, 1, which)
        item_means = torch.gather(means, 1, which[..., None].expand(n, n_pairs, cfg.D))
        q = torch.randint(0, n_cls, (n,), generator=g)
        query_class = classes[torch.arange(n), q]
        query_mean = means[torch.arange(n), q]
        target = labels[torch.arange(n), q]
        return self._assemble(
            self._items(item_means, g),
            item_classes,
            item_labels,
            item_labels,
            self._items(query_mean, g),
            query_class,
            target,
            g,
        )

    def _non_bursty(
        self,
        n: int,
        n_pairs: int,
        g: torch.Generator,
        query_class: Int[Tensor, " batch"] | None = None,
    ) -> Batch:
        """Non-bursty sequences: context (and, unless ``query_class`` fixes it, query) classes
        i.i.d. from ``p(k)``."""
        cfg = self.config
        if query_class is None:
            classes = torch.multinomial(
                self.class_probs, n * (n_pairs + 1), replacement=True, generator=g
            )
            classes = classes.view(n, n_pairs + 1)
            item_classes, query_class = classes[:, :n_pairs], classes[:, n_pairs]
        else:
            item_classes = torch.multinomial(
                self.class_probs, n * n_pairs, replacement=True, generator=g
            ).view(n, n_pairs)
        item_labels = item_classes % cfg.L
        return self._assemble(
            self._items(self.class_means[item_classes], g),
            item_classes,
            item_labels,
            item_labels,
            self._items(self.class_means[query_class], g),
            query_class,
            query_class % cfg.L,
            g,
        )

    # ----------------------------------------------------------------------------------------
    # public samplers

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A training batch: novel-class (p_C), else bursty (p_B), else non-bursty sequences.

        The three kinds are drawn as binomial counts and concatenated in that order; the order
        within a batch does not matter to the loss.
        """
        cfg = self.config
        if batch_size <= 0:
            raise ValueError(f"batch_size={batch_size!r} is invalid: must be a positive integer")
        g = generator
        counts = torch.tensor([float(batch_size)])
        n_novel = int(torch.binomial(counts, torch.tensor([cfg.p_C]), generator=g).item())
        rest = torch.tensor([float(batch_size - n_novel)])
        n_bursty = int(torch.binomial(rest, torch.tensor([cfg.p_B]), generator=g).item())
        n_plain = batch_size - n_novel - n_bursty
        parts = []
        if n_novel:
            parts.append(self._bursty(n_novel, cfg.N, cfg.B, g, novel=True))
        if n_bursty:
            parts.append(self._bursty(n_bursty, cfg.N, cfg.B, g, novel=False))
        if n_plain:
            parts.append(self._non_bursty(n_plain, cfg.N, g))
        return Batch.cat(parts)

    def ic(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IC: all classes novel, bursty (``B_eval``). Measures in-context learning."""
        n_pairs = n_pairs or self.config.N
        return self._bursty(n, n_pairs, self._eval_B(n_pairs), generator, novel=True)

    def ic2(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IC2: known classes, bursty, every context label shifted ``y -> (y+1) mod L``.

        The correct answer is the shifted label of the query's class: ICL that must override
        what the weights know.
        """
        n_pairs = n_pairs or self.config.N
        b = self._bursty(n, n_pairs, self._eval_B(n_pairs), generator, novel=False)
        L = self.config.L
        shifted = (b.item_labels + 1) % L
        tokens = b.tokens.clone()
        tokens[:, 1:-1:2] = self.label_vectors[shifted]
        return Batch(
            tokens=tokens,
            positions=b.positions,
            item_classes=b.item_classes,
            item_labels=shifted,
            query_class=b.query_class,
            target=(b.target + 1) % L,
        )

    def iw(self, n: int, generator: torch.Generator, n_pairs: int | None = None) -> Batch:
        """IW: known classes, non-bursty. Measures in-weights learning."""
        return self._non_bursty(n, n_pairs or self.config.N, generator)

    def per_class_iw(
        self, n_per_class: int, generator: torch.Generator, n_pairs: int | None = None
    ) -> Batch:
        """Per-class IW: ``n_per_class`` non-bursty sequences for each class ``k = 0 .. K-1``
        whose query is a (fresh-noise) item of class ``k``; the context classes are drawn i.i.d.
        from ``p(k)`` as in the IW set. Sequences come class by class (``query_class`` is
        ``0, .., 0, 1, .., 1, ...``). The accuracy on each class's block is that class's
        in-weights accuracy (:mod:`interp.analysis.quanta`).

        Args:
            n_per_class: sequences per class (>= 1).
            generator: the set's own random stream.
            n_pairs: pairs per sequence (default ``config.N``).
        """
        if isinstance(n_per_class, bool) or not (isinstance(n_per_class, int) and n_per_class >= 1):
            raise ValueError(f"n_per_class={n_per_class!r} is invalid: must be an integer >= 1")
        K = self.config.K
        query_class = torch.arange(K).repeat_interleave(n_per_class)
        return self._non_bursty(
            K * n_per_class, n_pairs or self.config.N, generator, query_class=query_class
        )

    def _eval_B(self, n_pairs: int) -> int:
        B = self.config.B_eval_effective
        if n_pairs % B:
            raise ValueError(
                f"n_pairs={n_pairs} is invalid: must be a multiple of the evaluation burstiness "
                f"B_eval={B}"
            )
        if n_pairs // B > self.config.L:
            raise ValueError(
                f"n_pairs={n_pairs} is invalid: needs {n_pairs // B} distinct labels, "
                f"L={self.config.L}"
            )
        return B

    def eval_sets(
        self, seed: int, n: int | None = None, n_pairs: int | None = None
    ) -> dict[str, Batch]:
        """The IC, IC2 and IW evaluation sets, generated once from their own seed.

        Args:
            seed: seed of the evaluation sets (independent of the training stream).
            n: sequences per set (default ``config.n_eval``).
            n_pairs: pairs per sequence (default ``config.N``; larger for length generalisation).
        """
        return draw_eval_sets(self, seed, n, n_pairs)


def draw_eval_sets(generator, seed: int, n: int | None, n_pairs: int | None) -> dict[str, Batch]:
    """The IC, IC2 and IW sets of a task generator (its ``ic``, ``ic2`` and ``iw`` with
    ``config.n_eval`` and ``_novel_counter``), drawn from their own seed, with novel class ids far
    above any training batch's so that they never collide."""
    n = n or generator.config.n_eval
    g = torch.Generator().manual_seed(int(seed))
    saved = generator._novel_counter
    generator._novel_counter = 10**9
    try:
        sets = {name: getattr(generator, name)(n, g, n_pairs) for name in EVAL_SET_NAMES}
    finally:
        generator._novel_counter = saved
    return sets
