"""Figures of the local learning coefficient (:mod:`interp.analysis.llc`) beside the progress
measures.

- :func:`plot_llc`: the LLC (mean over chains, each chain as a dot, +-1 std band) against step, on
  the same step axis as IC accuracy and the progress measures ILA1 / TILA2, with the detected
  transition marked. Estimates flagged by their diagnostics are drawn as red crosses and are not
  joined into the curve, so a bad hyperparameter never passes for a feature of the curve.
- :func:`plot_calibration_traces`: the LLC trace of every chain for each (step size, inverse
  temperature) pair of a calibration sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.viz.plots import (
    METRIC_COLORS,
    METRIC_LABELS,
    OKABE_ITO,
    _as_steps,
    _mark_transitions,
    _title,
)

LLC_COLOR = OKABE_ITO[4]
FLAG_COLOR = "#C00000"
PANEL_MEASURES = ("ic_acc", "ila1", "tila2")


def _add_llc_traces(fig, llc: pd.DataFrame, good: pd.DataFrame, flagged, warn) -> None:
    """The upper panel of :func:`plot_llc`: the mean of the chains with its band, each chain as a
    dot, and the flagged estimates as crosses (never joined into the curve)."""
    if len(good):
        std = good["llc_std"].fillna(0.0).to_numpy(dtype=float)
        mean = good["llc_mean"].to_numpy(dtype=float)
        x = good["step"].to_numpy(dtype=float)
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([x, x[::-1]]),
                y=np.concatenate([mean + std, (mean - std)[::-1]]),
                fill="toself",
                fillcolor="rgba(213,94,0,0.2)",
                line={"width": 0},
                name="LLC ± 1 std (chains)",
                hoverinfo="skip",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=mean,
                mode="lines+markers",
                name="LLC (mean of chains)",
                line={"color": LLC_COLOR, "width": 2.5},
                marker={"size": 5},
                hovertemplate="LLC<br>step %{x}<br>%{y:.3g}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    chain_cols = [c for c in llc.columns if c.startswith("llc_chain_")]
    if chain_cols and len(good):
        xs = np.repeat(good["step"].to_numpy(dtype=float), len(chain_cols))
        ys = good[chain_cols].to_numpy(dtype=float).reshape(-1)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name="LLC (each chain)",
                marker={"color": LLC_COLOR, "size": 3, "opacity": 0.5},
                hovertemplate="chain LLC<br>step %{x}<br>%{y:.3g}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    if flagged.any():
        bad = llc[flagged]
        finite = np.isfinite(bad["llc_mean"].to_numpy(dtype=float))
        y0 = float(np.nanmin(good["llc_mean"])) if len(good) else 0.0
        fig.add_trace(
            go.Scatter(
                x=bad["step"],
                y=np.where(finite, bad["llc_mean"], y0),
                mode="markers",
                name="flagged estimate (see warning)",
                marker={"color": FLAG_COLOR, "symbol": "x", "size": 8},
                text=warn[flagged],
                hovertemplate="step %{x}<br>LLC %{y:.3g}<br>%{text}<extra></extra>",
            ),
            row=1,
            col=1,
        )


def plot_llc(
    metrics: pd.DataFrame,
    llc: pd.DataFrame,
    transition_step: Real | Sequence[Real] | None = None,
    *,
    title: str = "Local learning coefficient over training",
    note: str | None = None,
    measures: Sequence[str] = PANEL_MEASURES,
) -> go.Figure:
    """LLC against step above IC accuracy and the progress measures, transition marked.

    Args:
        metrics: the run's ``metrics.csv``.
        llc: the run's ``llc.csv`` (:func:`interp.analysis.llc.read_llc_csv`).
        transition_step: detected transition step(s), dashed vertical lines on both panels.
        title: figure title.
        note: deviations from the paper's settings, under the title (the SGLD settings are added).
        measures: ``metrics.csv`` columns for the lower panel (those present are drawn).

    Returns:
        Two rows sharing the step axis: the LLC, then the measures.
    """
    if "step" not in llc.columns or "llc_mean" not in llc.columns:
        raise ValueError(
            "llc has no 'step'/'llc_mean' columns (see interp.analysis.llc.llc_columns)"
        )
    llc = llc.sort_values("step")
    warn = llc["warning"].fillna("").astype(str) if "warning" in llc else pd.Series("", llc.index)
    flagged = (warn != "") | ~np.isfinite(llc["llc_mean"].to_numpy(dtype=float))
    good = llc[~flagged]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=["LLC (SGLD, devinterp)", "IC accuracy and progress measures"],
    )
    _add_llc_traces(fig, llc, good, flagged, warn)
    for column in measures:
        if column not in metrics.columns:
            continue
        fig.add_trace(
            go.Scatter(
                x=metrics["step"],
                y=metrics[column],
                mode="lines",
                name=METRIC_LABELS.get(column, column),
                line={"color": METRIC_COLORS.get(column, OKABE_ITO[0]), "width": 2},
                hovertemplate=f"{METRIC_LABELS.get(column, column)}<br>step %{{x}}<br>"
                "%{y:.3f}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(title_text="LLC", row=1, col=1)
    fig.update_yaxes(range=[-0.02, 1.02], row=2, col=1)
    fig.update_xaxes(tickformat="~s")
    fig.update_xaxes(title_text="training step", row=2, col=1)
    _mark_transitions(fig, _as_steps(transition_step))
    fig.update_layout(
        title=_title(title, "; ".join(n for n in (_settings_note(llc), note) if n)),
        width=700,
        height=620,
    )
    return fig


def _settings_note(llc: pd.DataFrame) -> str | None:
    """``"SGLD eps 1e-4, nbeta 26.4, gamma 100, 4 chains x 100 draws"`` from llc.csv's columns."""
    need = ("epsilon", "nbeta", "localization", "chains", "draws")
    if llc.empty or not all(c in llc.columns for c in need):
        return None
    r = llc.iloc[-1]
    return (
        f"SGLD eps {r['epsilon']:g}, nbeta {r['nbeta']:.3g}, gamma {r['localization']:g}, "
        f"{int(r['chains'])} chains x {int(r['draws'])} draws"
    )


def plot_calibration_traces(
    sweep: pd.DataFrame, *, step: int, chosen: dict | None = None
) -> go.Figure:
    """LLC traces of a calibration sweep: one panel per (epsilon, nbeta), one line per chain.

    Args:
        sweep: rows with ``epsilon``, ``nbeta``, ``llc/trace`` (``[chains, draws]``) and
            ``warning`` (as :func:`interp.analysis.llc.calibrate_llc` builds them).
        step: the checkpoint calibrated on, for the title.
        chosen: the chosen ``{"epsilon", "nbeta"}``, whose panel title is starred.

    Returns:
        A grid figure: rows are step sizes, columns inverse temperatures.
    """
    eps = sorted(sweep["epsilon"].unique())
    betas = sorted(sweep["nbeta"].unique())
    titles = []
    for e in eps:
        for b in betas:
            row = sweep[(sweep["epsilon"] == e) & (sweep["nbeta"] == b)]
            star = (
                " *"
                if chosen
                and math.isclose(chosen["epsilon"], e)
                and math.isclose(chosen["nbeta"], b)
                else ""
            )
            flag = " (flagged)" if len(row) and row.iloc[0].get("warning", "") else ""
            titles.append(f"eps {e:g}, nbeta {b:.3g}{star}{flag}")
    fig = make_subplots(rows=len(eps), cols=len(betas), subplot_titles=titles)
    for i, e in enumerate(eps, start=1):
        for j, b in enumerate(betas, start=1):
            row = sweep[(sweep["epsilon"] == e) & (sweep["nbeta"] == b)]
            if row.empty:
                continue
            trace = np.atleast_2d(np.asarray(row.iloc[0]["llc/trace"], dtype=float))
            for c, values in enumerate(trace):
                fig.add_trace(
                    go.Scatter(
                        y=values,
                        mode="lines",
                        name=f"chain {c}",
                        legendgroup=f"chain {c}",
                        showlegend=(i, j) == (1, 1),
                        line={"color": OKABE_ITO[c % 7], "width": 1},
                    ),
                    row=i,
                    col=j,
                )
    fig.update_xaxes(title_text="draw", row=len(eps))
    fig.update_yaxes(title_text="LLC", col=1)
    fig.update_layout(
        title=_title(
            f"LLC calibration at step {step}",
            "* chosen: no warning, LLC settled across step sizes (llc_calibration.json)",
        ),
        width=max(500, 300 * len(betas)),
        height=max(400, 230 * len(eps) + 120),
    )
    return fig


def llc_figure_for_run(run, transition_step: Real | None = None, note: str | None = None):
    """:func:`plot_llc` of a run whose directory holds an ``llc.csv`` (None when it does not).

    Args:
        run: a :class:`interp.io.rundir.Run`.
        transition_step: its detected transition step, if any.
        note: its deviations from the paper's settings.
    """
    from pathlib import Path

    from interp.analysis.llc import LLC_CSV, read_llc_csv

    path = Path(run.path) / LLC_CSV
    if not path.exists():
        return None
    return plot_llc(
        run.metrics,
        read_llc_csv(path),
        transition_step,
        title=f"Local learning coefficient: {Path(run.path).name}",
        note=note,
    )


def write_calibration_traces(run_dir, sweep: pd.DataFrame, *, step: int, chosen: dict | None):
    """Write :func:`plot_calibration_traces` of a calibration sweep
    (:func:`interp.analysis.llc_calibration.calibrate_llc`) to the run's
    ``llc_calibration_traces.html``; returns its path."""
    from pathlib import Path

    from interp.analysis.llc_calibration import CALIBRATION_HTML
    from interp.io.atomic import write_text_atomic

    fig = plot_calibration_traces(sweep, step=step, chosen=chosen)
    path = Path(run_dir) / CALIBRATION_HTML
    write_text_atomic(
        path, fig.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True)
    )
    return path
