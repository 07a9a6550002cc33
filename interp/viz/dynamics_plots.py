"""Figures of the nested-logit phenomenological model [docs/science.md section 4, reconstruction].

Functions take arrays and DataFrames (as returned by :func:`phenomenology.landscape.landscape_grid`,
:func:`phenomenology.landscape.gradient_flow` and
:meth:`phenomenology.fit.NestedLogitFit.predict_curves`) and return a
``plotly.graph_objects.Figure``; none calls ``.show()``. Export with
:func:`interp.viz.export.export_figure`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.viz.plots import METRIC_COLORS, METRIC_LABELS, OKABE_ITO, SEQUENTIAL_SCALE
from interp.viz.vocabulary import FITTED, FORECAST, OBSERVED, observed_name
from phenomenology.forecast import continuations, forecast_curve
from phenomenology.progress import THRESHOLD, progress_forecast

# Transition lines of the fit overlay and the forecast: the fit's or forecast's step in vermillion
# (no fitted curve uses it), the step seen on the data in dark grey, like the detected transitions
# of the other figures.
FORECAST_COLOR = OKABE_ITO[4]
OBSERVED_COLOR = "#333333"

PARAM_LABELS = {"beta1": "β₁ (layer-1 strength)", "alpha": "α (layer-2 match)", "xi": "ξ (gain)"}

# Curves a fit can overlay, by panel: losses on their own axis, the rest on [0, 1].
FIT_LOSS_COLUMNS = ("ic_loss",)
FIT_UNIT_COLUMNS = ("ic_acc", "cla", "ila1", "tila2")


def _title(title: str, note: str | None) -> dict:
    text = title if not note else f"{title}<br><sup>{note}</sup>"
    return {"text": text, "x": 0.5, "xanchor": "center"}


def plot_landscape(
    xs: Sequence[Real] | np.ndarray,
    ys: Sequence[Real] | np.ndarray,
    Z: np.ndarray,
    trajectory: pd.DataFrame | None = None,
    *,
    x: str = "alpha",
    y: str = "xi",
    fixed: Mapping[str, Real] | None = None,
    quantity: str = "loss",
    title: str = "Nested-logit loss landscape",
    note: str | None = None,
) -> go.Figure:
    """Loss over two of the three parameters, with a training trajectory drawn on it.

    Args:
        xs: grid values of parameter ``x`` (``[n_x]``).
        ys: grid values of parameter ``y`` (``[n_y]``).
        Z: the quantity on the grid, ``Z[i, j]`` at ``(xs[j], ys[i])`` (plotly's orientation, as
            :func:`~phenomenology.landscape.landscape_grid` returns it).
        trajectory: optional path with columns ``x`` and ``y`` (e.g. from
            :func:`~phenomenology.landscape.gradient_flow`), drawn from a circle to a cross.
        x: name of the x parameter (``beta1``, ``alpha`` or ``xi``).
        y: name of the y parameter.
        fixed: value of the third parameter, shown in the subtitle.
        quantity: what ``Z`` holds (colour-bar title).
        title: figure title.
        note: deviations or settings to label, printed under the title.

    Returns:
        A contour plot, plus the trajectory's line and its start and end markers.
    """
    xs = np.asarray(xs, dtype=float)
    ys = np.asarray(ys, dtype=float)
    Z = np.asarray(Z, dtype=float)
    if Z.shape != (len(ys), len(xs)):
        raise ValueError(f"Z must be [len(ys), len(xs)] = {(len(ys), len(xs))}, got {Z.shape}")
    fig = go.Figure(
        go.Contour(
            x=xs,
            y=ys,
            z=Z,
            name=quantity,
            colorscale=SEQUENTIAL_SCALE,
            ncontours=25,
            colorbar={"title": {"text": quantity}},
            hovertemplate=f"{x}=%{{x:.3g}}<br>{y}=%{{y:.3g}}<br>{quantity}=%{{z:.4f}}<extra></extra>",
        )
    )
    if trajectory is not None:
        missing = [c for c in (x, y) if c not in trajectory.columns]
        if missing:
            raise ValueError(
                f"trajectory lacks columns {missing}; it has {list(trajectory.columns)}"
            )
        # Vermillion reads on every part of the viridis scale (white vanishes on its yellow end).
        style = {"color": OKABE_ITO[4], "width": 3}
        fig.add_trace(
            go.Scatter(
                x=trajectory[x], y=trajectory[y], mode="lines", name="trajectory", line=style
            )
        )
        fig.add_trace(
            go.Scatter(
                x=trajectory[x].iloc[[0]],
                y=trajectory[y].iloc[[0]],
                mode="markers",
                name="start",
                marker={"symbol": "circle", "size": 10, "color": "white", "line": {"width": 2}},
            )
        )
        fig.add_trace(
            go.Scatter(
                x=trajectory[x].iloc[[-1]],
                y=trajectory[y].iloc[[-1]],
                mode="markers",
                name="end",
                marker={"symbol": "x", "size": 11, "color": "black"},
            )
        )
    if fixed:
        settings = ", ".join(f"{k} = {v:.3g}" for k, v in fixed.items())
        note = f"{settings}; {note}" if note else settings
    fig.update_xaxes(title_text=PARAM_LABELS.get(x, x), range=[xs[0], xs[-1]])
    fig.update_yaxes(title_text=PARAM_LABELS.get(y, y), range=[ys[0], ys[-1]])
    fig.update_layout(
        title=_title(title, note),
        width=640,
        height=520,
        legend={"bgcolor": "rgba(255,255,255,0.7)", "x": 0.01, "y": 0.99},
    )
    return fig


def _mark_fit_transitions(fig, marks, n_panels: int) -> None:
    """Vertical lines at the fit's transition and the one seen on the data, on every panel of a
    fit overlay, each named in the legend (with its step) and labelled on the outer side.

    Args:
        marks: ``(step, label, dash, color)`` per line; lines without a finite step are skipped.
    """
    # The two are often close: distinct colours and dashes, the step in the legend, and a label
    # on the outer side of each line, so neither hides the other.
    marks = sorted((m for m in marks if m[0] is not None and np.isfinite(m[0])), key=lambda m: m[0])
    for k, (step, label, dash, color) in enumerate(marks):
        before = len(fig.layout.shapes)
        fig.add_vline(
            x=step,
            line={"dash": dash, "color": color, "width": 1.5},
            opacity=0.9,
            row="all",
            col="all",
        )
        name = f"{label} (step {step:.0f})"
        for j, shape in enumerate(fig.layout.shapes[before:]):
            shape.update(name=name, legendgroup=label, showlegend=j == 0)
        left = k == 0 and len(marks) == 2  # the earlier of two: its label to the left
        fig.add_annotation(
            x=step,
            y=0.02,  # near the bottom: curves are mid-way there at a transition
            xref=f"x{n_panels}" if n_panels > 1 else "x",
            yref=f"y{n_panels} domain" if n_panels > 1 else "y domain",
            text=f"{step:.0f}",
            showarrow=False,
            xanchor="right" if left else "left",
            yanchor="bottom",
            align="right" if left else "left",
            xshift=-3 if left else 3,
            font={"color": color, "size": 11},
        )


def _fit_columns(metrics, predicted, columns) -> list[str]:
    if columns is None:
        candidates = (*FIT_LOSS_COLUMNS, *FIT_UNIT_COLUMNS)
        columns = [c for c in candidates if c in metrics.columns and c in predicted.columns]
    else:
        missing = [c for c in columns if c not in metrics.columns or c not in predicted.columns]
        if missing:
            raise ValueError(f"columns {missing} are not in both metrics and predicted")
    if not columns:
        raise ValueError("metrics and predicted share none of the curves a fit can overlay")
    return list(columns)


def plot_fit_overlay(
    metrics: pd.DataFrame,
    predicted: pd.DataFrame,
    fitted_step: Real | None = None,
    *,
    observed_step: Real | None = None,
    observed_label: str = OBSERVED,
    cutoff_step: Real | None = None,
    columns: Sequence[str] | None = None,
    title: str = "Nested-logit fit",
    note: str | None = None,
) -> go.Figure:
    """A run's curves (markers) with the fitted phenomenological curves (lines), the fit's
    transition and the one seen on the data.

    Args:
        metrics: the run's ``metrics.csv``.
        predicted: fitted curves in the run's units, with a ``step`` column and columns named like
            the metrics (as :meth:`~phenomenology.fit.NestedLogitFit.predict_curves` returns).
        fitted_step: the fit's transition step (dashed line): the *fitted transition* of a fit to
            the whole curve, a *forecast* when ``cutoff_step`` says the fit saw only part of it
            (:mod:`interp.viz.vocabulary`).
        observed_step: transition step detected on the data (dotted line).
        observed_label: its name (:func:`interp.viz.vocabulary.observed_name` of the curve it was
            detected on; the IC-loss cliff on ``ic_loss``).
        cutoff_step: last step the fit saw; later steps are shaded as "not seen by the fit".
        columns: curves to show (default: those of ``ic_loss, ic_acc, cla, ila1, tila2`` present
            in both tables). Pass the fitted ones: a model quantity the fit never compared with
            the data (e.g. the nested-logit model's soft ``cla`` beside the network's argmax CLA)
            is not a fit of that curve.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.

    Returns:
        Loss on the left and [0, 1] quantities on the right, one colour per curve, both panels on
        one step range.
    """
    for name, df in (("metrics", metrics), ("predicted", predicted)):
        if "step" not in df.columns:
            raise ValueError(f"{name} has no 'step' column")
    columns = _fit_columns(metrics, predicted, columns)
    loss_cols = [c for c in columns if c.endswith("loss")]
    unit_cols = [c for c in columns if not c.endswith("loss")]
    panels = [p for p in ((loss_cols, "loss"), (unit_cols, "accuracy / attention")) if p[0]]
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[name for _, name in panels],
        shared_xaxes=True,
        horizontal_spacing=0.16,
    )
    for col, (cols, _) in enumerate(panels, start=1):
        for column in cols:
            _add_fit_pair(fig, metrics, predicted, column, col)
    fitted_label = (
        FITTED if cutoff_step is None else f"{FORECAST} (fit on steps <= {cutoff_step:.0f})"
    )
    marks = [
        (fitted_step, fitted_label, "dash", FORECAST_COLOR),
        (observed_step, observed_label, "dot", OBSERVED_COLOR),
    ]
    _mark_fit_transitions(fig, marks, len(panels))
    last = float(max(metrics["step"].max(), predicted["step"].max()))
    if cutoff_step is not None:
        before = len(fig.layout.shapes)
        fig.add_vrect(
            x0=cutoff_step,
            x1=last,
            fillcolor="#999999",
            opacity=0.15,
            line_width=0,
            row="all",
            col="all",
        )
        for j, shape in enumerate(fig.layout.shapes[before:]):
            shape.update(name="not seen by the fit", legendgroup="cutoff", showlegend=j == 0)
    first = float(min(metrics["step"].min(), predicted["step"].min()))
    fig.update_xaxes(title_text="training step", tickformat="~s", range=[first, last])
    if loss_cols:
        fig.update_yaxes(title_text="loss", row=1, col=1)
    if unit_cols:
        fig.update_yaxes(title_text="value", range=[-0.02, 1.02], row=1, col=len(panels))
    # one panel: about 7 x 4 in printed two columns wide with its title and legend (in a column,
    # apply_paper_style keeps it at least 0.7 as tall as wide)
    height = 420 if len(panels) > 1 else 300
    fig.update_layout(title=_title(title, note), width=420 * len(panels) + 220, height=height)
    return fig


def _add_fit_pair(fig, metrics, predicted, column: str, col: int) -> None:
    """A run's curve (markers) and its fit (a line) in one colour, one legend group."""
    color = METRIC_COLORS.get(column, OKABE_ITO[col])
    label = METRIC_LABELS.get(column, column)
    fig.add_trace(
        go.Scatter(
            x=metrics["step"],
            y=metrics[column],
            mode="markers",
            name=f"{label} (run)",
            legendgroup=column,
            marker={"color": color, "size": 4, "opacity": 0.6},
        ),
        row=1,
        col=col,
    )
    fig.add_trace(
        go.Scatter(
            x=predicted["step"],
            y=predicted[column],
            mode="lines",
            name=f"{label} (fit)",
            legendgroup=column,
            line={"color": color, "width": 2.5},
        ),
        row=1,
        col=col,
    )


def plot_forecast(
    seen: pd.DataFrame,
    forecast: Mapping[str, float],
    fan_steps: Sequence[Real] | np.ndarray,
    fan: np.ndarray,
    *,
    later: pd.DataFrame | None = None,
    observed_step: Real | None = None,
    column: str = "ic_loss",
    title: str = "Forecast of the IC-loss cliff",
    note: str | None = None,
    progress: Mapping | None = None,
) -> go.Figure:
    """The curve seen so far, a fan of forecast continuations, the 80% interval on the step axis
    and, where the run went on, what it did.

    Args:
        seen: the rows the forecast saw (``step`` and ``column``).
        forecast: ``{"step", "low", "high"}`` (the forecast and its 80% interval).
        fan_steps, fan: continuation curves ``[k, len(fan_steps)]``
            (:func:`phenomenology.forecast.continuations`; may be empty).
        later: the rows after the cut-off, when the run went on (drawn as the observed
            continuation).
        observed_step: the transition seen on the whole curve (on ``ic_loss``: the IC-loss cliff,
            named so in the legend, :func:`interp.viz.vocabulary.observed_name`).
        column: the curve's column.
        title, note: figure title and a note under it.
        progress: for a forecast from a progress measure, a second panel below:
            ``{"column", "steps", "excess", "later_steps", "later_excess", "line_steps",
            "line", "threshold"}`` (the relative excess seen and after, the fitted exponential,
            the threshold it is read at).
    """
    if "step" not in seen.columns or column not in seen.columns:
        raise ValueError(f"seen needs the columns 'step' and {column!r}")
    fan = np.asarray(fan, float).reshape(-1, len(fan_steps)) if len(fan_steps) else np.empty((0, 0))
    rows = 2 if progress is not None else 1
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.6, 0.4][:rows] if rows == 2 else None,
    )
    label = METRIC_LABELS.get(column, column)
    _add_fan(fig, fan_steps, fan)
    _add_seen_and_later(fig, seen, later, column, label, row=1)
    if progress is not None:
        _add_progress_panel(fig, progress)
    last = float(seen["step"].max())
    _mark_forecast(fig, forecast, last, observed_step, observed_name(column), rows)
    fig.update_xaxes(title_text="training step", tickformat="~s", row=rows, col=1)
    fig.update_yaxes(title_text=label, row=1, col=1)
    fig.update_layout(title=_title(title, note), width=760, height=440 if rows == 1 else 640)
    return fig


def _add_fan(fig: go.Figure, fan_steps, fan: np.ndarray) -> None:
    """The forecast's continuation curves, faint, one legend entry for all."""
    for i, curve in enumerate(fan):
        fig.add_trace(
            go.Scatter(
                x=fan_steps,
                y=curve,
                mode="lines",
                line={"color": FORECAST_COLOR, "width": 1},
                opacity=0.25,
                name="forecast continuations",
                legendgroup="fan",
                showlegend=i == 0,
            ),
            row=1,
            col=1,
        )


def _add_seen_and_later(fig, seen, later, column: str, label: str, *, row: int) -> None:
    """The points the forecast saw (filled) and those after its cut-off (open)."""
    fig.add_trace(
        go.Scatter(
            x=seen["step"],
            y=seen[column],
            mode="markers",
            name=f"{label}: seen by the forecast",
            marker={"color": METRIC_COLORS.get(column, OKABE_ITO[1]), "size": 5},
        ),
        row=row,
        col=1,
    )
    if later is not None and len(later):
        fig.add_trace(
            go.Scatter(
                x=later["step"],
                y=later[column],
                mode="markers",
                name=f"{label}: the run went on",
                marker={"color": OBSERVED_COLOR, "size": 4, "symbol": "circle-open"},
            ),
            row=row,
            col=1,
        )


def _add_progress_panel(fig: go.Figure, progress: Mapping) -> None:
    """The progress measure's excess over its start (log axis), the fitted exponential growth and
    the threshold the forecast reads it at, on the second row."""
    pname = METRIC_LABELS.get(progress["column"], progress["column"])
    fig.add_trace(
        go.Scatter(
            x=progress["steps"],
            y=progress["excess"],
            mode="markers",
            name=f"{pname}: excess over its start, seen",
            marker={"color": METRIC_COLORS.get(progress["column"], OKABE_ITO[2]), "size": 5},
        ),
        row=2,
        col=1,
    )
    if len(progress.get("later_steps", ())):
        fig.add_trace(
            go.Scatter(
                x=progress["later_steps"],
                y=progress["later_excess"],
                mode="markers",
                name=f"{pname}: the run went on",
                marker={"color": OBSERVED_COLOR, "size": 4, "symbol": "circle-open"},
            ),
            row=2,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            x=progress["line_steps"],
            y=progress["line"],
            mode="lines",
            line={"color": FORECAST_COLOR, "width": 2},
            name="fitted exponential growth",
        ),
        row=2,
        col=1,
    )
    fig.add_hline(y=progress["threshold"], line={"dash": "dot", "color": "#999999"}, row=2, col=1)
    # (on a log axis an annotation's y is the log10 of the value)
    fig.add_annotation(
        text=f"threshold {progress['threshold']:g}",
        xref="x2 domain",
        x=0.01,
        yref="y2",
        y=float(np.log10(progress["threshold"])),
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
        font={"color": "#666666"},
    )
    fig.update_yaxes(
        type="log", exponentformat="power", title_text=f"{pname} / start - 1", row=2, col=1
    )


def _mark_forecast(fig, forecast, last: float, observed_step, observed_label: str, rows: int):
    """On every row: the forecast's 80% interval (shaded), the forecast (dashed), the last step
    the forecast saw and the step seen on the whole curve; legend entries on the first row."""
    low, high, step = forecast["low"], forecast["high"], forecast["step"]
    for r in range(1, rows + 1):
        first = r == 1
        fig.add_vrect(
            x0=low,
            x1=high,
            fillcolor=FORECAST_COLOR,
            opacity=0.15,
            line_width=0,
            name=f"80% interval [{low:.0f}, {high:.0f}]",
            showlegend=first,
            row=r,
            col=1,
        )
        lines = [
            (step, f"{FORECAST} {step:.0f}", "dash", FORECAST_COLOR, 2),
            (last, f"last step seen {last:.0f}", "solid", "#999999", 1),
        ]
        if observed_step is not None and np.isfinite(observed_step):
            lines.append(
                (observed_step, f"{observed_label} {observed_step:.0f}", "dot", OBSERVED_COLOR, 2)
            )
        for x, name, dash, color, width in lines:
            fig.add_vline(
                x=x,
                line={"dash": dash, "color": color, "width": width},
                name=name,
                showlegend=first,
                row=r,
                col=1,
            )


def forecast_figure(
    curve: pd.DataFrame,
    *,
    task: Mapping[str, float],
    until: float,
    column: str = "ic_loss",
    observed_step: float | None = None,
    note: str | None = None,
    optimizer: str | None = None,
    method: str = "template",
    progress_column: str = "tila2",
    forecast=None,
):
    """The forecast figure (:func:`plot_forecast`) of ``curve`` seen up to
    step ``until``: the rows after it, if any, are drawn as the observed continuation.

    ``method="progress"`` forecasts from ``progress_column`` (:mod:`phenomenology.progress`) and
    adds a panel of its excess and the fitted growth; the fan is then the template's shape warped
    to the progress forecast's interval (none when no template fits with a cliff ahead).
    ``method="combined"`` draws ``forecast`` (the transition law's prior updated by the curve,
    :func:`phenomenology.fit.calibrated_forecast`), with the template's shape warped to it.

    Raises:
        ValueError: one line, when there is no forecast to draw (it says why).
    """
    df = curve[["step", column]].dropna().sort_values("step")
    seen, later = df[df["step"] <= until], df[df["step"] > until]
    progress = None
    if method == "progress":
        pc = curve[["step", progress_column]].dropna().sort_values("step")
        pseen = pc[pc["step"] <= until]
        fc = progress_forecast(pseen["step"], pseen[progress_column], optimizer=optimizer)
        if not fc.ok:
            raise ValueError(f"--figure: nothing to draw, {fc.reason}")
        base = fc.detail["baseline"]
        rate, x_last = fc.detail["rate"], fc.detail["excess_last"]
        keep = lambda d: d[d[progress_column] > base]  # noqa: E731 (log axis: positive excess)
        ps, pl = keep(pseen), keep(pc[pc["step"] > until])
        line_steps = np.linspace(0.6 * fc.last_step, fc.high, 100)
        progress = {
            "column": progress_column,
            "steps": ps["step"],
            "excess": ps[progress_column] / base - 1,
            "later_steps": pl["step"],
            "later_excess": pl[progress_column] / base - 1,
            "line_steps": line_steps,
            "line": x_last * np.exp(rate * (line_steps - fc.last_step)),
            "threshold": THRESHOLD,
        }
        shape = forecast_curve(
            seen["step"], seen[column], task=task, optimizer=optimizer, check_plateau=False
        )
        if shape.ok and shape.raw_step > fc.last_step:
            shape.step, shape.low, shape.high = fc.step, fc.low, fc.high
            fan_fc = shape
        else:
            fan_fc = None
    elif method == "combined":
        if forecast is None or not forecast.ok:
            raise ValueError("--figure: nothing to draw, the combined forecast has no step")
        fc = forecast
        shape = forecast_curve(
            seen["step"], seen[column], task=task, optimizer=optimizer, check_plateau=False
        )
        fan_fc = None
        if shape.ok and shape.raw_step > fc.last_step:
            shape.step, shape.low, shape.high = fc.step, fc.low, fc.high
            fan_fc = shape
    else:  # the template forecast (also for a figure of the plain fit's forecast)
        fc = forecast_curve(seen["step"], seen[column], task=task, optimizer=optimizer)
        if not fc.ok:
            raise ValueError(f"--figure: nothing to draw, {fc.reason}")
        fan_fc = fc
    end = max(float(df["step"].max()), 1.3 * fc.high)
    fan_steps = np.linspace(fc.last_step, end, 300)
    fan = (
        continuations(fan_fc, fan_steps, task=task)[1] if fan_fc is not None else np.empty((0, 300))
    )
    how = {
        "progress": "its attention's growth",
        "combined": "the transition law's forecast updated by the curve",
    }.get(method, "the loss curve's template fit")
    return plot_forecast(
        seen,
        {"step": fc.step, "low": fc.low, "high": fc.high},
        fan_steps,
        fan,
        later=later,
        observed_step=observed_step,
        column=column,
        note=note,
        progress=progress,
        title=f"Forecast of the IC-loss cliff from {len(seen)} evaluations up to step "
        f"{fc.last_step:.0f}, by {how}",
    )
