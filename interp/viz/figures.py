"""The standard figure set of one or more training runs (what ``induction-cliff figures`` writes).

For run directories written by :func:`interp.train.training.train` (format in ``docs/CONTRACT.md``):

- ``training_dynamics``: loss and IC / IC2 / IW accuracy against step, every run faint, mean bold,
  detected transitions dashed (the paper's Fig. 1d); runs of different configs (see
  :mod:`interp.analysis.compare`) are drawn side by side instead, one colour per config, never averaged;
- ``progress_measures``: ILA1, TILA2, TLA2, CLA, IC accuracy and head scores on one step axis;
- ``attention_maps.html`` and ``attention_maps_average.html``: both layers' attention on one IC
  sequence, and averaged over IC sequences, with a slider across checkpoints (interactive only);
- ``attention_snapshots`` and ``attention_snapshots_average``: the same at a few key checkpoints
  (before, around and after the transition), for print;
- ``fit_overlay_<run>``: for runs with a ``fit.json`` (written by
  :func:`phenomenology.fit.fit_run`), the nested-logit fit over the run's curves and its forecast.
- ``llc_<run>``: for runs with an ``llc.csv`` (written by ``induction-cliff llc``), the local
  learning coefficient over checkpoints above IC accuracy, ILA1 and TILA2
  (:func:`interp.viz.llc_plots.plot_llc`).
- ``quanta_<run>`` and ``quanta_rank_<run>``: for runs with a ``per_class_iw.csv`` (trained with
  ``per_class_iw > 0``), the IW curve against its per-class decomposition above the per-class
  accuracy raster, and the learning step of each class against its frequency rank
  (:mod:`interp.viz.quanta_plots`).

Each figure comes with a CSV of its data. Every title carries the run's deviations from the
paper's settings (optimiser, positional encoding, attention scale).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Real
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from interp.analysis.compare import comparison_figures, group_runs
from interp.viz.export import export_figure
from interp.viz.plots import (
    plot_attention_maps,
    plot_attention_snapshots,
    plot_progress_measures,
    plot_training_dynamics,
    token_hover,
    token_labels,
)

# Checkpoints drawn on the interactive slider (evenly spread over the saved ones) and sequences
# averaged for the IC-set average pattern: enough to see the picture, small enough to load fast.
MAX_SLIDER_CHECKPOINTS = 16
N_AVERAGE_SEQUENCES = 256


def run_note(run) -> str | None:
    """How a run departs from the paper's settings, for figure titles (None if it does not).

    Args:
        run: a :class:`interp.train.training.Run`.

    Returns:
        e.g. ``"adam lr 0.001 (paper: SGD lr 0.01); positional learned (paper: one-hot)"``.
    """
    notes = []
    optimiser = run.deviation_note()
    if optimiser:
        notes.append(optimiser)
    model = run.model_config
    if getattr(model, "positional", "onehot") != "onehot":
        notes.append(f"positional {model.positional} (paper: one-hot)")
    if getattr(model, "attn_scale", "none") != "none":
        notes.append(f"attention scale {model.attn_scale} (paper: none)")
    if getattr(model, "qk_bias", False):
        notes.append("query/key biases (paper: none)")
    intervention = getattr(run.train_config, "intervention", None)
    if intervention:
        notes.append(f"intervention {intervention}")
    return "; ".join(notes) or None


def detect_run_transition(metrics: pd.DataFrame, column: str = "ic_acc") -> float | None:
    """Step of the transition of ``column``, by :func:`interp.analysis.transition.find_transition`
    (``logistic`` on a rising measure, ``cliff`` on a loss).

    Args:
        metrics: a run's ``metrics.csv``.
        column: the curve to look at (IC accuracy by default).

    Returns:
        The transition step, or None when the run did not transition (or has no such column).
    """
    from interp.analysis.transition import find_transition, measure_direction

    if column not in metrics.columns or len(metrics) < 3:
        return None
    df = metrics[["step", column]].dropna()
    result = find_transition(
        df["step"].to_numpy(dtype=float),
        df[column].to_numpy(dtype=float),
        direction=measure_direction(column),
    )
    if not result.transitioned or result.step is None:
        return None
    return float(result.step)


def select_checkpoints(
    steps: Sequence[int], max_n: int, transition_step: Real | None = None
) -> list[int]:
    """At most ``max_n`` checkpoints spread over ``steps``, always with the first and last and,
    when there is a transition, the two checkpoints either side of it.

    Args:
        steps: the saved checkpoint steps, ascending.
        max_n: how many to keep (>= 2).
        transition_step: detected transition step, if any.

    Returns:
        The chosen steps, ascending.
    """
    steps = sorted(int(s) for s in steps)
    if len(steps) <= max_n:
        return steps
    keep = {steps[0], steps[-1]}
    if transition_step is not None:
        keep |= set(_around(steps, transition_step))
    index = np.linspace(0, len(steps) - 1, max_n - len(keep) + 2).round().astype(int)
    for i in index:
        if len(keep) >= max_n:
            break
        keep.add(steps[i])
    return sorted(keep)


def _around(steps: Sequence[int], step: Real) -> list[int]:
    """The last checkpoint at or before ``step`` and the first after it (those that exist)."""
    before = [s for s in steps if s <= step]
    after = [s for s in steps if s > step]
    return ([before[-1]] if before else []) + ([after[0]] if after else [])


# Share of the IC-accuracy rise (first checkpoint -> last) up to which a checkpoint still counts
# as on the plateau, and the band a checkpoint "in the middle of the jump" must fall in.
_PLATEAU_RISE = 0.1
_JUMP_BAND = (0.2, 0.8)


def key_checkpoints(
    steps: Sequence[int],
    transition_step: Real | None = None,
    *,
    metrics: pd.DataFrame | None = None,
    column: str = "ic_acc",
) -> list[int]:
    """A few checkpoints for print that look different from each other.

    With ``metrics`` and a transition, the checkpoints are chosen by IC accuracy (interpolated at
    each checkpoint): the first; the last one still on the plateau (at most 10% of the way from
    the first checkpoint's accuracy to the last one's), which shows what the plateau learned; the
    one nearest the middle of the jump (20-80% of the way, if any); and the last. Two
    checkpoints a few steps apart inside the jump, which look alike, are never both chosen.

    Without ``metrics``: first, either side of the transition, last; without a transition:
    first, one third, two thirds and last of the saved checkpoints.

    Args:
        steps: the saved checkpoint steps.
        transition_step: detected transition step, if any.
        metrics: the run's ``metrics.csv`` (``step`` and ``column``).
        column: the accuracy that defines the plateau and the jump.

    Returns:
        The chosen steps, ascending.
    """
    steps = sorted(int(s) for s in steps)
    if transition_step is None:
        chosen = {steps[int(round(f * (len(steps) - 1)))] for f in (0, 1 / 3, 2 / 3, 1)}
        return sorted(chosen)
    if metrics is None or column not in metrics.columns or len(steps) < 3:
        return sorted({steps[0], *_around(steps, transition_step), steps[-1]})
    curve = metrics[["step", column]].dropna().sort_values("step")
    if curve.empty:
        return sorted({steps[0], *_around(steps, transition_step), steps[-1]})
    acc = np.interp(steps, curve["step"].to_numpy(float), curve[column].to_numpy(float))
    rise = acc[-1] - acc[0]
    if not rise > 0:
        return sorted({steps[0], *_around(steps, transition_step), steps[-1]})
    share = (acc - acc[0]) / rise
    chosen = [steps[0]]
    plateau = [
        i
        for i in range(1, len(steps) - 1)
        if share[i] <= _PLATEAU_RISE and steps[i] <= transition_step
    ]
    if plateau:
        chosen.append(steps[plateau[-1]])
    lo, hi = _JUMP_BAND
    jump = [i for i in range(1, len(steps) - 1) if lo <= share[i] <= hi]
    if jump:
        chosen.append(steps[min(jump, key=lambda i: abs(share[i] - 0.5))])
    chosen.append(steps[-1])
    return sorted(set(chosen))


def _accuracy_captions(metrics: pd.DataFrame, steps: Sequence[int]) -> list[str]:
    """``"IC acc 0.09"`` at each step (interpolated between evaluations); empty without ic_acc."""
    curve = metrics[["step", "ic_acc"]].dropna() if "ic_acc" in metrics.columns else metrics[[]]
    if curve.empty:
        return ["" for _ in steps]
    curve = curve.sort_values("step")
    acc = np.interp(steps, curve["step"].to_numpy(float), curve["ic_acc"].to_numpy(float))
    return [f"IC acc {a:.2f}" for a in acc]


@torch.no_grad()
def attention_patterns(run, steps: Sequence[int], batch) -> np.ndarray:
    """Attention patterns of a run's checkpoints on a batch: ``[step, sequence, layer, q, k]``.

    Patterns are read with ``run_with_cache`` on the ``blocks.{l}.attn.hook_pattern`` hooks (see
    :func:`interp.analysis.probes.cache_patterns`); head 0 of each layer (the paper has one head).

    Args:
        run: a :class:`interp.train.training.Run`.
        steps: checkpoint steps to load.
        batch: the sequences (a :class:`interp.data.task.Batch`).

    Returns:
        float array ``[len(steps), len(batch), n_layers, pos, pos]``.
    """
    from interp.analysis.probes import cache_patterns

    out = []
    for step in steps:
        model = run.load_model(step)
        model.eval()
        _, patterns = cache_patterns(model, batch)
        # [layer][batch, head, q, k] -> [batch, layer, q, k], head 0
        out.append(torch.stack([p[:, 0] for p in patterns], dim=1).cpu().numpy())
    return np.stack(out)


def summarize_runs(run_dirs: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """One row per run: its task and train settings and its final metrics, for phase diagrams.

    Opens each directory with :func:`interp.io.rundir.load_run` (validated; a torn last row of
    ``metrics.csv`` is dropped and reported).

    Args:
        run_dirs: run directories.

    Returns:
        Columns ``run``, every task field (``K``, ``B``, ``eps``, ...), ``seed``, ``optimizer``,
        ``lr``, ``intervention``, then the last evaluation's metrics (``step``, ``ic_acc``, ...).
    """
    from interp.io.rundir import load_run

    rows = []
    for run in [load_run(d) for d in run_dirs]:
        last = run.metrics.iloc[-1].to_dict() if len(run.metrics) else {}
        train_cfg = run.train_config
        rows.append(
            {"run": str(run.path)}
            | run.task.to_dict()
            | {k: getattr(train_cfg, k) for k in ("seed", "optimizer", "lr", "intervention")}
            | last
        )
    return pd.DataFrame(rows)


def _run_names(runs) -> list[str]:
    names = [Path(r.path).name or f"run {i}" for i, r in enumerate(runs)]
    if len(set(names)) < len(names):
        names = [f"{i}: {n}" for i, n in enumerate(names)]
    return names


def _fit_overlay(run, metrics: pd.DataFrame, note: str | None) -> go.Figure | None:
    """Refit the run as its ``fit.json`` says and overlay the fitted curves (None: no fit.json)."""
    path = Path(run.path) / "fit.json"
    if not path.exists():
        return None
    from interp.io.outputs import read_json_object
    from phenomenology.fit import DynamicsFit, read_run
    from phenomenology.models import model_names
    from phenomenology.plots import plot_fit_overlay

    saved = read_json_object(path)  # a damaged fit.json: one line naming it
    _, task = read_run(run.path)
    target = saved.get("target", "ic_loss")
    aux = tuple(saved.get("aux", ()))
    until = saved.get("until_step")
    # fit.json files from before the model registry name the model by its description.
    model = saved.get("model") if saved.get("model") in model_names() else "nested-logit"
    column = saved.get("column", target)
    df = metrics[["step", column, *aux]].rename(columns={column: target})
    df = df.dropna().sort_values("step")
    seen = df if until is None else df[df["step"] <= until]
    est = DynamicsFit(
        model, task=task, target=target, aux=aux, options=saved.get("options"), n_boot=0
    ).fit(seen["step"].to_numpy(dtype=float), seen[[target, *aux]])
    grid = np.linspace(0.0, float(metrics["step"].max()), 400)
    predicted = est.predict_curves(grid)
    observed = (saved.get("observed") or {}).get("transition_step")
    forecast = est.transition_step_
    if np.isfinite(forecast):
        said = f"forecast transition: step {forecast:.0f} ± {est.transition_step_stderr_:.0f}"
    else:
        said = "the fit forecasts no transition"
    seen_text = "all steps" if until is None else f"steps <= {until:g}"
    return plot_fit_overlay(
        metrics,
        predicted,
        forecast_step=forecast,
        observed_step=observed,
        cutoff_step=until,
        title=f"{'Nested-logit fit [reconstruction]' if model == 'nested-logit' else model}: "
        f"{Path(run.path).name}",
        note="; ".join(n for n in (f"fit on {seen_text}, {said}", note) if n),
    )


def write_standard_figures(
    run_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    formats: Sequence[str] = ("pdf", "png"),
    *,
    attention_run: int = 0,
    max_slider_checkpoints: int = MAX_SLIDER_CHECKPOINTS,
    n_average: int = N_AVERAGE_SEQUENCES,
) -> list[Path]:
    """Write the standard figure set for some runs (see the module docstring for the list).

    Args:
        run_dirs: run directories (several seeds of one setting, typically).
        out_dir: folder for the figures; created if missing.
        formats: static formats (``pdf``, ``svg``, ``png``) and/or ``html`` for every figure;
            the slider figures are always written as HTML too.
        attention_run: index of the run whose attention maps are drawn.
        max_slider_checkpoints: most checkpoints on an attention slider.
        n_average: IC sequences averaged for the average attention maps.

    Returns:
        Every path written (figures and CSVs).

    Raises:
        RuntimeError: a static format was asked for and Chromium is missing (the message says
            how to install it); ``formats=("html",)`` needs no browser.
    """
    from interp.train.training import load_run

    if not run_dirs:
        raise ValueError("run_dirs is empty: pass at least one run directory")
    out = Path(out_dir)
    runs = [load_run(d) for d in run_dirs]
    names = _run_names(runs)
    metrics = {name: run.metrics for name, run in zip(names, runs, strict=True)}
    notes = sorted({n for n in (run_note(r) for r in runs) if n})
    note = "; ".join(notes) or None
    transitions = [detect_run_transition(m) for m in metrics.values()]
    found = [t for t in transitions if t is not None]
    L = runs[0].task.L
    written: list[Path] = []

    groups = group_runs(runs)
    if len(groups) > 1:  # different configs: side by side, never averaged together
        for stem, fig in comparison_figures(groups, note=note).items():
            written += export_figure(fig, out / stem, formats, style="double")
    else:
        fig = plot_training_dynamics(metrics, found or None, note=note, chance=1.0 / L)
        written += export_figure(fig, out / "training_dynamics", formats, style="double")
        fig = plot_progress_measures(metrics, found or None, note=note)
        written += export_figure(fig, out / "progress_measures", formats, style="single")

    run = runs[attention_run]
    if run.checkpoint_steps:
        transition = transitions[attention_run]
        slider_steps = select_checkpoints(run.checkpoint_steps, max_slider_checkpoints, transition)
        key_steps = key_checkpoints(run.checkpoint_steps, transition, metrics=run.metrics)
        # the snapshots' checkpoints are on the slider too
        slider_steps = sorted(set(slider_steps) | set(key_steps))
        ic = run.eval_sets(n=max(1, n_average))["ic"]
        patterns = attention_patterns(run, slider_steps, ic)
        labels = token_labels(ic.n_pairs)
        hover = token_hover(
            ic.item_classes[0].tolist(),
            ic.item_labels[0].tolist(),
            int(ic.query_class[0]),
            int(ic.target[0]),
        )
        key = [slider_steps.index(s) for s in key_steps]
        note_a = run_note(run)
        for suffix, pattern, hover_text, what in (
            ("", patterns[:, 0], hover, "one IC sequence"),
            ("_average", patterns.mean(axis=1), None, f"average over {len(ic)} IC sequences"),
        ):
            fig = plot_attention_maps(
                pattern,
                slider_steps,
                labels,
                hover=hover_text,
                title=f"Attention, {what}",
                note=note_a,
            )
            written += export_figure(fig, out / f"attention_maps{suffix}", ("html",))
            fig = plot_attention_snapshots(
                pattern[key],
                [slider_steps[i] for i in key],
                labels,
                hover=hover_text,
                title=f"Attention across training, {what}",
                note=note_a,
                captions=_accuracy_captions(run.metrics, key_steps),
            )
            static = [f for f in formats if f != "html"] or ["html"]
            written += export_figure(
                fig, out / f"attention_snapshots{suffix}", static, style="double"
            )

    for name, run in zip(names, runs, strict=True):
        fig = _fit_overlay(run, run.metrics, run_note(run))
        if fig is not None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            written += export_figure(fig, out / f"fit_overlay_{safe}", formats, style="double")
    from interp.viz.llc_plots import llc_figure_for_run

    for name, run, transition in zip(names, runs, transitions, strict=True):
        fig = llc_figure_for_run(run, transition, run_note(run))  # runs with an llc.csv
        if fig is not None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            written += export_figure(fig, out / f"llc_{safe}", formats, style="double")
    from interp.viz.quanta_plots import quanta_figures_for_run

    for name, run, transition in zip(names, runs, transitions, strict=True):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        for stem, fig in quanta_figures_for_run(run, transition, run_note(run)).items():
            style = "double" if stem == "quanta" else "single"
            written += export_figure(fig, out / f"{stem}_{safe}", formats, style=style)
    return written
