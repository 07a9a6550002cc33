"""Evaluation of a network on the IC, IC2 and IW sets, with the progress measures on IC."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from interp.analysis.measures import compute_measures
from interp.analysis.probes import hooks_active
from interp.data.task import Batch
from interp.data.tasks import get_task, task_name
from interp.model.fast import fast_logits, supports_fast_path

__all__ = [
    "evaluate",
    "accuracy_and_loss",
    "logits_and_measures",
    "per_class_accuracy",
    "EvaluateSets",
    "PerClassIW",
]


def accuracy_and_loss(logits: torch.Tensor, batch: Batch) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``logits [batch, L]`` against ``batch.target``."""
    acc = float((logits.argmax(-1) == batch.target).float().mean())
    loss = float(F.cross_entropy(logits, batch.target))
    return acc, loss


@torch.no_grad()
def logits_and_measures(
    model, batch: Batch, *, chunk: int = 512, names: Sequence[str] | None = None
) -> tuple[torch.Tensor, dict[str, float]]:
    """Logits on ``batch`` and every registered progress measure
    (:data:`interp.analysis.measures.MEASURES`), computing only the activations and attention rows
    the measures read (:func:`interp.analysis.measures.compute_measures`). What the training loop's
    evaluation runs on the IC set; ``names`` limits the measures (default: every registered one)."""
    return compute_measures(model, batch, names, chunk=chunk)


def _logits(model, batch: Batch, fast: bool) -> torch.Tensor:
    if fast:
        return fast_logits(model, batch.tokens, batch.positions)
    return model(batch.tokens, batch.positions)


@torch.no_grad()
def evaluate(
    model,
    eval_sets: dict[str, Batch],
    *,
    measures: bool | Sequence[str] = True,
    chunk: int = 512,
) -> dict[str, float]:
    """Accuracy and loss on every evaluation set, and the progress measures on ``"ic"``.

    Returns:
        ``{name}_acc`` and ``{name}_loss`` for each set, plus one column per registered measure
        (:data:`interp.analysis.measures.MEASURES`, in registration order) when ``measures`` is true
        and an ``"ic"`` set is given (a sequence of names: those measures only).
    """
    was_training = model.training
    # The hook-free forward gives the same logits when no hook would be bypassed.
    fast = not hooks_active(model) and supports_fast_path(model)
    model.eval()
    out: dict[str, float] = {}
    try:
        for name, batch in eval_sets.items():
            if name == "ic" and measures is not False and measures != ():
                names = None if measures is True else list(measures)
                logits, extra = logits_and_measures(model, batch, chunk=chunk, names=names)
            else:
                logits = torch.cat(
                    [
                        _logits(model, batch[i : i + chunk], fast)
                        for i in range(0, len(batch), chunk)
                    ]
                )
                extra = {}
            out[f"{name}_acc"], out[f"{name}_loss"] = accuracy_and_loss(logits, batch)
            out.update(extra)
    finally:
        model.train(was_training)
    return out


@torch.no_grad()
def per_class_accuracy(model, batch: Batch, n_classes: int, *, chunk: int = 512) -> list[float]:
    """Accuracy on the sequences of each query class (the per-class IW set of
    :meth:`interp.data.task.TaskGenerator.per_class_iw`), with the forward :func:`evaluate` uses.

    Args:
        model: the network.
        batch: sequences whose ``query_class`` lies in ``0 .. n_classes - 1``.
        n_classes: the number of classes ``K``.
        chunk: sequences per forward pass.

    Returns:
        ``n_classes`` accuracies, class ``k``'s at index ``k`` (NaN for a class without
        sequences).
    """
    was_training = model.training
    fast = not hooks_active(model) and supports_fast_path(model)
    model.eval()
    try:
        logits = torch.cat(
            [_logits(model, batch[i : i + chunk], fast) for i in range(0, len(batch), chunk)]
        )
    finally:
        model.train(was_training)
    correct = (logits.argmax(-1) == batch.target).double().cpu()
    classes = batch.query_class.cpu()
    hits = torch.zeros(n_classes, dtype=torch.float64).index_add_(0, classes, correct)
    counts = torch.zeros(n_classes, dtype=torch.float64).index_add_(
        0, classes, torch.ones_like(correct)
    )
    return (hits / counts).tolist()


class EvaluateSets:
    """The standard evaluation as a callback of the training loop
    (:class:`interp.train.training.EvalCallback`): :func:`evaluate` on the run's evaluation sets,
    with the registered progress measures that the run's task declares (every one by default,
    :mod:`interp.data.tasks`)."""

    def __call__(self, run, row) -> dict[str, float]:
        applies = get_task(task_name(run.task)).measures  # the measures the task's layout allows
        return evaluate(run.model, run.eval_sets, measures=True if applies is None else applies)


class PerClassIW:
    """The per-class IW accuracies (``per_class_iw.csv``, columns ``c0 .. c{K-1}``) as a callback
    of the training loop; called where ``TrainConfig.per_class_iw > 0``."""

    table = "per_class_iw"

    def __call__(self, run, row) -> dict[str, float]:
        K = run.generator.config.K
        acc = per_class_accuracy(run.model, run.per_class_set, K)
        return {f"c{k}": acc[k] for k in range(K)}
