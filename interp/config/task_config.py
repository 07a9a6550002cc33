"""The task's config (:class:`TaskConfig`): the parameters of Reddy's in-context classification
task (docs/science.md section 1), validated without torch, so that a command that only reads or
builds configs (``forecast``, ``transition``) never imports it. The sequences themselves are drawn
by :mod:`interp.data.task`, which re-exports the class."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import no_type_check

__all__ = ["TaskConfig", "MAX_EPS"]


def _check(cond: bool, name: str, value, allowed: str) -> None:
    if not cond:
        raise ValueError(f"TaskConfig.{name}={value!r} is invalid: {allowed}")


# The largest within-class noise: beyond it an item is noise alone (and eps^2 overflows
# long before float64's end).
MAX_EPS = 1e6


# Self-validating: __post_init__ gives the one-line error that names the field; the test run's
# runtime type checker (jaxtyping's hook) would pre-empt it with a traceback, so it skips this
# class.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class TaskConfig:
    """Parameters of the in-context classification task (docs/science.md section 1).

    Attributes:
        D: content dimensions of items and labels. Source: paper.
        K: number of classes; must be a multiple of L. Source: paper (Fig 1d); the ``paper-fig3``
            preset's 256 is from a third-party script.
        L: number of labels (L-way classification). Source: paper.
        N: item-label pairs in a training sequence. Source: paper.
        N_max: the largest N the positional encoding must hold; one-hot positions have
            ``P = 2 * N_max + 1`` slots. Source: paper.
        eps: within-class noise; an item is ``(mu_k + eps * eta) / sqrt(1 + eps^2)``. Source:
            paper.
        alpha: Zipf exponent of class frequencies, ``p(k) ∝ (k+1)^-alpha``. Source: paper. With
            ``alpha > 0`` bursty sequences draw their known classes Zipf-weighted too (the
            author's code: unweighted), a deviation.
        B: burstiness, copies of each class in a bursty sequence; divides N and is < N.
            ``B = 0`` means no bursty training sequences (then ``p_B`` must be 0). Source: paper
            (Fig 1d); the ``paper-fig3`` preset's 1 is from a third-party script.
        p_B: fraction of (non-novel) training sequences that are bursty. Source: paper.
        p_C: fraction of training sequences built from novel classes (bursty). Source: toolkit
            (the paper does not state Fig 1d's; the ``paper-fig1d`` preset guesses 0.8, the
            ``paper-fig3`` preset's 0.8 is from a third-party script).
        novel_pool: where novel classes come from. An integer ``K_c``: each call (a training
            batch, an evaluation set) draws ``K_c`` fresh class means, shared by its sequences;
            class ``c`` of the pool has label ``c mod L``, so ``K_c`` must be a multiple of L.
            ``None``: fresh means for every class of every sequence, never reused (the form of
            runs written before format version 3). Source: author's code.
        B_eval: burstiness of the IC and IC2 evaluation sets. ``None`` means ``B``, or 1 when
            ``B = 0``. Source: toolkit (the paper does not say what IC means without bursty
            training data).
        n_eval: sequences in each evaluation set (IC, IC2, IW). Source: toolkit.
        task: the registered task (:mod:`interp.data.tasks`) whose generator draws the
            sequences; ``standard`` is this task.
    """

    D: int = 63
    K: int = 512
    L: int = 32
    N: int = 8
    N_max: int = 32
    eps: float = 0.1
    alpha: float = 0.0
    B: int = 2
    p_B: float = 1.0
    p_C: float = 0.0
    novel_pool: int | None = 128
    B_eval: int | None = None
    n_eval: int = 2048
    task: str = "standard"

    def __post_init__(self) -> None:
        _check(isinstance(self.task, str) and bool(self.task), "task", self.task, "a task name")
        for name in ("D", "K", "L", "N", "N_max", "n_eval"):
            value = getattr(self, name)
            _check(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                value,
                "must be a positive integer",
            )
        _check(self.L >= 2, "L", self.L, "must be >= 2")
        if self.novel_pool is not None:
            _check(
                isinstance(self.novel_pool, int)
                and not isinstance(self.novel_pool, bool)
                and self.novel_pool > 0
                and self.novel_pool % self.L == 0,
                "novel_pool",
                self.novel_pool,
                f"must be None or a positive multiple of L={self.L}",
            )
        _check(self.L <= self.K, "L", self.L, f"must be <= K={self.K}")
        _check(self.K % self.L == 0, "K", self.K, f"must be a multiple of L={self.L}")
        _check(self.N <= self.N_max, "N", self.N, f"must be <= N_max={self.N_max}")
        _check(
            math.isfinite(self.eps) and 0 <= self.eps <= MAX_EPS,
            "eps",
            self.eps,
            f"must be in [0, {MAX_EPS:g}]",
        )
        _check(math.isfinite(self.alpha) and self.alpha >= 0, "alpha", self.alpha, "must be >= 0")
        for name in ("p_B", "p_C"):
            value = getattr(self, name)
            _check(0.0 <= value <= 1.0, name, value, "must be a probability in [0, 1]")
        divisors = [b for b in range(1, self.N) if self.N % b == 0]
        _check(
            isinstance(self.B, int) and (self.B == 0 or self.B in divisors),
            "B",
            self.B,
            f"allowed values for N={self.N}: 0 (no bursty sequences) or one of {divisors} "
            "(B must divide N and be < N)",
        )
        if self.B == 0:
            _check(self.p_B == 0.0, "p_B", self.p_B, "must be 0 when B=0 (no bursty sequences)")
            _check(
                self.p_C == 0.0, "p_C", self.p_C, "must be 0 when B=0 (novel sequences are bursty)"
            )
        if self.B > 0:
            _check(
                self.N // self.B <= self.L,
                "B",
                self.B,
                f"N / B = {self.N // self.B} distinct labels per bursty sequence "
                f"must be <= L={self.L}",
            )
        if self.B_eval is not None:
            _check(self.B_eval in divisors, "B_eval", self.B_eval, f"one of {divisors} or None")
        _check(
            self.n_distinct <= self.L,
            "N",
            self.N,
            f"needs N / B_eval = {self.n_distinct} distinct labels but L={self.L}",
        )

    @property
    def B_eval_effective(self) -> int:
        """Burstiness used for the IC and IC2 evaluation sets."""
        if self.B_eval is not None:
            return self.B_eval
        return self.B if self.B > 0 else 1

    @property
    def n_distinct(self) -> int:
        """Distinct classes (and labels) in a bursty evaluation sequence, ``n = N / B``."""
        return self.N // self.B_eval_effective

    @property
    def P(self) -> int:
        """Number of one-hot position slots, ``2 * N_max + 1``."""
        return 2 * self.N_max + 1

    @property
    def seq_len(self) -> int:
        """Tokens in a sequence of N pairs and a query, ``2N + 1``."""
        return 2 * self.N + 1

    def to_dict(self) -> dict:
        """A JSON-serialisable dict of the fields (``task`` only when it is not the standard
        task, so that the standard task's ``config.json`` is what it always was)."""
        d = dataclasses.asdict(self)
        if d["task"] == "standard":
            del d["task"]
        return d
