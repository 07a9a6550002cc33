"""Attention explorer: a run's attention maps at every checkpoint, beside its progress measures.

Pick a checkpoint step (slider), a sequence of the IC, IC2 or IW evaluation set and a layer; the
heatmap labels every token with its role and ids (``x1 n1``: first item, of the sequence's first
novel class; ``l1 y5``: its label, label id 5; ``q n1``: the query) and hovering a cell shows the
query and key tokens in full and the attention weight. Beside it the progress measures of
``metrics.csv`` with a cursor at the chosen step.

The patterns are computed once (:func:`explorer_data`: every checkpoint x a few sequences x every
layer, head 0 as in the paper) into a JSON-able dict, which serves both front ends:

- JupyterLab: :class:`AttentionExplorer` (ipywidgets; ``pip install -e '.[explorer]'``);
- the offline HTML report: :func:`explorer_html` embeds the dict in the page and
  :data:`EXPLORER_JS` draws it with plotly.js (which the page must embed, see
  :mod:`interp.viz.report`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch

from interp.io.escape import html_attr, html_text, json_for_script
from interp.viz.plots import (
    METRIC_COLORS,
    METRIC_DASHES,
    METRIC_LABELS,
    SEQUENTIAL_SCALE,
    progress_panels,
    same_curve,
)

__all__ = [
    "EVAL_SETS",
    "measure_columns",
    "HEATMAP_SIZE",
    "MEASURES_SIZE",
    "ExplorerConfig",
    "token_ticks",
    "explorer_data",
    "heatmap_figure",
    "measures_figure",
    "explorer_html",
    "EXPLORER_JS",
    "AttentionExplorer",
]

logger = logging.getLogger(__name__)

EVAL_SETS = ("ic", "ic2", "iw")
SET_NAMES = {"ic": "IC", "ic2": "IC2", "iw": "IW"}


# metrics.csv columns drawn beside the heatmap (those a run has).
def measure_columns() -> tuple[str, ...]:
    """The curves beside the heatmap: IC and IW accuracy and every registered measure that
    declares a panel of the progress-measure figure (plugins' included), by their declared label
    and colour."""
    return (
        "ic_acc",
        "iw_acc",
        *(c for _, cols in progress_panels() for c in cols if c != "ic_acc"),
    )


# Figure sizes in CSS px, (width, height). Side by side they must fit a 1280-px browser window
# with JupyterLab's file browser open and a cell's prompt column beside them (about 400 px of
# chrome, JUPYTERLAB_CHROME_PX), in the notebook and in the HTML report alike.
HEATMAP_SIZE = (470, 470)
MEASURES_SIZE = (390, 470)
JUPYTERLAB_CHROME_PX = 400
WINDOW_PX = 1280


@dataclass(frozen=True, kw_only=True)
class ExplorerConfig:
    """What the explorer precomputes.

    Attributes:
        n_sequences: sequences per evaluation set (the first ones of the run's own sets).
        sets: evaluation sets offered (any of ``ic``, ``ic2``, ``iw``).
        steps: checkpoint steps offered (None: every saved checkpoint).
        decimals: attention weights are rounded to this many decimals (keeps the page small).
    """

    n_sequences: int = 3
    sets: tuple[str, ...] = EVAL_SETS
    steps: tuple[int, ...] | None = None
    decimals: int = 3

    def __post_init__(self) -> None:
        if not (isinstance(self.n_sequences, int) and self.n_sequences >= 1):
            raise ValueError(
                f"ExplorerConfig.n_sequences={self.n_sequences!r} is invalid: must be an integer "
                ">= 1"
            )
        bad = [s for s in self.sets if s not in EVAL_SETS]
        if not self.sets or bad:
            raise ValueError(
                f"ExplorerConfig.sets={self.sets!r} is invalid: choose one or more of {EVAL_SETS}"
            )
        if self.steps is not None and not self.steps:
            raise ValueError("ExplorerConfig.steps=() is invalid: None (every checkpoint) or steps")
        if not (isinstance(self.decimals, int) and 1 <= self.decimals <= 8):
            raise ValueError(
                f"ExplorerConfig.decimals={self.decimals!r} is invalid: an integer in 1..8"
            )


def token_ticks(
    item_classes: Sequence[int],
    item_labels: Sequence[int],
    query_class: int,
    target: int,
    K: int,
) -> tuple[list[str], list[str]]:
    """Axis labels and hover text of one sequence's tokens.

    Classes the network was trained on (ids below ``K``) are shown by id (``c12``); novel classes
    (ids ``>= K``, drawn fresh for each sequence) are numbered by first appearance in the sequence
    (``n1``, ``n2``, ...), so that equal classes read equal.

    Args:
        item_classes: class id of each context item.
        item_labels: label id shown after each item.
        query_class: class id of the query.
        target: the label the network must output.
        K: number of trained classes.

    Returns:
        ``(ticks, hover)``: 2N+1 short labels (``x1 c12``, ``l1 y5``, ..., ``q c12``) and 2N+1
        descriptions.
    """
    classes = [int(c) for c in item_classes]
    labels = [int(y) for y in item_labels]
    if len(classes) != len(labels):
        raise ValueError(
            f"item_classes and item_labels must have the same length, got {len(classes)} and "
            f"{len(labels)}"
        )
    novel: dict[int, int] = {}

    def name(c: int) -> str:
        if c < K:
            return f"c{c}"
        novel.setdefault(c, len(novel) + 1)
        return f"n{novel[c]}"

    def long(c: int) -> str:
        return f"class {c}" if c < K else f"novel class {name(c)} (id {c})"

    ticks, hover = [], []
    for i, (c, y) in enumerate(zip(classes, labels, strict=True), start=1):
        ticks += [f"x{i} {name(c)}", f"l{i} y{y}"]
        hover += [f"x{i}: item of {long(c)}, label {y}", f"l{i}: label {y} (of {long(c)})"]
    ticks.append(f"q {name(int(query_class))}")
    hover.append(f"q: query of {long(int(query_class))}, target label {int(target)}")
    return ticks, hover


def _round(pattern: np.ndarray, decimals: int) -> list[list[float | None]]:
    """A ``[q, k]`` pattern as nested lists, the causally masked upper triangle as None."""
    out = np.round(np.asarray(pattern, dtype=float), decimals).tolist()
    for q, row in enumerate(out):
        for k in range(q + 1, len(row)):
            row[k] = None
    return out


@torch.no_grad()
def explorer_data(run, config: ExplorerConfig | None = None) -> dict:
    """Precompute everything the explorer shows for one run.

    Args:
        run: a :class:`interp.io.rundir.Run` (from :func:`interp.io.rundir.load_run`).
        config: what to precompute (default :class:`ExplorerConfig`).

    Returns:
        A JSON-able dict: ``run`` (directory name), ``run_title`` (the name as plotly text, its
        markup escaped: a name holding ``<br>`` is shown, not obeyed), ``steps``, ``n_layers``,
        ``sets`` (set name -> list of sequences, each ``{"ticks", "hover", "patterns"}`` with
        ``patterns[step_index][layer][query][key]``, None above the diagonal), ``measures``
        (``step`` and the :func:`measure_columns` the run has, from ``metrics.csv``; NaN as None)
        and ``labels`` (display names of the measures).

    Raises:
        ValueError: the run has no checkpoints, or a requested step has none.
    """
    from interp.analysis.hooked import probed
    from interp.analysis.probes import cache_patterns

    config = config or ExplorerConfig()
    saved = run.checkpoint_steps
    if not saved:
        raise ValueError(f"{Path(run.path) / 'checkpoints'} holds no weight checkpoints")
    steps = list(config.steps) if config.steps is not None else saved
    missing = [s for s in steps if s not in saved]
    if missing:
        raise ValueError(f"ExplorerConfig.steps has steps without a checkpoint: {missing}")
    eval_sets = run.eval_sets()
    batches = {name: eval_sets[name][: config.n_sequences] for name in config.sets}
    sets: dict[str, list[dict]] = {}
    for name, batch in batches.items():
        sets[name] = []
        for i in range(len(batch)):
            ticks, hover = token_ticks(
                batch.item_classes[i].tolist(),
                batch.item_labels[i].tolist(),
                int(batch.query_class[i]),
                int(batch.target[i]),
                run.task.K,
            )
            sets[name].append({"ticks": ticks, "hover": hover, "patterns": []})
    n_layers = None
    for step in steps:
        model = run.load_model(step)
        model.eval()
        n_layers = probed(model).n_layers
        for name, batch in batches.items():
            _, patterns = cache_patterns(model, batch)
            # [layer][batch, head, q, k] -> head 0 (the paper's networks have one head per layer)
            for i, seq in enumerate(sets[name]):
                seq["patterns"].append(
                    [_round(p[i, 0].cpu().numpy(), config.decimals) for p in patterns]
                )
    metrics = run.metrics
    columns = ["step", *(c for c in measure_columns() if c in metrics.columns)]
    measures = {
        c: [None if not np.isfinite(v) else float(v) for v in metrics[c].to_numpy(dtype=float)]
        for c in columns
    }
    logger.info(
        "explorer: %d checkpoints x %d sequences of %s", len(steps), config.n_sequences, config.sets
    )
    return {
        "run": Path(run.path).name,
        "run_title": html_text(Path(run.path).name),
        "steps": [int(s) for s in steps],
        "n_layers": int(n_layers),
        "sets": sets,
        "set_names": {k: SET_NAMES[k] for k in sets},
        "measures": measures,
        **_measure_styles(metrics, columns[1:]),
    }


def _measure_styles(metrics, columns: Sequence[str]) -> dict:
    """``labels``, ``colors`` and ``dashes`` of the measures' curves, each in its own dash
    (:data:`interp.viz.plots.METRIC_DASHES`: the previous-token score, which tracks ILA1, is
    dashed); a curve equal to one drawn before it (at B = 1 the induction score is TILA2) is
    labelled ``"X (= Y)"`` and drawn in a dash other than its twin's, so both stay visible on the
    shared axis and each has its legend entry."""
    labels, dashes = {}, {}
    for i, c in enumerate(columns):
        twin = next((d for d in columns[:i] if same_curve({"run": metrics}, c, d)), None)
        labels[c] = METRIC_LABELS.get(c, c)
        dashes[c] = METRIC_DASHES.get(c, "solid")
        if twin is not None:
            labels[c] += f" (= {METRIC_LABELS.get(twin, twin)})"
            dashes[c] = "dot" if dashes[twin] == "dash" else "dash"
    colors = {c: METRIC_COLORS.get(c, "#000000") for c in columns}
    return {"labels": labels, "colors": colors, "dashes": dashes}


def _check_choice(data: dict, set_name: str, sequence: int, step_index: int, layer: int) -> dict:
    if set_name not in data["sets"]:
        raise ValueError(f"set_name={set_name!r} is invalid: choose one of {list(data['sets'])}")
    seqs = data["sets"][set_name]
    if not 0 <= sequence < len(seqs):
        raise ValueError(f"sequence={sequence} is invalid: 0..{len(seqs) - 1}")
    if not 0 <= step_index < len(data["steps"]):
        raise ValueError(f"step_index={step_index} is invalid: 0..{len(data['steps']) - 1}")
    if not 0 <= layer < data["n_layers"]:
        raise ValueError(f"layer={layer} is invalid: 0..{data['n_layers'] - 1}")
    return seqs[sequence]


def heatmap_figure(
    data: dict, set_name: str = "ic", sequence: int = 0, step_index: int = -1, layer: int = 0
) -> go.Figure:
    """The attention heatmap the explorer shows for one choice (the Jupyter front end's figure).

    Args:
        data: from :func:`explorer_data`.
        set_name: ``ic``, ``ic2`` or ``iw``.
        sequence: index of the sequence in that set.
        step_index: index into ``data["steps"]`` (negative counts from the end).
        layer: 0 (layer 1) or 1 (layer 2).

    Returns:
        A heatmap with every token labelled on both axes; hover names the query and key tokens.
    """
    step_index = range(len(data["steps"]))[step_index]
    seq = _check_choice(data, set_name, sequence, step_index, layer)
    hover = seq["hover"]
    customdata = [[[hover[q], hover[k]] for k in range(len(hover))] for q in range(len(hover))]
    fig = go.Figure(
        go.Heatmap(
            z=seq["patterns"][step_index][layer],
            x=seq["ticks"],
            y=seq["ticks"],
            customdata=customdata,
            zmin=0.0,
            zmax=1.0,
            colorscale=SEQUENTIAL_SCALE,
            colorbar={"title": {"text": "attention"}},
            hovertemplate=(
                "query %{customdata[0]}<br>key %{customdata[1]}<br>attention %{z:.3f}"
                "<extra></extra>"
            ),
        )
    )
    step = data["steps"][step_index]
    fig.update_layout(
        title={
            "text": f"{html_text(data['run'])}: layer {layer + 1}, step {step}, "
            f"{data['set_names'][set_name]} sequence {sequence + 1}",
            "x": 0.5,
            "font": {"size": 14},
        },
        width=HEATMAP_SIZE[0],
        height=HEATMAP_SIZE[1],
        margin={"l": 80, "r": 10, "t": 50, "b": 80},
    )
    fig.update_xaxes(title_text="key", tickangle=-60, type="category")
    fig.update_yaxes(title_text="query", autorange="reversed", type="category")
    return fig


def measures_figure(data: dict, step: float | None = None) -> go.Figure:
    """The run's progress measures against step, with a dotted cursor at ``step``.

    Args:
        data: from :func:`explorer_data`.
        step: where the cursor stands (None: no cursor).

    Returns:
        One line per measure on a shared 0-1 axis.
    """
    m = data["measures"]
    fig = go.Figure()
    for column, label in data["labels"].items():
        fig.add_trace(
            go.Scatter(
                x=m["step"],
                y=m[column],
                mode="lines",
                name=label,
                line={
                    "color": data["colors"][column],
                    "width": 2,
                    "dash": data.get("dashes", {}).get(column, "solid"),
                },
                hovertemplate=f"{label}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
            )
        )
    if step is not None:
        fig.add_shape(
            type="line",
            x0=step,
            x1=step,
            y0=0,
            y1=1,
            yref="paper",
            line={"color": "#333333", "dash": "dot", "width": 2},
        )
    fig.update_layout(
        title={
            "text": "Progress measures (cursor: the step shown)",
            "x": 0.5,
            "font": {"size": 14},
        },
        width=MEASURES_SIZE[0],
        height=MEASURES_SIZE[1],
        margin={"l": 60, "r": 10, "t": 50, "b": 80},
        legend={"orientation": "h", "y": -0.25},
    )
    fig.update_xaxes(title_text="training step", tickformat="~s")
    fig.update_yaxes(title_text="accuracy / attention", range=[-0.02, 1.02])
    return fig


# Draws every explorer in the page; needs plotly.js (window.Plotly). One function per page.
EXPLORER_JS = r"""
function inductionCliffExplorer(root) {
  const data = JSON.parse(root.querySelector("script.ex-data").textContent);
  const stepIn = root.querySelector(".ex-step");
  const stepOut = root.querySelector(".ex-step-value");
  const setSel = root.querySelector(".ex-set");
  const seqSel = root.querySelector(".ex-seq");
  const layerSel = root.querySelector(".ex-layer");
  const heat = root.querySelector(".ex-heatmap");
  const meas = root.querySelector(".ex-measures");
  function fillSequences() {
    const n = data.sets[setSel.value].length;
    const keep = Math.min(+seqSel.value || 0, n - 1);
    seqSel.innerHTML = "";
    for (let i = 0; i < n; i++) {
      const o = document.createElement("option");
      o.value = String(i); o.textContent = "sequence " + (i + 1);
      seqSel.appendChild(o);
    }
    seqSel.value = String(keep);
  }
  function heatFigure() {
    const si = +stepIn.value, layer = +layerSel.value, seqi = +seqSel.value;
    const seq = data.sets[setSel.value][seqi];
    const h = seq.hover;
    const custom = h.map(q => h.map(k => [q, k]));
    const title = data.run_title + ": layer " + (layer + 1) + ", step " + data.steps[si] + ", " +
      data.set_names[setSel.value] + " sequence " + (seqi + 1);
    return {
      data: [{
        type: "heatmap", z: seq.patterns[si][layer], x: seq.ticks, y: seq.ticks,
        customdata: custom, zmin: 0, zmax: 1, colorscale: "Viridis",
        colorbar: {title: {text: "attention"}},
        hovertemplate: "query %{customdata[0]}<br>key %{customdata[1]}<br>" +
          "attention %{z:.3f}<extra></extra>"
      }],
      layout: {
        title: {text: title, x: 0.5, font: {size: 14}}, width: __HEAT_W__, height: __HEAT_H__,
        margin: {l: 80, r: 10, t: 50, b: 80},
        xaxis: {title: {text: "key"}, tickangle: -60, type: "category"},
        yaxis: {title: {text: "query"}, autorange: "reversed", type: "category"}
      }
    };
  }
  function cursor() {
    const x = data.steps[+stepIn.value];
    return [{type: "line", x0: x, x1: x, y0: 0, y1: 1, yref: "paper",
             line: {color: "#333333", dash: "dot", width: 2}}];
  }
  function measFigure() {
    const m = data.measures;
    const traces = Object.keys(data.labels).map(c => ({
      type: "scatter", mode: "lines", x: m.step, y: m[c], name: data.labels[c],
      line: {color: data.colors[c], width: 2, dash: (data.dashes || {})[c] || "solid"},
      hovertemplate: data.labels[c] + "<br>step %{x}<br>%{y:.3f}<extra></extra>"
    }));
    return {
      data: traces,
      layout: {
        title: {text: "Progress measures (cursor: the step shown)", x: 0.5, font: {size: 14}},
        width: __MEAS_W__, height: __MEAS_H__, margin: {l: 60, r: 10, t: 50, b: 80},
        shapes: cursor(), legend: {orientation: "h", y: -0.25},
        xaxis: {title: {text: "training step"}, tickformat: "~s"},
        yaxis: {title: {text: "accuracy / attention"}, range: [-0.02, 1.02]}
      }
    };
  }
  const config = {displaylogo: false, responsive: false};
  function update() {
    stepOut.textContent = String(data.steps[+stepIn.value]);
    const f = heatFigure();
    Plotly.react(heat, f.data, f.layout, config);
    Plotly.relayout(meas, {shapes: cursor()});
  }
  fillSequences();
  const f = heatFigure(), g = measFigure();
  stepOut.textContent = String(data.steps[+stepIn.value]);
  Plotly.newPlot(heat, f.data, f.layout, config);
  Plotly.newPlot(meas, g.data, g.layout, config);
  stepIn.addEventListener("input", update);
  setSel.addEventListener("change", () => { fillSequences(); update(); });
  seqSel.addEventListener("change", update);
  layerSel.addEventListener("change", update);
}
document.querySelectorAll(".induction-cliff-explorer").forEach(inductionCliffExplorer);
"""
for _token, _value in {
    "__HEAT_W__": HEATMAP_SIZE[0],
    "__HEAT_H__": HEATMAP_SIZE[1],
    "__MEAS_W__": MEASURES_SIZE[0],
    "__MEAS_H__": MEASURES_SIZE[1],
}.items():
    EXPLORER_JS = EXPLORER_JS.replace(_token, str(_value))


def explorer_html(data: dict, element_id: str) -> str:
    """The explorer as an HTML fragment: controls, two plot areas and the data as JSON.

    The page must load plotly.js and run :data:`EXPLORER_JS` after the fragment.

    Args:
        data: from :func:`explorer_data`.
        element_id: a page-unique id for the explorer's root element.

    Returns:
        The fragment.
    """
    steps = data["steps"]
    sets = "".join(
        f'<option value="{html_attr(k)}">{html_text(v)} set</option>'
        for k, v in data["set_names"].items()
    )
    layers = "".join(f'<option value="{i}">layer {i + 1}</option>' for i in range(data["n_layers"]))
    eid = html_attr(element_id)
    return f"""
<div class="induction-cliff-explorer" id="{eid}">
  <div class="ex-controls">
    <label>checkpoint step <input type="range" class="ex-step" min="0" max="{len(steps) - 1}"
      step="1" value="{len(steps) - 1}" aria-label="checkpoint step">
      <b class="ex-step-value">{steps[-1]}</b></label>
    <label>set <select class="ex-set" aria-label="evaluation set">{sets}</select></label>
    <label><select class="ex-seq" aria-label="sequence"></select></label>
    <label><select class="ex-layer" aria-label="layer">{layers}</select></label>
  </div>
  <div class="ex-plots">
    <div class="ex-heatmap report-plot"></div>
    <div class="ex-measures report-plot"></div>
  </div>
  <script type="application/json" class="ex-data">{json_for_script(data)}</script>
</div>
"""


def _display_data(fig: go.Figure) -> dict:
    """A ``display_data`` output holding ``fig`` as plotly's JSON mime bundle (what JupyterLab's
    and VS Code's plotly renderers draw), without a static image: a redraw stays fast."""
    import plotly.io as pio

    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())
    return {"output_type": "display_data", "data": bundle, "metadata": {}}


class AttentionExplorer:
    """The explorer in JupyterLab (ipywidgets): ``AttentionExplorer(load_run("runs/demo"))``.

    Displaying it (last expression of a cell) shows a step slider, set, sequence and layer
    pickers, the heatmap and the progress measures with a cursor at the chosen step.

    Attributes:
        data: the precomputed :func:`explorer_data`.
        step, set_name, sequence, layer: the widgets.
        heatmap: the heatmap currently shown (a ``plotly.graph_objects.Figure``).
        measures: the progress-measure figure currently shown.
        widget: the whole ipywidgets layout.
    """

    def __init__(self, run, config: ExplorerConfig | None = None, *, data: dict | None = None):
        """Precompute the run's patterns (or take ``data``) and build the widgets.

        Args:
            run: a :class:`interp.io.rundir.Run`, or a run directory path.
            config: what to precompute.
            data: an :func:`explorer_data` dict to show instead of computing one.
        """
        try:
            import ipywidgets as widgets
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError(
                "AttentionExplorer needs ipywidgets: pip install -e '.[explorer]'"
            ) from err
        if data is None:
            if isinstance(run, (str, Path)):
                from interp.io.rundir import load_run

                run = load_run(run)
            data = explorer_data(run, config)
        self.data = data
        steps = data["steps"]
        self.step = widgets.SelectionSlider(
            options=[(str(s), i) for i, s in enumerate(steps)],
            value=len(steps) - 1,
            description="step",
            continuous_update=False,
        )
        self.set_name = widgets.Dropdown(
            options=[(f"{v} set", k) for k, v in data["set_names"].items()], description="set"
        )
        self.sequence = widgets.Dropdown(description="sequence")
        self.layer = widgets.ToggleButtons(
            options=[(f"layer {i + 1}", i) for i in range(data["n_layers"])], description="layer"
        )
        self._heat_out = widgets.Output()
        self._meas_out = widgets.Output()
        self._fill_sequences()
        self.heatmap: go.Figure | None = None
        self.measures: go.Figure | None = None
        for w in (self.step, self.sequence, self.layer):
            w.observe(self._on_change, names="value")
        self.set_name.observe(self._on_set, names="value")
        # Rows wrap rather than overflow: in a window narrower than the two figures the measures
        # go below the heatmap instead of being clipped.
        wrap = {"flex_flow": "row wrap"}
        self.widget = widgets.VBox(
            [
                widgets.HBox(
                    [self.step, self.set_name, self.sequence, self.layer],
                    layout=widgets.Layout(**wrap),
                ),
                widgets.HBox([self._heat_out, self._meas_out], layout=widgets.Layout(**wrap)),
            ]
        )
        self._redraw()

    def _fill_sequences(self) -> None:
        n = len(self.data["sets"][self.set_name.value])
        self.sequence.options = [(f"sequence {i + 1}", i) for i in range(n)]
        self.sequence.value = 0

    def _on_set(self, _change) -> None:
        self._fill_sequences()
        self._redraw()

    def _on_change(self, _change) -> None:
        self._redraw()

    def _redraw(self) -> None:
        self.heatmap = heatmap_figure(
            self.data, self.set_name.value, self.sequence.value, self.step.value, self.layer.value
        )
        self.measures = measures_figure(self.data, self.data["steps"][self.step.value])
        # Each output widget holds exactly its figure's plotly bundle, replaced on every change:
        # the front end (JupyterLab, VS Code, a saved notebook's widget state) redraws it in place.
        # Not ``out.append_display_data(fig)``: a plotly Figure displays itself when IPython
        # formats it, which printed the figure into the running cell and left the widget an
        # empty bundle; and not ``with out: display(fig)``: a notebook run headless (nbclient,
        # nbconvert) waits out its whole cell timeout on output captured into a widget.
        self._heat_out.outputs = (_display_data(self.heatmap),)
        self._meas_out.outputs = (_display_data(self.measures),)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
