"""Figures for the in-context classification runs.

Every function takes plain data (metrics DataFrames in the run-directory format of
``docs/CONTRACT.md``, attention patterns as arrays) and returns a
``plotly.graph_objects.Figure``; none calls ``.show()``. Exporting (static files, CSV of the
plotted data, paper style) lives in :mod:`interp.viz.export`.

Callers that depart from the paper's settings (Reddy, ICLR 2024) pass a ``note`` such as
``"Adam lr 1e-3 (author's code: SGD 0.01)"``; it is printed under the title so that a figure never
silently passes for the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from jaxtyping import Float
from plotly.subplots import make_subplots

from interp.analysis.dead_units import PANEL as ACTIVE_UNITS_PANEL
from interp.analysis.measures import MEASURES, MeasureTable
from interp.viz.vocabulary import OBSERVED

# Okabe & Ito (2008), "Color universal design": distinguishable under the common colour-vision
# deficiencies. Their black comes last here, so that it goes to the train loss and to marks.
OKABE_ITO = (
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#009E73",  # bluish green
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#F0E442",  # yellow (weak on white: used last)
    "#000000",  # black
)

# IW accuracy and loss: a mid grey, apart from every Okabe-Ito hue that the registered measures
# take (vermillion is the previous-token score's, drawn beside IW in the explorer).
IW_COLOR = "#7F7F7F"

# A perceptually uniform, colour-blind-safe sequential scale for attention weights and losses.
SEQUENTIAL_SCALE = "Viridis"

# Display names and colours of the metrics.csv columns, so every figure speaks the same words:
# accuracies and losses here, each progress measure's own label and colour from its registration
# (interp.analysis.measures.MEASURES, read at lookup time).
METRIC_LABELS = MeasureTable(
    "label",
    {
        "train_loss": "train loss",
        "ic_loss": "IC loss",
        "ic2_loss": "IC2 loss",
        "iw_loss": "IW loss",
        "ic_acc": "IC",
        "ic2_acc": "IC2",
        "iw_acc": "IW",
    },
)
METRIC_COLORS = MeasureTable(
    "color",
    {
        "train_loss": OKABE_ITO[7],
        "ic_loss": OKABE_ITO[3],
        "ic2_loss": OKABE_ITO[2],
        "iw_loss": IW_COLOR,
        "ic_acc": OKABE_ITO[3],
        "ic2_acc": OKABE_ITO[2],
        "iw_acc": IW_COLOR,
    },
)


# Dashes of curves that run close to another on a shared axis (IC2 accuracy tracks IC accuracy;
# the previous-token score tracks ILA1 from the jump on, beside it in the explorer).
METRIC_DASHES = {"ic2_acc": "dash", "ic2_loss": "dash", "prev_token_score": "dash"}


def progress_panels() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Rows of the progress-measure figure, ``(panel title, columns)``, from the registered
    measures' declarations (:attr:`interp.analysis.measures.Measure.panel`, plugins' included),
    panels in the order their first measure was registered; IC accuracy joins the accuracy panel
    beside CLA. Columns a run lacks are skipped when drawing."""
    rows: dict[str, list[str]] = {}
    for m in MEASURES.values():
        if m.panel:
            rows.setdefault(m.panel, []).append(m.name)
    if "accuracy (IC set)" in rows:
        rows["accuracy (IC set)"].append("ic_acc")
    return tuple((name, tuple(columns)) for name, columns in rows.items())


# y-axis title of each default progress panel (other panels: "value").
PANEL_Y_TITLES = {
    "attention (IC set)": "attention share",
    "accuracy (IC set)": "accuracy",
    "head scores": "score",
    ACTIVE_UNITS_PANEL: "share firing",
}

# Two measures closer than this at every step are the same curve (e.g. the induction score and
# TILA2 when B = 1: only the query row has an induction target).
_SAME_CURVE_ATOL = 1e-6

_FAINT_OPACITY = 0.3
_TRANSITION_COLOR = "#333333"

Metrics = pd.DataFrame | Sequence[pd.DataFrame] | Mapping[str, pd.DataFrame]
# Steps and other numbers may come as Python ints or floats, numpy scalars or arrays: the hints
# say so (numbers.Real covers all the scalars) for runtime type checkers such as beartype.
Steps = Sequence[Real] | np.ndarray


def token_labels(n_pairs: int) -> list[str]:
    """Token-role labels of one sequence: ``["x1", "l1", ..., "xN", "lN", "xq"]``.

    Args:
        n_pairs: number N of item-label pairs in the context.

    Returns:
        The 2N+1 labels, item i at position 2(i-1), its label at 2(i-1)+1, the query last.
    """
    if n_pairs < 0:
        raise ValueError(f"n_pairs must be >= 0, got {n_pairs}")
    labels = [f"{role}{i}" for i in range(1, n_pairs + 1) for role in ("x", "l")]
    return [*labels, "xq"]


def token_hover(
    item_classes: Sequence[Integral] | np.ndarray,
    item_labels: Sequence[Integral] | np.ndarray,
    query_class: Integral,
    target: Integral | None = None,
) -> list[str]:
    """Hover text for each token of one sequence: its role, class id and label id.

    Args:
        item_classes: class id of each of the N context items (novel classes have ids >= K).
        item_labels: label id shown after each item.
        query_class: class id of the query item.
        target: label the network must output, shown on the query when given.

    Returns:
        2N+1 strings aligned with :func:`token_labels`.
    """
    classes = [int(c) for c in np.asarray(item_classes).ravel()]
    labels = [int(c) for c in np.asarray(item_labels).ravel()]
    if len(classes) != len(labels):
        raise ValueError(
            f"item_classes and item_labels must have the same length, "
            f"got {len(classes)} and {len(labels)}"
        )
    roles = token_labels(len(classes))
    text = []
    for i, (c, y) in enumerate(zip(classes, labels, strict=True)):
        text.append(f"{roles[2 * i]}: item of class {c} (label {y})")
        text.append(f"{roles[2 * i + 1]}: label {y} (of class {c})")
    query = f"xq: query of class {int(query_class)}"
    if target is not None:
        query += f" (target label {int(target)})"
    return [*text, query]


def _title(title: str, note: str | None) -> dict:
    """A layout title with the deviation note, if any, on a smaller second line."""
    text = title if not note else f"{title}<br><sup>{note}</sup>"
    return {"text": text, "x": 0.5, "xanchor": "center"}


def _seeds_note(runs: Mapping[str, pd.DataFrame], note: str | None) -> str | None:
    """Say how to read faint and bold lines when there are several runs."""
    if len(runs) < 2:
        return note
    how = f"faint: each of {len(runs)} runs, bold: their mean"
    return f"{note}; {how}" if note else how


def _as_runs(metrics: Metrics) -> dict[str, pd.DataFrame]:
    """Name the runs: a single DataFrame, a list (seed 0, 1, ...) or a name -> DataFrame map."""
    if isinstance(metrics, pd.DataFrame):
        runs = {"run": metrics}
    elif isinstance(metrics, Mapping):
        runs = dict(metrics)
    else:
        runs = {f"seed {i}": m for i, m in enumerate(metrics)}
    if not runs:
        raise ValueError("metrics is empty: pass at least one run's metrics DataFrame")
    for name, m in runs.items():
        if "step" not in m.columns:
            raise ValueError(f"metrics of {name!r} have no 'step' column (see docs/CONTRACT.md)")
    return runs


def _mean_curve(runs: Mapping[str, pd.DataFrame], column: str) -> pd.DataFrame:
    """Mean of one column over runs, at every step any run evaluated (missing steps skipped)."""
    frames = [m[["step", column]] for m in runs.values() if column in m.columns]
    both = pd.concat(frames, ignore_index=True)
    mean = both.groupby("step", sort=True)[column].mean()
    return mean.reset_index()


def _as_steps(transition_step: Real | Steps | None) -> list[float]:
    if transition_step is None:
        return []
    if np.isscalar(transition_step):
        return [float(transition_step)]
    return [float(s) for s in transition_step if s is not None and np.isfinite(s)]


def _mark_transitions(fig: go.Figure, steps: Steps, *, label: str = OBSERVED) -> None:
    """Dashed vertical line at each detected transition on every panel, with one legend entry
    (``"observed transition (step 2598)"`` for one; :mod:`interp.viz.vocabulary`).

    The label goes in the legend, not in a text annotation: plotly widens a data axis to fit
    annotation text, which stretches narrow print figures.
    """
    before = len(fig.layout.shapes)
    for step in steps:
        fig.add_vline(
            x=step,
            y1=0.94,  # short of the panel's top, where its title sits
            line={"dash": "dash", "color": _TRANSITION_COLOR, "width": 1},
            opacity=0.9,  # templates such as simple_white default shapes to 0.3
            row="all",
            col="all",
        )
    # add_vline copies the line to every panel: give the legend one entry for all of them.
    for j, shape in enumerate(fig.layout.shapes[before:]):
        shape.update(
            name=f"{label} (step {steps[0]:.0f})" if len(steps) == 1 else f"{label}s",
            legendgroup="transition",
            showlegend=j == 0,
        )


def _add_seed_curves(
    fig: go.Figure,
    runs: Mapping[str, pd.DataFrame],
    column: str,
    *,
    row: int,
    col: int,
    showlegend: bool = True,
    dash: str | None = None,
    label: str | None = None,
) -> None:
    """One faint line per run and the bold mean (the mean alone when there is one run), in
    ``dash`` (another where it coincides with a curve drawn before) under ``label`` (default:
    the column's display name)."""
    color = METRIC_COLORS.get(column, OKABE_ITO[len(column) % 6])
    label = label or METRIC_LABELS.get(column, column)
    dash = dash or METRIC_DASHES.get(column, "solid")
    present = {name: m for name, m in runs.items() if column in m.columns}
    if not present:
        return
    if len(present) > 1:
        for name, m in present.items():
            fig.add_trace(
                go.Scatter(
                    x=m["step"],
                    y=m[column],
                    mode="lines",
                    name=f"{label} ({name})",
                    legendgroup=column,
                    showlegend=False,
                    opacity=_FAINT_OPACITY,
                    line={"color": color, "width": 1},
                    hovertemplate=f"{label}, {name}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
                ),
                row=row,
                col=col,
            )
    mean = _mean_curve(present, column)
    fig.add_trace(
        go.Scatter(
            x=mean["step"],
            y=mean[column],
            mode="lines",
            name=label,
            legendgroup=column,
            showlegend=showlegend,
            line={"color": color, "width": 2.5, "dash": dash},
            hovertemplate=f"{label} (mean)<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
        ),
        row=row,
        col=col,
    )


def plot_training_dynamics(
    metrics: Metrics,
    transition_step: Real | Steps | None = None,
    *,
    title: str = "Training dynamics",
    note: str | None = None,
    chance: Real | None = None,
    loss_columns: Sequence[str] = ("train_loss",),
    acc_columns: Sequence[str] = ("ic_acc", "ic2_acc", "iw_acc"),
) -> go.Figure:
    """Loss and IC / IC2 / IW accuracy against training step (the paper's Fig. 1d).

    Several runs (seeds) are drawn as faint lines with their mean in bold.

    Args:
        metrics: one run's ``metrics.csv`` as a DataFrame, a list of them (one per seed), or a
            mapping from run name to DataFrame.
        transition_step: detected transition step(s), drawn as dashed vertical lines.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
        chance: chance accuracy (1/L) drawn as a dotted line on the accuracy panel.
        loss_columns: columns drawn on the loss panel.
        acc_columns: columns drawn on the accuracy panel.

    Returns:
        A two-panel figure (loss left, accuracy right) sharing the step axis.
    """
    runs = _as_runs(metrics)
    # Room between the panels for the accuracy axis's title and tick labels at print widths.
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("loss", "accuracy"),
        shared_xaxes=True,
        horizontal_spacing=0.14,
    )
    for column in loss_columns:
        _add_seed_curves(fig, runs, column, row=1, col=1)
    for column in acc_columns:
        _add_seed_curves(fig, runs, column, row=1, col=2)
    if chance is not None:
        # A legend entry, not a text annotation: next to the x axis a label collides with the axis
        # and its tick labels.
        first = min(float(m["step"].min()) for m in runs.values())
        last = max(float(m["step"].max()) for m in runs.values())
        fig.add_trace(
            go.Scatter(
                x=[first, last],
                y=[float(chance), float(chance)],
                mode="lines",
                name=f"chance (1/{round(1 / chance)})" if chance > 0 else "chance",
                line={"dash": "dot", "color": _TRANSITION_COLOR, "width": 1},
                hovertemplate=f"chance accuracy {float(chance):.3f}<extra></extra>",
            ),
            row=1,
            col=2,
        )
    _mark_transitions(fig, _as_steps(transition_step))
    fig.update_xaxes(title_text="training step", tickformat="~s")
    fig.update_yaxes(title_text="loss", row=1, col=1)
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02], row=1, col=2)
    fig.update_layout(
        title=_title(title, _seeds_note(runs, note)), width=900, height=420, hovermode="closest"
    )
    return fig


def plot_run_comparison(
    metrics: Mapping[str, pd.DataFrame],
    columns: Sequence[str] = ("ic_acc", "iw_acc"),
    transition_steps: Mapping[str, Real | None] | None = None,
    *,
    title: str = "Runs compared",
    note: str | None = None,
) -> go.Figure:
    """Different settings side by side (e.g. a plain run and an intervention run): one colour per
    run, one panel per column, each run's transition (if given) as a dashed line in its colour.

    Args:
        metrics: run name -> its ``metrics.csv``.
        columns: the curves to compare, one panel each.
        transition_steps: run name -> its detected transition step (None: no transition).
        title: figure title.
        note: deviations from the paper's settings, printed under the title.

    Returns:
        A figure with one panel per column and a shared legend of runs.
    """
    runs = _as_runs(metrics)
    fig = make_subplots(
        rows=1,
        cols=len(columns),
        subplot_titles=[f"{METRIC_LABELS.get(c, c)} {_kind(c)}".strip() for c in columns],
        horizontal_spacing=0.08,  # room for the tick labels of the panel to the right
    )
    for i, (name, m) in enumerate(runs.items()):
        color = OKABE_ITO[i % (len(OKABE_ITO) - 1)] if i else OKABE_ITO[7]
        for j, column in enumerate(columns, start=1):
            if column not in m.columns:
                continue
            fig.add_trace(
                go.Scatter(
                    x=m["step"],
                    y=m[column],
                    mode="lines",
                    name=name,
                    legendgroup=name,
                    showlegend=j == 1,
                    line={"color": color, "width": 2},
                    hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.3f}}<extra>{column}</extra>",
                ),
                row=1,
                col=j,
            )
        step = (transition_steps or {}).get(name)
        if step is not None and np.isfinite(step):
            fig.add_vline(
                x=step,
                line={"dash": "dash", "color": color, "width": 1},
                opacity=0.9,
                row="all",
                col="all",
            )
    for j, column in enumerate(columns, start=1):
        # Only the first panel names its axis (the panel titles say what each shows): a y-axis
        # title between narrow print panels would sit inside the panel to its left.
        y_title = ("loss" if column.endswith("loss") else "value") if j == 1 else None
        if column.endswith("loss"):
            fig.update_yaxes(title_text=y_title, row=1, col=j)
        else:
            fig.update_yaxes(title_text=y_title, range=[-0.02, 1.02], row=1, col=j)
    fig.update_xaxes(title_text="training step", tickformat="~s")
    fig.update_layout(title=_title(title, note), width=420 * len(columns) + 200, height=420)
    return fig


def _kind(column: str) -> str:
    if column.endswith("_acc"):
        return "accuracy"
    return ""


def plot_progress_measures(
    metrics: Metrics,
    transition_step: Real | Steps | None = None,
    *,
    title: str = "Progress measures",
    note: str | None = None,
    panels: Sequence[tuple[str, Sequence[str]]] | None = None,
) -> go.Figure:
    """Progress measures stacked on one step axis, with the detected transition marked.

    The default panels are the attention measures (ILA1: layer-1 previous-token head, TILA2 and
    TLA2: layer-2 query attention), context-label accuracy next to IC accuracy (the intrinsic
    curriculum), and the head scores. Columns a run lacks are skipped, and so are empty panels.
    A column equal to one already drawn (to 1e-6 in every run) is drawn all the same, its legend
    entry saying so (and dashed when the two share a panel): with ``B = 1`` the induction score
    equals TILA2 (only the query row has an induction target), and the head-scores panel shows it
    as "induction score (= TILA2)".

    Args:
        metrics: one DataFrame, a list (seeds: faint lines, bold mean) or a name -> DataFrame map.
        transition_step: detected transition step(s), drawn as dashed vertical lines.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
        panels: ``(panel title, columns)`` per row (default: :func:`progress_panels`, the
            measures' declarations).

    Returns:
        A figure with one row per non-empty panel and a shared x axis.
    """
    runs = _as_runs(metrics)
    panels = progress_panels() if panels is None else panels
    rows = _progress_rows(runs, panels)
    fig = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=[title for title, _, _ in rows],
    )
    for i, (_, cols, name) in enumerate(rows, start=1):
        for column, label, dash in cols:
            _add_seed_curves(fig, runs, column, row=i, col=1, label=label, dash=dash)
        y_title = PANEL_Y_TITLES.get(name, "value")
        fig.update_yaxes(title_text=y_title, range=[-0.02, 1.02], row=i, col=1)
    _mark_transitions(fig, _as_steps(transition_step))
    fig.update_xaxes(tickformat="~s")
    fig.update_xaxes(title_text="training step", row=len(rows), col=1)
    fig.update_layout(
        title=_title(title, _seeds_note(runs, note)), width=700, height=220 * len(rows) + 140
    )
    return fig


# Dashes of a curve equal to one drawn before it on the same panel (the first keeps its line).
_TWIN_DASHES = ("dash", "dot", "dashdot")


def _progress_rows(runs, panels) -> list[tuple[str, list[tuple[str, str, str]], str]]:
    """``(panel title, [(column, legend label, dash)], panel name)`` of the non-empty panels.

    A column equal to one drawn before it (to 1e-6 in every run) is still drawn, with a legend
    label that says so (``"induction score (= TILA2)"``) and, on the same panel, a dash, so
    that both curves stay visible and each has its legend entry.
    """
    columns = set().union(*(m.columns for m in runs.values()))
    rows, drawn = [], []  # drawn: (column, panel name)
    for name, cols in panels:
        kept = []
        for column in (c for c in cols if c in columns):
            kept.append((column, *_label_and_dash(runs, column, drawn, name)))
            drawn.append((column, name))
        if kept:
            rows.append((name, kept, name))
    if not rows:
        wanted = sorted({c for _, cols in panels for c in cols})
        raise ValueError(f"metrics have none of the progress-measure columns {wanted}")
    return rows


def _label_and_dash(runs, column: str, drawn: list, panel: str) -> tuple[str, str | None]:
    """A column's legend label, naming the column drawn before it that it equals, and its dash
    (None: solid), one of its own for each such twin on the same panel."""
    label, dash = METRIC_LABELS.get(column, column), None
    twins = [(d, p) for d, p in drawn if same_curve(runs, column, d)]
    if twins:
        label += f" (= {METRIC_LABELS.get(twins[0][0], twins[0][0])})"
        same_panel = sum(p == panel for _, p in twins)
        if same_panel:
            dash = _TWIN_DASHES[(same_panel - 1) % len(_TWIN_DASHES)]
    return label, dash


def same_curve(runs: Mapping[str, pd.DataFrame], a: str, b: str) -> bool:
    """Whether columns ``a`` and ``b`` hold the same values (to 1e-6) in every run that has both."""
    pairs = [m[[a, b]].dropna() for m in runs.values() if a in m.columns and b in m.columns]
    pairs = [p for p in pairs if len(p)]
    if not pairs:
        return False
    return all(
        np.allclose(p[a].to_numpy(float), p[b].to_numpy(float), rtol=0, atol=_SAME_CURVE_ATOL)
        for p in pairs
    )


def _categories(hover: Sequence[str] | None, labels: Sequence[str]) -> list[str]:
    """Axis categories of an attention heatmap: the token descriptions (hover) or the labels.

    The descriptions are the category names, so that the hover shows them through ``%{x}`` and
    ``%{y}`` without a per-cell copy (a ``customdata`` grid made saved notebooks several MB);
    the tick labels stay the short role labels (see :func:`_every_token`).
    """
    text = list(hover) if hover is not None else list(labels)
    if len(text) != len(labels):
        raise ValueError(f"hover has {len(text)} entries, token_labels has {len(labels)}")
    if len(set(text)) != len(text):
        raise ValueError("hover entries must be distinct, e.g. start with the token's role")
    return text


# Decimals kept of attention weights in figures: hover shows 3; more only bloats saved notebooks
# and HTML files (a slider figure holds 2 x 16 heatmaps).
_ATTENTION_DECIMALS = 4


def _masked(pattern: np.ndarray) -> np.ndarray:
    """Blank the causally masked upper triangle so that it reads as 'not attendable', not 0."""
    out = np.round(np.array(pattern, dtype=float), _ATTENTION_DECIMALS)
    out[np.triu_indices_from(out, k=1)] = np.nan
    return out


def _heatmap(pattern: np.ndarray, categories: Sequence[str], name: str, **kwargs) -> go.Heatmap:
    return go.Heatmap(
        z=_masked(pattern),
        x=list(categories),
        y=list(categories),
        name=name,
        zmin=0.0,
        zmax=1.0,
        colorscale=SEQUENTIAL_SCALE,
        # slim: a thin bar, three ticks and its title along it, not beside it
        colorbar={
            "title": {"text": "attention", "side": "right"},
            "len": 0.9,
            "thickness": 8,
            "tickvals": [0, 0.5, 1],
        },
        hovertemplate=(f"query %{{y}}<br>key %{{x}}<br>attention %{{z:.3f}}<extra>{name}</extra>"),
        **kwargs,
    )


def _check_patterns(patterns: np.ndarray, steps: Steps, labels: Sequence[str]) -> np.ndarray:
    patterns = np.asarray(patterns, dtype=float)
    if patterns.ndim != 4:
        raise ValueError(
            f"patterns must be [step, layer, query_pos, key_pos], got shape {patterns.shape}"
        )
    n_step, _, n_q, n_k = patterns.shape
    if len(steps) != n_step:
        raise ValueError(f"{len(steps)} steps for {n_step} checkpoints in patterns")
    if not n_q == n_k == len(labels):
        raise ValueError(f"patterns are {n_q}x{n_k} but there are {len(labels)} token labels")
    return patterns


def plot_attention_maps(
    patterns: Float[np.ndarray, "step layer query_pos key_pos"],
    steps: Steps,
    token_labels: Sequence[str],
    *,
    hover: Sequence[str] | None = None,
    title: str = "Attention patterns",
    note: str | None = None,
    active: int = -1,
) -> go.Figure:
    """Both layers' attention for one sequence, with a slider across checkpoints.

    Drag the slider to watch the layer-1 previous-token pattern (each label attends to its item)
    and the layer-2 induction pattern (the query attends to the label of its class) appear.
    Pass a pattern averaged over the IC set to see the average picture.

    Args:
        patterns: attention weights per checkpoint and layer (head 0 of each layer).
        steps: training step of each checkpoint.
        token_labels: role of each position, e.g. from :func:`token_labels`.
        hover: longer description per position (class and label ids), e.g. from
            :func:`token_hover`; defaults to the role labels.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
        active: index of the checkpoint shown first (default: the last).

    Returns:
        One heatmap per layer side by side; one trace per (checkpoint, layer), only the active
        checkpoint visible, and a slider that switches between checkpoints.
    """
    labels = list(token_labels)
    patterns = _check_patterns(patterns, steps, labels)
    n_step, n_layer = patterns.shape[:2]
    active = range(n_step)[active]
    categories = _categories(hover, labels)
    fig = make_subplots(
        rows=1,
        cols=n_layer,
        subplot_titles=[f"layer {layer + 1}" for layer in range(n_layer)],
        horizontal_spacing=0.12,
    )
    for s, step in enumerate(steps):
        for layer in range(n_layer):
            fig.add_trace(
                _heatmap(
                    patterns[s, layer],
                    categories,
                    name=f"layer {layer + 1}, step {step}",
                    visible=s == active,
                    showscale=layer == n_layer - 1,
                ),
                row=1,
                col=layer + 1,
            )
    slider_steps = []
    for s, step in enumerate(steps):
        visible = [i // n_layer == s for i in range(n_step * n_layer)]
        slider_steps.append(
            {"method": "restyle", "args": [{"visible": visible}], "label": str(step)}
        )
    fig.update_layout(
        sliders=[
            {
                "active": active,
                "currentvalue": {"prefix": "training step: "},
                "pad": {"t": 60},
                "steps": slider_steps,
            }
        ]
        if n_step > 1
        else [],
        title=_title(title, note),
        width=380 * n_layer + 120,
        height=560 if n_step > 1 else 480,
    )
    fig.update_xaxes(title_text="key", **_every_token(labels, categories))
    fig.update_yaxes(
        title_text="query", autorange="reversed", **_every_token(labels, categories, angle=0)
    )
    return fig


def _every_token(
    labels: Sequence[str],
    categories: Sequence[str] | None = None,
    *,
    angle: int | None = None,
    size: int | None = None,
):
    """Axis settings that label every token (plotly would thin crowded category labels out).

    Args:
        labels: the token labels, in order.
        categories: the axis categories they label (default: the labels themselves).
        angle: tick-label angle; default upright for up to 20 tokens, vertical beyond.
        size: tick-label font size in px (None: the figure's).
    """
    out = {
        "tickmode": "array",
        "tickvals": list(categories if categories is not None else labels),
        "ticktext": list(labels),
        "tickangle": angle if angle is not None else (0 if len(labels) <= 20 else -90),
    }
    if size is not None:
        out["tickfont"] = {"size": size}
    return out


# Where a snapshot panel names its layer: the top right, above the diagonal (causally masked).
_MASKED_CORNER = {"xref": "x domain", "yref": "y domain", "x": 0.97, "y": 0.97}
_MASKED_CORNER |= {"xanchor": "right", "yanchor": "top", "showarrow": False}


def plot_attention_snapshots(
    patterns: Float[np.ndarray, "step layer query_pos key_pos"],
    steps: Steps,
    token_labels: Sequence[str],
    *,
    hover: Sequence[str] | None = None,
    title: str = "Attention patterns across training",
    note: str | None = None,
    captions: Sequence[str] | None = None,
    tall: bool = False,
) -> go.Figure:
    """A static grid of attention maps: one row per layer, one column per checkpoint (or, with
    ``tall``, one row per checkpoint and one column per layer, for a single journal column).

    The print companion of :func:`plot_attention_maps`: pass a few key checkpoints that look
    different (e.g. :func:`interp.viz.figures.key_checkpoints`: start, plateau, jump, end). Every
    token is labelled on the outer axes (in print, where 7-pt labels crowd, the label tokens and
    the query: :func:`interp.viz.export.apply_paper_style`).

    Args:
        patterns: attention weights per checkpoint and layer.
        steps: training step of each checkpoint.
        token_labels: role of each position.
        hover: longer description per position; defaults to the role labels.
        title: figure title.
        note: deviations from the paper's settings, printed under the title.
        captions: a short text per checkpoint (e.g. ``"IC acc 0.09"``), under its step: at the
            head of its column, or with ``tall`` on each panel of its row.
        tall: checkpoints down, layers across (two panels a row: ~1.5 in each at 3.5 in).

    Returns:
        A grid of heatmaps sharing one colour scale. The panel titles name the checkpoints
        (``"step 500<br>IC acc 0.09"``): across (the default) once atop each column, with
        ``tall`` over both panels of each row; each panel names its layer in its empty, causally
        masked corner (top right).
    """
    labels = list(token_labels)
    patterns = _check_patterns(patterns, steps, labels)
    n_step, n_layer = patterns.shape[:2]
    if captions is not None and len(captions) != n_step:
        raise ValueError(f"{len(captions)} captions for {n_step} checkpoints")
    categories = _categories(hover, labels)
    rows, cols = (n_step, n_layer) if tall else (n_layer, n_step)

    def cell(layer: int, s: int) -> tuple[int, int]:  # (row, col) of a panel
        return (s + 1, layer + 1) if tall else (layer + 1, s + 1)

    heads = [f"step {step}" for step in steps]
    if captions is not None:
        heads = [f"{h}<br>{c}" if c else h for h, c in zip(heads, captions, strict=True)]
    titles = [""] * (rows * cols)  # across: the checkpoint heads its column, the top panel only
    for layer in range(n_layer if tall else 1):
        for s in range(n_step):
            r, c = cell(layer, s)
            titles[(r - 1) * cols + c - 1] = heads[s]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        horizontal_spacing=0.08 if tall else 0.04,
        vertical_spacing=0.09 if tall else 0.05,
    )
    for layer in range(n_layer):
        for s, step in enumerate(steps):
            r, c = cell(layer, s)
            fig.add_trace(
                _heatmap(
                    patterns[s, layer],
                    categories,
                    name=f"layer {layer + 1}, step {step}",
                    showscale=(r, c) == (1, cols),
                ),
                row=r,
                col=c,
            )
            fig.add_annotation(text=f"layer {layer + 1}", row=r, col=c, **_MASKED_CORNER)
    # Every panel has the same tokens: label the outer axes only, leaving room for panel titles.
    # Small, vertical key labels: a print panel is ~1.4 in wide for 2N + 1 tokens.
    fig.update_xaxes(showticklabels=False, **_every_token(labels, categories, angle=-90, size=7))
    fig.update_xaxes(title_text="key", showticklabels=True, row=rows)
    fig.update_yaxes(
        autorange="reversed", showticklabels=False, **_every_token(labels, categories, size=7)
    )
    fig.update_yaxes(title_text="query", showticklabels=True, col=1)
    size = (230 * cols + 160, 250 * rows + 120) if tall else (260 * cols + 160, 230 * rows + 160)
    fig.update_layout(title=_title(title, note), width=size[0], height=size[1])
    return fig
