"""Probes applied to every checkpoint of a finished run: new probes on old runs.

:func:`measures_over_checkpoints` loads each saved checkpoint, runs the IC set through it once with
only the attention patterns cached, and applies a set of probes. The result is a tidy DataFrame
``(step, measure, value)``, ready for ``pivot`` or plotting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pandas as pd
import torch

from interp.analysis.evaluation import accuracy_and_loss
from interp.analysis.measures import compute_measures
from interp.analysis.probes import cache_patterns
from interp.io.rundir import Run, load_run

__all__ = [
    "measures_over_checkpoints",
    "patterns_over_checkpoints",
    "score_terms_over_checkpoints",
    "Probe",
]

# A probe takes (patterns per layer, logits, batch) and returns a float or a dict of floats.
Probe = Callable[[list, torch.Tensor, object], "float | Mapping[str, float]"]


@torch.no_grad()
def measures_over_checkpoints(
    run: Run | str | os.PathLike,
    probes: Mapping[str, Probe] | None = None,
    *,
    steps: list[int] | None = None,
    n: int | None = None,
    set_name: str = "ic",
    device: str = "cpu",
) -> pd.DataFrame:
    """Apply probes to every checkpoint of a run.

    Args:
        run: a :class:`~interp.io.rundir.Run` or its directory.
        probes: ``{name: probe}``; a probe returning a dict contributes one measure per key
            (named by the key). Default: accuracy and loss on the set (named ``ic_acc`` and
            ``ic_loss`` whatever the set) and every registered measure
            (:data:`interp.analysis.measures.MEASURES`, computed as in training's evaluation).
        steps: checkpoints to use (default: all).
        n: sequences of the evaluation set (default: the run's ``n_eval``).
        set_name: evaluation set, ``ic``, ``ic2`` or ``iw``.
        device: where to run the model.

    Returns:
        Tidy DataFrame with columns ``step, measure, value``.
    """
    run = run if isinstance(run, Run) else load_run(run)
    steps = steps or run.require_checkpoints()  # none: an error, never an empty table
    batch = run.eval_sets(n=n)[set_name].to(device)
    rows = []
    for step in steps:
        model = run.load_model(step, device=device)
        if probes is None:
            logits, values = compute_measures(model, batch)
            acc, loss = accuracy_and_loss(logits, batch)
            values = {"ic_acc": acc, "ic_loss": loss, **values}
            rows.extend({"step": step, "measure": k, "value": v} for k, v in values.items())
            continue
        logits, patterns = cache_patterns(model, batch)
        for name, probe in probes.items():
            value = probe(patterns, logits, batch)
            items = value.items() if isinstance(value, Mapping) else [(name, value)]
            rows.extend({"step": step, "measure": k, "value": float(v)} for k, v in items)
    return pd.DataFrame(rows, columns=["step", "measure", "value"])


@torch.no_grad()
def score_terms_over_checkpoints(
    run: Run | str | os.PathLike,
    *,
    steps: list[int] | None = None,
    n: int | None = None,
    layer: int = 0,
    device: str = "cpu",
) -> pd.DataFrame:
    """The positional part of ``layer``'s scores (:func:`interp.analysis.score_terms.score_terms`)
    at every checkpoint, on the run's IC set: tidy rows ``step, measure, value`` with measures
    ``l{layer+1}_pos_margin``, ``l{layer+1}_pos_margin_content_free``, ``l{layer+1}_pos_share``."""
    from interp.analysis.score_terms import score_terms

    run = run if isinstance(run, Run) else load_run(run)
    steps = steps or run.require_checkpoints()
    batch = run.eval_sets(n=n)["ic"].to(device)
    rows = []
    for step in steps:
        terms = score_terms(run.load_model(step, device=device), batch, layer=layer)
        rows.extend(
            {"step": step, "measure": f"l{layer + 1}_{k}", "value": v} for k, v in terms.items()
        )
    return pd.DataFrame(rows, columns=["step", "measure", "value"])


@torch.no_grad()
def patterns_over_checkpoints(
    run: Run | str | os.PathLike,
    *,
    steps: list[int] | None = None,
    n: int = 256,
    set_name: str = "ic",
) -> tuple[list[int], torch.Tensor, object]:
    """Attention patterns of every layer at every checkpoint, on the first ``n`` sequences.

    Returns:
        ``(steps, patterns [step, layer, batch, query_pos, key_pos] (head 0), batch)``.
    """
    run = run if isinstance(run, Run) else load_run(run)
    batch = run.eval_sets()[set_name][:n]
    steps = steps or run.checkpoint_steps
    out = []
    for step in steps:
        _, patterns = cache_patterns(run.load_model(step), batch)
        out.append(torch.stack([p[:, 0] for p in patterns]))
    return steps, torch.stack(out), batch
