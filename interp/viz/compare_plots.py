"""Runs of different configs side by side: each config's seeds averaged (one colour, labelled by
the fields that differ) and its mean transition step dashed (the groups are
:func:`interp.analysis.compare.group_runs`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from interp.analysis.compare import RunGroup, group_mean
from interp.analysis.transition import detect_run_transition
from interp.viz.plots import plot_run_comparison

__all__ = ["DYNAMICS_COLUMNS", "PROGRESS_COLUMNS", "group_transition", "comparison_figures"]

# Curves of the comparison figures (one panel each), as in the single-config figures.
# (IC2 accuracy follows IC accuracy closely; three panels keep the figure within a page.)
DYNAMICS_COLUMNS = ("train_loss", "ic_acc", "iw_acc")
PROGRESS_COLUMNS = ("ila1", "tila2", "cla")


def _group_name(group: RunGroup) -> str:
    n = len(group.runs)
    seeds = "seed " + str(group.seeds[0]) if n == 1 else f"mean of {n} seeds"
    return f"{group.label} ({seeds})"


def group_transition(group: RunGroup, column: str = "ic_acc") -> float | None:
    """Mean transition step of a group's seeds that transitioned (None if none did)."""
    found = [detect_run_transition(r.metrics, column) for r in group.runs if len(r.metrics)]
    found = [s for s in found if s is not None]
    return float(np.mean(found)) if found else None


def comparison_figures(groups: Sequence[RunGroup], note: str | None = None) -> dict[str, go.Figure]:
    """Different configs side by side (:func:`interp.viz.plots.plot_run_comparison`).

    Each config is one colour, labelled by the fields that differ; its seeds are averaged (the
    legend says how many). Its mean transition step is a dashed line in its colour.

    Args:
        groups: from :func:`group_runs` (two or more, typically).
        note: deviations from the paper's settings, printed under the title.

    Returns:
        ``{"training_dynamics": ..., "progress_measures": ...}``.
    """
    metrics = {_group_name(g): group_mean(g) for g in groups}
    transitions = {_group_name(g): group_transition(g) for g in groups}
    columns = set().union(*(m.columns for m in metrics.values()))
    dynamics = [c for c in DYNAMICS_COLUMNS if c in columns]
    progress = [c for c in PROGRESS_COLUMNS if c in columns]
    what = "configs compared; each config's seeds averaged, dashed: its mean transition"
    full_note = f"{note}; {what}" if note else what
    figures = {
        "training_dynamics": plot_run_comparison(
            metrics, dynamics, transitions, title="Training dynamics", note=full_note
        )
    }
    if progress:
        figures["progress_measures"] = plot_run_comparison(
            metrics, progress, transitions, title="Progress measures", note=full_note
        )
    for fig in figures.values():  # narrower panels than plot_run_comparison's default 420 px
        n_panels = len([k for k in fig.layout if k.startswith("xaxis")])
        fig.update_layout(width=300 * n_panels + 220, legend={"font": {"size": 11}})
    return figures
