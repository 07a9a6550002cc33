"""The standard figure set of one or more training runs (what ``induction-cliff figures`` writes).

For run directories written by :func:`interp.train.training.train` (format in ``docs/CONTRACT.md``):

- ``training_dynamics``: loss and IC / IC2 / IW accuracy against step, every run faint, mean bold,
  detected transitions dashed (the paper's Fig. 1d); runs of different configs (see
  :mod:`interp.analysis.compare`) are drawn side by side instead, one colour per config, never
  averaged;
- ``progress_measures``: ILA1, TILA2, TLA2, CLA, IC accuracy and head scores on one step axis;
- ``attention_maps.html`` and ``attention_maps_average.html``: both layers' attention on one IC
  sequence, and averaged over IC sequences, with a slider across checkpoints (interactive only);
- ``attention_snapshots`` and ``attention_snapshots_average``: the same at a few key checkpoints
  (before, around and after the transition), for print;
- ``fit_overlay_<run>``: for runs with a ``fit.json`` (written by
  :func:`phenomenology.fit.fit_run`), the model it names refitted over the run's curves
  (:mod:`interp.viz.fit_overlay`, the report's overlay too).
- ``llc_<run>``: for runs with an ``llc.csv`` (written by ``induction-cliff llc``), the local
  learning coefficient over checkpoints above IC accuracy, ILA1 and TILA2
  (:func:`interp.viz.llc_plots.plot_llc`).
- ``quanta_<run>`` and ``quanta_rank_<run>``: for runs with a ``per_class_iw.csv`` (trained with
  ``per_class_iw > 0``), the IW curve against its per-class decomposition above the per-class
  accuracy raster, and the learning step of each class against its frequency rank
  (:mod:`interp.viz.quanta_plots`).

These are the built-in sections of the one registry of figures and report sections
(:mod:`interp.viz.sections`); a plugin's section adds its figures here (and its part of the
report). Each figure comes with a CSV of its data. Every title carries the run's deviations from the
paper's settings (optimiser, positional encoding, attention scale).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from numbers import Real
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from interp.analysis.compare import group_runs
from interp.analysis.transition import detect_run_transition
from interp.viz.compare_plots import comparison_figures
from interp.viz.export import export_figure, paper_style
from interp.viz.plots import (
    plot_attention_maps,
    plot_attention_snapshots,
    plot_progress_measures,
    plot_training_dynamics,
    token_hover,
    token_labels,
)
from interp.viz.sections import Context, Drawn, register_section, safe_stem, sections

logger = logging.getLogger(__name__)

# Checkpoints drawn on the interactive slider (evenly spread over the saved ones) and sequences
# averaged for the IC-set average pattern: enough to see the picture, small enough to load fast.
MAX_SLIDER_CHECKPOINTS = 16
N_AVERAGE_SEQUENCES = 256
# Print widths (inches) below which the attention snapshots stack their checkpoints vertically.
_TALL_BELOW_IN = 5.0


def run_note(run) -> str | None:
    """How a run departs from the paper's settings, for figure titles (None if it does not).

    Args:
        run: a :class:`interp.io.rundir.Run`.

    Returns:
        e.g. ``"adam lr 0.001 (author's code: SGD lr 0.01); positional learned (paper: one-hot)"``.
    """
    notes = []
    optimiser = run.deviation_note()
    if optimiser:
        notes.append(optimiser)
    model = run.model_config
    if getattr(model, "positional", "onehot") != "onehot":
        notes.append(f"positional {model.positional} (paper: one-hot)")
    if getattr(model, "attn_scale", "none") != "none":
        notes.append(f"attention scale {model.attn_scale} (author's code: none)")
    if getattr(model, "qk_bias", False):
        notes.append("query/key biases (paper: none)")
    if getattr(model, "hidden_bias", "scalar") == "per_unit":
        notes.append("per-unit classifier biases (author's code: one scalar per layer)")
    intervention = getattr(run.train_config, "intervention", None)
    if intervention:
        notes.append(f"intervention {intervention}")
    return "; ".join(notes) or None


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
    share = _share_of_rise(steps, metrics, column)
    if share is None:
        return sorted({steps[0], *_around(steps, transition_step), steps[-1]})
    return sorted({steps[0], *_plateau_and_jump(steps, share, transition_step), steps[-1]})


def _plateau_and_jump(steps: list[int], share, transition_step: Real) -> list[int]:
    """Among the inner steps: the last still on the plateau (before the transition) and the one
    nearest the middle of the jump, where there are such."""
    inner = range(1, len(steps) - 1)
    chosen = []
    plateau = [i for i in inner if share[i] <= _PLATEAU_RISE and steps[i] <= transition_step]
    if plateau:
        chosen.append(steps[plateau[-1]])
    lo, hi = _JUMP_BAND
    jump = [i for i in inner if lo <= share[i] <= hi]
    if jump:
        chosen.append(steps[min(jump, key=lambda i: abs(share[i] - 0.5))])
    return chosen


def _share_of_rise(steps: list[int], metrics: pd.DataFrame | None, column: str):
    """How far ``column`` has risen at each step, from the first step's value (0) to the last
    one's (1), interpolated between evaluations; None without at least three steps, the column
    or a rise."""
    if metrics is None or column not in metrics.columns or len(steps) < 3:
        return None
    curve = metrics[["step", column]].dropna().sort_values("step")
    if curve.empty:
        return None
    acc = np.interp(steps, curve["step"].to_numpy(float), curve[column].to_numpy(float))
    rise = acc[-1] - acc[0]
    return (acc - acc[0]) / rise if rise > 0 else None


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
        run: a :class:`interp.io.rundir.Run`.
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


# ---- the built-in sections of the figure set (interp.viz.sections) --------------------------


def _dynamics_figures(ctx: Context) -> list[Drawn]:
    """Training dynamics and progress measures; configs side by side when there are several."""
    if len(ctx.groups) > 1:  # different configs: side by side, never averaged together
        return [
            Drawn(stem, fig) for stem, fig in comparison_figures(ctx.groups, note=ctx.note).items()
        ]
    found = ctx.found or None
    chance = 1.0 / ctx.runs[0].task.L
    drawn = [
        Drawn(
            "training_dynamics",
            plot_training_dynamics(ctx.metrics, found, note=ctx.note, chance=chance),
        )
    ]
    try:
        fig = plot_progress_measures(ctx.metrics, found, note=ctx.note)
    except ValueError as err:  # no measure column at all (a task to which none applies)
        logger.info("no progress-measure figure: %s", err)
        return drawn
    return [*drawn, Drawn("progress_measures", fig, style="single")]


def _attention_figures(ctx: Context) -> list[Drawn]:
    """Attention maps on a slider across checkpoints (HTML) and at key checkpoints, for one IC
    sequence and averaged over IC sequences."""
    i = ctx.options.get("attention_run", 0)
    run = ctx.runs[i]
    if not run.checkpoint_steps:
        return []
    transition = ctx.transitions[i]
    slider_steps = select_checkpoints(
        run.checkpoint_steps,
        ctx.options.get("max_slider_checkpoints", MAX_SLIDER_CHECKPOINTS),
        transition,
    )
    key_steps = key_checkpoints(run.checkpoint_steps, transition, metrics=run.metrics)
    slider_steps = sorted(set(slider_steps) | set(key_steps))  # the snapshots' are on it too
    ic = run.eval_sets(n=max(1, ctx.options.get("n_average", N_AVERAGE_SEQUENCES)))["ic"]
    patterns = attention_patterns(run, slider_steps, ic)
    labels = token_labels(ic.n_pairs)
    hover = token_hover(
        ic.item_classes[0].tolist(),
        ic.item_labels[0].tolist(),
        int(ic.query_class[0]),
        int(ic.target[0]),
    )
    key = [slider_steps.index(s) for s in key_steps]
    note = run_note(run)
    static = tuple(f for f in ctx.options.get("formats", ("html",)) if f != "html") or ("html",)
    drawn = []
    for suffix, pattern, hover_text, what in (
        ("", patterns[:, 0], hover, "one IC sequence"),
        ("_average", patterns.mean(axis=1), None, f"mean of {len(ic)} IC sequences"),
    ):
        fig = plot_attention_maps(
            pattern, slider_steps, labels, hover=hover_text, title=f"Attention, {what}", note=note
        )
        drawn.append(Drawn(f"attention_maps{suffix}", fig, formats=("html",)))
        fig = plot_attention_snapshots(
            pattern[key],
            [slider_steps[k] for k in key],
            labels,
            hover=hover_text,
            title=f"Attention across training, {what}" if suffix == "" else f"Attention, {what}",
            note=note,
            captions=_accuracy_captions(run.metrics, key_steps),
            tall=ctx.options.get("tall", False),  # a journal column: checkpoints down
        )
        drawn.append(Drawn(f"attention_snapshots{suffix}", fig, formats=static))
    return drawn


def _fit_figures(ctx: Context) -> list[Drawn]:
    """For each run with a ``fit.json``: the model it names, refitted as it says, over the run's
    curves (:func:`interp.viz.fit_overlay.fit_overlay`)."""
    from interp.viz.fit_overlay import fit_overlay, saved_fit

    drawn = []
    for name, run in zip(ctx.names, ctx.runs, strict=True):
        saved = saved_fit(run)
        if saved is None:
            continue
        observed = saved.pop("observed")
        _, fig = fit_overlay(run, **saved, observed_step=observed, note=run_note(run))
        drawn.append(Drawn(f"fit_overlay_{safe_stem(name)}", fig))
    return drawn


def _llc_figures(ctx: Context) -> list[Drawn]:
    """For each run with an ``llc.csv``: the LLC over checkpoints above the measures."""
    from interp.viz.llc_plots import llc_figure_for_run

    drawn = []
    for name, run, transition in zip(ctx.names, ctx.runs, ctx.transitions, strict=True):
        fig = llc_figure_for_run(run, transition, run_note(run))
        if fig is not None:
            drawn.append(Drawn(f"llc_{safe_stem(name)}", fig))
    return drawn


def _quanta_figures(ctx: Context) -> list[Drawn]:
    """For each run with a ``per_class_iw.csv``: the IW curve as per-class steps, and the steps
    against frequency rank."""
    from interp.viz.quanta_plots import quanta_figures_for_run

    drawn = []
    for name, run, transition in zip(ctx.names, ctx.runs, ctx.transitions, strict=True):
        for stem, fig in quanta_figures_for_run(run, transition, run_note(run)).items():
            style = "double" if stem == "quanta" else "single"
            drawn.append(Drawn(f"{stem}_{safe_stem(name)}", fig, style=style))
    return drawn


register_section(
    "dynamics", title="Training dynamics and progress measures", figures=_dynamics_figures, order=20
)
register_section(
    "attention", title="Attention maps", figures=_attention_figures, order=40, in_report=False
)
register_section(
    "fit_overlay", title="Fit overlay (fit.json)", figures=_fit_figures, order=50, in_report=False
)
register_section("llc", title="Local learning coefficient", figures=_llc_figures, order=60)
register_section("quanta", title="Per-class IW steps (quanta)", figures=_quanta_figures, order=70)


def run_context(runs, options: dict | None = None) -> Context:
    """The :class:`~interp.viz.sections.Context` of some open runs."""
    names = _run_names(runs)
    notes = sorted({n for n in (run_note(r) for r in runs) if n})
    return Context(
        runs=list(runs),
        names=names,
        metrics={name: run.metrics for name, run in zip(names, runs, strict=True)},
        transitions=[detect_run_transition(r.metrics) for r in runs],
        groups=group_runs(runs),
        note="; ".join(notes) or None,
        options=dict(options or {}),
    )


def write_standard_figures(
    run_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    formats: Sequence[str] = ("pdf", "png"),
    *,
    attention_run: int = 0,
    max_slider_checkpoints: int = MAX_SLIDER_CHECKPOINTS,
    n_average: int = N_AVERAGE_SEQUENCES,
    width: str | float | None = None,
) -> list[Path]:
    """Write the figures of every registered section (:mod:`interp.viz.sections`; the built-in
    ones are listed in the module docstring) for some runs.

    Args:
        run_dirs: run directories (several seeds of one setting, typically).
        out_dir: folder for the figures; created if missing.
        formats: static formats (``pdf``, ``svg``, ``png``) and/or ``html`` for every figure;
            the slider figures are always written as HTML too.
        attention_run: index of the run whose attention maps are drawn.
        max_slider_checkpoints: most checkpoints on an attention slider.
        n_average: IC sequences averaged for the average attention maps.
        width: the print width of every static figure: ``"single"`` (3.5 in), ``"double"``
            (7 in) or inches (:func:`interp.viz.export.paper_style`); text stays at 7 pt or
            more. None: each figure's own (its section's ``style``).

    Returns:
        Every path written (figures and CSVs).

    Raises:
        RuntimeError: a static format was asked for and Chromium is missing (the message says
            how to install it); ``formats=("html",)`` needs no browser.
    """
    from interp.io.rundir import load_run

    if not run_dirs:
        raise ValueError("run_dirs is empty: pass at least one run directory")
    out = Path(out_dir)
    # an invalid width fails before any work; narrow ones stack the attention snapshots
    tall = width is not None and paper_style(width).width_in < _TALL_BELOW_IN
    options = {"attention_run": attention_run, "max_slider_checkpoints": max_slider_checkpoints}
    options |= {"n_average": n_average, "formats": tuple(formats), "tall": tall}
    ctx = run_context([load_run(d) for d in run_dirs], options)
    written: list[Path] = []
    for section in sections():
        for d in section.figures(ctx):
            style = width or d.style if d.style is not None else None
            written += export_figure(d.figure, out / d.stem, d.formats or formats, style=style)
    return written
