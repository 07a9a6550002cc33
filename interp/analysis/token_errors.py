"""Error rates of a token network on CoPE's token tasks, and the rare-error tail of flip-flop.

An *answer* is a scored position (``targets != IGNORE``): a read of flip-flop, a copied token of
selective copy, a printed value of counting. :func:`error_counts` counts wrong answers and
sequences with at least one wrong answer; :func:`per_10k` turns a count into errors per 10^4
answers, and :func:`upper_per_10k` gives the exact (Clopper-Pearson) one-sided 95% upper bound,
the number to quote when few or no errors were seen (Liu et al. 2023 call flip-flop's rare
errors "attention glitches": a network right on almost every read can still fail sporadically,
which only a large count of reads measures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from interp.data.cope_tasks import IGNORE, TokenBatch

__all__ = ["ErrorCounts", "error_counts", "model_errors", "per_10k", "upper_per_10k"]


@dataclass(frozen=True)
class ErrorCounts:
    """Wrong answers among the answers, and sequences with one or more wrong answers among the
    sequences that have an answer."""

    answers: int
    errors: int
    sequences: int
    seq_errors: int

    def __add__(self, other: ErrorCounts) -> ErrorCounts:
        return ErrorCounts(
            self.answers + other.answers,
            self.errors + other.errors,
            self.sequences + other.sequences,
            self.seq_errors + other.seq_errors,
        )

    @property
    def error_rate(self) -> float:
        return self.errors / self.answers if self.answers else math.nan

    @property
    def seq_error_rate(self) -> float:
        return self.seq_errors / self.sequences if self.sequences else math.nan


def error_counts(
    predicted: Int[Tensor, "batch pos"], targets: Int[Tensor, "batch pos"]
) -> ErrorCounts:
    """Counts of wrong answers: ``predicted`` (argmax token ids) against ``targets`` (``IGNORE``
    where nothing is scored). A sequence without an answer counts in neither sequence count."""
    if predicted.shape != targets.shape:
        raise ValueError(f"predicted {tuple(predicted.shape)} and targets {tuple(targets.shape)}")
    scored = targets != IGNORE
    wrong = (predicted != targets) & scored
    has_answer = scored.any(dim=1)
    return ErrorCounts(
        answers=int(scored.sum()),
        errors=int(wrong.sum()),
        sequences=int(has_answer.sum()),
        seq_errors=int((wrong.any(dim=1) & has_answer).sum()),
    )


@torch.no_grad()
def model_errors(model, batch: TokenBatch, chunk: int = 1024) -> ErrorCounts:
    """:func:`error_counts` of ``model``'s argmax on ``batch``, ``chunk`` sequences at a time."""
    total = ErrorCounts(0, 0, 0, 0)
    for i in range(0, len(batch), chunk):
        tokens, targets = batch.tokens[i : i + chunk], batch.targets[i : i + chunk]
        total = total + error_counts(model(tokens).argmax(-1), targets)
    return total


def per_10k(errors: int, n: int) -> float:
    """Errors per 10^4 answers (NaN without answers)."""
    return 1e4 * errors / n if n else math.nan


def upper_per_10k(errors: int, n: int, level: float = 0.95) -> float:
    """The exact one-sided upper confidence bound on the error rate, per 10^4 answers
    (Clopper-Pearson: with no error in ``n``, ``1 - (1 - level)^(1/n)``, about ``3 / n``)."""
    from scipy.stats import beta

    if not n:
        return math.nan
    if errors >= n:
        return 1e4
    return 1e4 * float(beta.ppf(level, errors + 1, n - errors))
