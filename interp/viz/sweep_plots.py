"""Figures of a sweep (:mod:`interp.experiments.sweep`): final accuracies over the grid.

A 2-D grid is drawn as the phase diagram of :func:`plot_phase_diagram` (heatmaps of
final IC and IW accuracy, mean over seeds, values in the cells); a 1-D grid as IC, IC2 and IW
accuracy against the swept field, each seed a faint marker and the mean a line with its standard
deviation. Like every figure of the package, these take plain data (a sweep summary) and return a
``plotly.graph_objects.Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.viz.plots import METRIC_COLORS, METRIC_LABELS, SEQUENTIAL_SCALE, _title

__all__ = ["plot_sweep", "plot_sweep_curves", "plot_phase_diagram"]

_FAINT_OPACITY = 0.35


def _numeric_axis(values: Sequence) -> str | None:
    """``"linear"`` or ``"log"`` for a grid of plain numbers, None for anything else."""
    if not values or not all(isinstance(v, Real) and not isinstance(v, bool) for v in values):
        return None
    lo, hi = min(values), max(values)
    return "log" if lo > 0 and hi / lo >= 16 else "linear"


def plot_sweep_curves(
    summary: pd.DataFrame,
    x: str,
    *,
    values: Sequence[str] = ("ic_acc", "ic2_acc", "iw_acc"),
    order: Sequence | None = None,
    title: str = "Sweep",
    note: str | None = None,
) -> go.Figure:
    """Final accuracies against one swept field: seeds faint, their mean bold with error bars.

    Args:
        summary: one row per run with column ``x`` and the ``values`` (a sweep summary).
        x: the swept field (e.g. ``"eps"``).
        values: quantities to draw, one colour each.
        order: the field's values in order (default: sorted); numbers get a numeric axis
            (logarithmic when they span a factor of 16 or more), anything else a categorical one.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.

    Returns:
        The figure; error bars are the standard deviation over seeds (none for one seed).
    """
    missing = [c for c in (x, *values) if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks columns {missing}; it has {list(summary.columns)}")
    xs = list(order) if order is not None else sorted(summary[x].unique())
    axis = _numeric_axis(xs)
    position = (lambda v: v) if axis else str
    fig = go.Figure()
    for value in values:
        name = METRIC_LABELS.get(value, value)
        color = METRIC_COLORS.get(value)
        groups = {k: g[value].dropna() for k, g in summary.groupby(x, sort=False)}
        seeds = summary[[x, value]].dropna()
        fig.add_trace(
            go.Scatter(
                x=[position(v) for v in seeds[x]],
                y=seeds[value],
                mode="markers",
                name=f"{name} (each seed)",
                marker={"color": color, "opacity": _FAINT_OPACITY, "size": 6},
                showlegend=False,
                hovertemplate=f"{x}=%{{x}}<br>%{{y:.3f}}<extra>{name}, one seed</extra>",
            )
        )
        kept = [v for v in xs if v in groups and len(groups[v])]
        mean = [float(groups[v].mean()) for v in kept]
        std = [float(groups[v].std()) if len(groups[v]) > 1 else 0.0 for v in kept]
        fig.add_trace(
            go.Scatter(
                x=[position(v) for v in kept],
                y=mean,
                mode="lines+markers",
                name=name,
                line={"color": color, "width": 2},
                marker={"color": color, "size": 8},
                error_y={"type": "data", "array": std, "visible": bool(np.any(std))},
                hovertemplate=f"{x}=%{{x}}<br>mean %{{y:.3f}}<extra>{name}</extra>",
            )
        )
    if axis:
        fig.update_xaxes(title_text=x, type=axis)
    else:
        fig.update_xaxes(
            title_text=x, type="category", categoryorder="array", categoryarray=[str(v) for v in xs]
        )
    fig.update_yaxes(title_text="final accuracy", range=[-0.02, 1.02])
    fig.update_layout(title=_title(title, note), width=620, height=440)
    return fig


def plot_sweep(
    summary: pd.DataFrame,
    fields: Sequence[str],
    *,
    order: Mapping[str, Sequence] | None = None,
    title: str = "Phase diagram",
    note: str | None = None,
) -> go.Figure:
    """The figure of a 1-D or 2-D sweep: curves (:func:`plot_sweep_curves`) or heatmaps of final
    IC and IW accuracy (:func:`plot_phase_diagram`, first field on the x axis).

    Args:
        summary: one row per run (a sweep summary).
        fields: the swept fields, one or two.
        order: each field's values in grid order.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
    """
    order = dict(order or {})
    if len(fields) == 1:
        return plot_sweep_curves(
            summary, fields[0], order=order.get(fields[0]), title=title, note=note
        )
    if len(fields) == 2:
        return plot_phase_diagram(
            summary, fields[0], fields[1], title=title, note=note, order=order
        )
    raise ValueError(f"fields={list(fields)} is invalid: a figure shows one or two fields")


def plot_phase_diagram(
    summary: pd.DataFrame,
    x: str,
    y: str,
    *,
    values: Sequence[str] = ("ic_acc", "iw_acc"),
    title: str = "Phase diagram",
    note: str | None = None,
    order: Mapping[str, Sequence] | None = None,
) -> go.Figure:
    """Final IC and IW accuracy over two data parameters, one heatmap per quantity.

    Runs sharing ``(x, y)`` (seeds) are averaged. The axes are categorical so that grids on a
    log scale (K = 128, 512, 2048, ...) get equal cells.

    Args:
        summary: one row per run with the parameter columns ``x`` and ``y`` and the final values
            (e.g. the last row of each run's metrics joined to its task config).
        x: parameter on the x axis (e.g. ``"K"``).
        y: parameter on the y axis (e.g. ``"B"``).
        values: quantities to show, one panel each.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
        order: the order of the values of ``x`` and ``y`` on the axes (default: sorted), e.g. a
            sweep's grid, whose values may mix numbers and names (``L`` = ``"N"``, 32).

    Returns:
        Side-by-side annotated heatmaps with a shared 0-1 colour scale.
    """
    missing = [c for c in (x, y, *values) if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks columns {missing}; it has {list(summary.columns)}")
    mean = summary.groupby([y, x], sort=False)[list(values)].mean()
    order = order or {}
    xs = list(order[x]) if x in order else sorted(summary[x].unique())
    ys = list(order[y]) if y in order else sorted(summary[y].unique())
    fig = make_subplots(
        rows=1,
        cols=len(values),
        subplot_titles=[f"final {METRIC_LABELS.get(v, v)} accuracy" for v in values],
        horizontal_spacing=0.1,
    )
    for i, value in enumerate(values, start=1):
        grid = mean[value].unstack(x).reindex(index=ys, columns=xs)
        fig.add_trace(
            go.Heatmap(
                z=grid.to_numpy(dtype=float),
                x=[str(v) for v in xs],
                y=[str(v) for v in ys],
                name=METRIC_LABELS.get(value, value),
                zmin=0.0,
                zmax=1.0,
                colorscale=SEQUENTIAL_SCALE,
                showscale=i == len(values),
                colorbar={"title": {"text": "accuracy"}},
                texttemplate="%{z:.2f}",
                hovertemplate=f"{x}=%{{x}}<br>{y}=%{{y}}<br>%{{z:.3f}}<extra>{value}</extra>",
            ),
            row=1,
            col=i,
        )
    fig.update_xaxes(title_text=x, type="category")
    fig.update_yaxes(title_text=y, type="category", col=1)
    fig.update_yaxes(type="category")
    fig.update_layout(title=_title(title, note), width=420 * len(values) + 80, height=440)
    return fig
