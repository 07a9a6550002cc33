"""Figures of the quanta analysis (:mod:`interp.analysis.quanta`): is the smooth IW curve a sum of
sharp per-class steps?

- :func:`plot_quanta`: two panels on one step axis. Top: the measured IW accuracy, its exact
  decomposition ``sum_k p(k) acc_k(t)``, the sum of sharp steps ``sum_k p(k) 1[t >= t_k]``, IC
  accuracy, and the ICL transition (dashed). Bottom: the accuracy of every class as a raster,
  classes sorted by frequency rank (rank 1, the most frequent, at the top), each class's ``t_k``
  marked.
- :func:`plot_rank_exponent`: ``t_k`` against frequency rank on log-log axes, the fitted line and
  a line of the predicted slope ``alpha`` through the same centre.
- :func:`quanta_figures_for_run`: both for a run whose directory holds ``per_class_iw.csv``.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.viz.plots import (
    METRIC_COLORS,
    METRIC_LABELS,
    OKABE_ITO,
    SEQUENTIAL_SCALE,
    _as_steps,
    _mark_transitions,
    _title,
)

__all__ = ["plot_quanta", "plot_rank_exponent", "quanta_figures_for_run"]

EXACT_COLOR = OKABE_ITO[7]
STEPS_COLOR = OKABE_ITO[0]
FIT_COLOR = OKABE_ITO[3]
PREDICTED_COLOR = OKABE_ITO[4]


def _add_decomposition(fig, analysis, dec) -> None:
    """The upper panel of :func:`plot_quanta`: measured IW accuracy, its exact and sharp-step
    decompositions over classes, and IC accuracy."""
    metrics_like = [
        ("measured", dec["measured"], "IW accuracy (measured)", METRIC_COLORS["iw_acc"], "solid"),
        ("exact", dec["exact"], "Σ p(k) acc_k(t) (exact)", EXACT_COLOR, "dash"),
        ("steps", dec["steps"], "Σ p(k) 1[t ≥ t_k] (sharp steps)", STEPS_COLOR, "solid"),
    ]
    for key, values, name, color, dash in metrics_like:
        fig.add_trace(
            go.Scatter(
                x=dec["step"],
                y=values,
                mode="lines",
                name=name,
                line={"color": color, "width": 2 if key == "measured" else 1.5, "dash": dash},
                line_shape="hv" if key == "steps" else "linear",
                hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    ic = analysis.ic_curve
    if ic is not None:
        fig.add_trace(
            go.Scatter(
                x=ic["step"],
                y=ic["ic_acc"],
                mode="lines",
                name=f"{METRIC_LABELS['ic_acc']} accuracy",
                line={"color": METRIC_COLORS["ic_acc"], "width": 1.5},
                hovertemplate="IC accuracy<br>step %{x}<br>%{y:.3f}<extra></extra>",
            ),
            row=1,
            col=1,
        )


def plot_quanta(analysis, *, title: str = "Per-class in-weights learning", note=None) -> go.Figure:
    """IW accuracy and its per-class decomposition above the per-class accuracy raster.

    Args:
        analysis: a :class:`interp.analysis.quanta.QuantaAnalysis`
            (:func:`~interp.analysis.quanta.analyse_run`).
        title: figure title.
        note: deviations from the paper's settings, under the title (the learning rule and the
            two RMS distances are added).

    Returns:
        Two rows sharing the step axis: the curves (top), the raster (bottom).
    """
    from interp.analysis.quanta import class_columns, ranks_tie

    frame = analysis.frame.sort_values("step")
    steps = frame["step"].to_numpy(dtype=float)
    acc = frame[class_columns(frame)].to_numpy(dtype=float)  # [T, K]
    tie = ranks_tie(analysis.ranks)
    order = np.argsort(analysis.ranks, kind="stable")  # by rank, then by class
    position = np.arange(1, len(order) + 1)  # row of each class in the raster, 1 = top
    dec = analysis.decomposition.curves
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.4, 0.6],
        subplot_titles=[
            "IW accuracy and its decomposition over classes",
            f"IW accuracy of each class ({analysis.per_class_iw} sequences each)",
        ],
    )
    _add_decomposition(fig, analysis, dec)
    fig.add_trace(
        go.Heatmap(
            x=steps,
            y=position,
            z=acc[:, order].T,
            zmin=0.0,
            zmax=1.0,
            colorscale=SEQUENTIAL_SCALE,
            name="accuracy of each class",
            colorbar={"title": {"text": "accuracy"}, "len": 0.55, "y": 0.3, "thickness": 12},
            customdata=np.broadcast_to(order[:, None], (len(order), len(steps))),
            hovertemplate="class %{customdata}<br>row %{y}<br>step %{x}<br>accuracy %{z:.3f}"
            "<extra></extra>",
        ),
        row=2,
        col=1,
    )
    t_k = analysis.t_k.to_numpy(dtype=float)[order]
    learned = np.isfinite(t_k)
    fig.add_trace(
        go.Scatter(
            x=t_k[learned],
            y=position[learned],
            mode="markers",
            name=f"t_k (accuracy ≥ {analysis.threshold:g} at {analysis.confirm} evaluations)",
            marker={"color": "white", "size": 3, "line": {"color": "black", "width": 0.5}},
            customdata=order[learned],
            hovertemplate="class %{customdata}<br>t_k %{x}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    _mark_transitions(fig, _as_steps(analysis.transition_step), label="ICL transition")
    fig.update_yaxes(title_text="accuracy", range=[-0.02, 1.02], row=1, col=1)
    fig.update_yaxes(
        title_text="class (α = 0: all ranks tie)" if tie else "frequency rank",
        autorange="reversed",
        row=2,
        col=1,
    )
    fig.update_xaxes(tickformat="~s")
    fig.update_xaxes(title_text="training step", row=2, col=1)
    dec_note = (
        f"RMS to measured IW: exact {analysis.decomposition.rms_exact:.3f}, sharp steps "
        f"{analysis.decomposition.rms_steps:.3f}; {analysis.n_learned}/{analysis.K} classes "
        f"learned; α = {analysis.alpha:g}"
    )
    fig.update_layout(
        title=_title(title, "; ".join(n for n in (dec_note, note) if n)), width=760, height=760
    )
    return fig


def plot_rank_exponent(analysis, *, title: str = "Learning step against frequency rank", note=None):
    """``t_k`` against frequency rank (log-log), the fitted slope and the predicted one.

    Args:
        analysis: a :class:`interp.analysis.quanta.QuantaAnalysis`.
        title: figure title.
        note: deviations from the paper's settings, under the title.

    Returns:
        The figure, or None when there is nothing to draw: all ranks tie (``alpha = 0``) or no
        class was learned.
    """
    from interp.analysis.quanta import ranks_tie

    t_k = analysis.t_k.to_numpy(dtype=float)
    ranks = np.asarray(analysis.ranks, dtype=float)
    use = np.isfinite(t_k) & (t_k > 0)
    if ranks_tie(ranks) or not use.any():
        return None
    fit = analysis.fit
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=ranks[use],
            y=t_k[use],
            mode="markers",
            name=f"learned classes ({int(use.sum())} of {len(t_k)} with t_k > 0)",
            marker={"color": OKABE_ITO[1], "size": 5},
            customdata=np.flatnonzero(use),
            hovertemplate="class %{customdata}<br>rank %{x}<br>t_k %{y}<extra></extra>",
        )
    )
    if fit.slope is not None:
        x = np.geomspace(ranks[use].min(), ranks[use].max(), 50)
        logx = np.log(ranks[use])
        centre_x, centre_y = logx.mean(), np.log(t_k[use]).mean()
        interval = (
            f" [{fit.low:.2f}, {fit.high:.2f}] ({fit.level:.0%})" if fit.low is not None else ""
        )
        for slope, name, color, dash in (
            (fit.slope, f"fit: slope {fit.slope:.2f}{interval}", FIT_COLOR, "solid"),
            (analysis.alpha, f"predicted: slope α = {analysis.alpha:g}", PREDICTED_COLOR, "dash"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=np.exp(centre_y + slope * (np.log(x) - centre_x)),
                    mode="lines",
                    name=name,
                    line={"color": color, "width": 2, "dash": dash},
                    hoverinfo="skip",
                )
            )
    fig.update_xaxes(type="log", title_text="frequency rank (1 = most frequent)")
    fig.update_yaxes(type="log", title_text="t_k (training step)")
    fig.update_layout(title=_title(title, note), width=520, height=440)
    return fig


def quanta_figures_for_run(
    run, transition_step: Real | None = None, note: str | None = None
) -> dict[str, go.Figure]:
    """The quanta figures of a run with ``per_class_iw.csv`` (empty when it has none).

    Args:
        run: a :class:`interp.io.rundir.Run`.
        transition_step: its ICL transition (drawn instead of the one the analysis detects).
        note: its deviations from the paper's settings.

    Returns:
        ``{"quanta": ..., "quanta_rank": ...}`` (the second only when ranks differ and some
        class was learned).
    """
    from interp.analysis.quanta import analyse_run
    from interp.io.rundir import PER_CLASS_IW_NAME

    if not (run.path / PER_CLASS_IW_NAME).is_file():
        return {}
    analysis = analyse_run(run)
    if transition_step is not None:
        import dataclasses

        analysis = dataclasses.replace(analysis, transition_step=float(transition_step))
    name = run.path.name
    figures = {"quanta": plot_quanta(analysis, title=f"Per-class IW learning: {name}", note=note)}
    rank = plot_rank_exponent(analysis, title=f"t_k against frequency rank: {name}", note=note)
    if rank is not None:
        figures["quanta_rank"] = rank
    return figures
