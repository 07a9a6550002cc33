"""One self-contained offline HTML page per run or comparison (``induction-cliff report``).

The page holds, for the runs given (grouped by config with
:func:`interp.analysis.compare.group_runs`):

1. the config and every deviation from the paper's settings (optimiser, schedule, positional
   encoding, ..., the preset's own note when the config is a preset's);
2. training dynamics and progress measures (seeds of a config aggregated; different configs side
   by side, labelled by the fields that differ);
3. the transition table (:func:`interp.analysis.transition.transition_report`) and the order of
   events;
4. the nested-logit fit (the run's ``fit.json`` settings, or a fit on every step) and the
   forecast of the jump from the first 80% of the plateau
   (as :func:`phenomenology.fit.forecast_transition` does);
5. the attention explorer (:mod:`interp.viz.explorer`) of the first run of each config.

plotly.js is embedded inline and the page makes no network request, so it opens offline and can
be mailed as one file. It is written with :func:`interp.io.checkpoints.write_text_atomic`; nothing
else is written (a fit computed for the page is not saved as ``fit.json``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from interp.analysis.compare import config_fields
from interp.io.errors import RunDirectoryError
from interp.io.escape import html_attr, html_text
from interp.viz.explorer import EXPLORER_JS, ExplorerConfig, explorer_data, explorer_html
from interp.viz.figures import run_context, run_note
from interp.viz.sections import Context, register_section, sections
from interp.viz.vocabulary import (
    CLIFF,
    FITTED,
    FORECAST,
    OBSERVED,
    OBSERVED_DEFINITION,
    observed_name,
)

__all__ = [
    "ReportConfig",
    "ReportInputError",
    "check_report_inputs",
    "deviations",
    "build_report",
    "write_report",
    "TOOLKIT_DEVIATIONS",
]

logger = logging.getLogger(__name__)

PAPER_STEPS = 100_000

# True of every run of this toolkit (see the README's "Deviations from the paper, everywhere").
TOOLKIT_DEVIATIONS = (
    "IC and IC2 sets use the training burstiness B (or 1 when B = 0), a choice of this toolkit.",
)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
td, th { border: 1px solid #ccc; padding: .2em .5em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.deviation { color: #a33; } .muted { color: #666; } .error { color: #a00; }
.ex-controls { display: flex; gap: 1.5em; align-items: center; flex-wrap: wrap; margin: .5em 0; }
.ex-step { width: 320px; vertical-align: middle; }
.ex-plots { display: flex; flex-wrap: wrap; gap: 1em; }
details { margin: .4em 0; } .report-figure { overflow-x: auto; }
"""


@dataclass(frozen=True, kw_only=True)
class ReportConfig:
    """What a report contains.

    Attributes:
        fit: fit the nested-logit model and forecast the jump (tens of seconds per run on a CPU);
            False leaves the section with a note (``induction-cliff report --no-fit``).
        forecast_fraction: the part of the plateau the forecast fit sees, in ``(0, 1]``.
        explorer: what the attention explorer precomputes.
    """

    fit: bool = True
    forecast_fraction: float = 0.8
    explorer: ExplorerConfig = field(default_factory=ExplorerConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.fit, bool):
            raise ValueError(f"ReportConfig.fit={self.fit!r} is invalid: True or False")
        if not 0 < self.forecast_fraction <= 1:
            raise ValueError(
                f"ReportConfig.forecast_fraction={self.forecast_fraction!r} is invalid: must be in "
                "(0, 1]"
            )
        if not isinstance(self.explorer, ExplorerConfig):
            raise ValueError(
                f"ReportConfig.explorer={self.explorer!r} is invalid: an ExplorerConfig"
            )


class ReportInputError(ValueError):
    """A report was asked for with inputs it cannot use (the message names the path or option)."""


class ReportRunError(ReportInputError, RunDirectoryError):
    """A run given to the report cannot be used (missing, damaged, not trained): the exit code of
    an unusable run (3), as from every command."""


def _load(run_dir: Path):
    from interp.io.rundir import load_run

    if not run_dir.is_dir():
        raise ReportRunError(f"{run_dir}: is not a directory (expected a run directory)")
    if not (run_dir / "config.json").is_file():
        raise ReportRunError(f"{run_dir}: not a run directory (no config.json)")
    try:
        run = load_run(run_dir)
    except (ValueError, TypeError, KeyError, OSError, RuntimeError) as err:
        # the run directory's reader names the damaged file; a message that does not gets the run
        said = str(err)
        raise ReportRunError(
            said if str(run_dir) in said else f"{run_dir}: cannot be opened as a run ({said})"
        ) from err
    if run.metrics.empty or "step" not in run.metrics.columns:
        raise ReportRunError(f"{run_dir / 'metrics.csv'}: missing or empty (train the run first)")
    if not run.checkpoint_steps:
        raise ReportRunError(f"{run_dir / 'checkpoints'}: holds no weight checkpoints")
    return run


def check_report_inputs(
    run_dirs: Sequence[str | os.PathLike], out: str | os.PathLike | None = None
) -> tuple[list, Path]:
    """Open the runs and decide the output path, refusing bad input before any work.

    Args:
        run_dirs: run directories (at least one).
        out: the HTML file to write; default ``RUN_DIR/report.html`` for one run, required for
            several.

    Returns:
        ``(runs, out_path)``.

    Raises:
        ReportInputError: a path is not a run directory, a run has no metrics or no checkpoints,
            ``out`` is missing for several runs, is a directory or lies in a missing folder.
    """
    if not run_dirs:
        raise ReportInputError("RUN_DIR: give at least one run directory")
    runs = [_load(Path(d)) for d in run_dirs]
    if out is None:
        if len(runs) > 1:
            raise ReportInputError("--out is required when the report covers several runs")
        out_path = Path(run_dirs[0]) / "report.html"
    else:
        out_path = Path(out)
        if out_path.is_dir():
            raise ReportInputError(f"--out {out_path}: is a directory (give an .html file path)")
        if not out_path.parent.is_dir():
            raise ReportInputError(f"--out {out_path}: the folder {out_path.parent} does not exist")
    return runs, out_path


def _matching_preset(run):
    """The single-run preset whose configs equal the run's (seed, steps and the evaluation and
    checkpoint schedule aside), or None."""
    from interp.model.network import ModelConfig
    from interp.train.presets import PRESETS

    # Fields that change the schedule of evaluations and checkpoints or the speed, not the run.
    loose = {
        "seed",
        "steps",
        "device",
        "num_threads",
        "backend",
        "eval_every",
        "checkpoint_every",
        "n_log_checkpoints",
        "checkpoint_on_jump",
    }

    def train_key(cfg) -> dict:
        return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in loose}

    for preset in PRESETS.values():
        if preset.grid or preset.task != run.task:
            continue
        if ModelConfig.from_task(preset.task, **preset.model) != run.model_config:
            continue
        if train_key(preset.train) == train_key(run.train_config):
            return preset
    return None


def deviations(run) -> list[str]:
    """How a run departs from the paper's settings, one item per deviation.

    Args:
        run: a :class:`interp.io.rundir.Run`.

    Returns:
        The optimiser, positional encoding, attention scale and intervention deviations (as in the
        figure titles), the number of training steps when it is not the toolkit's default 1e5
        (the paper gives no length; the author's driver defaults to 1.5e5), and the note
        of the preset whose settings the run uses, if any.
    """
    from interp.viz.figures import run_note

    out = [n for n in (run_note(run) or "").split("; ") if n]
    steps = run.train_config.steps
    if steps != PAPER_STEPS:
        out.append(f"{steps} training steps (the toolkit's default 1e5; the paper gives no length)")
    preset = _matching_preset(run)
    if preset is not None:
        extra = "" if preset.train.steps == steps else f" (steps set to {steps})"
        out.append(f"settings of preset {preset.name!r}{extra}: {preset.note}")
    return out


def _fig_html(fig: go.Figure) -> str:
    body = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        config={"displaylogo": False},
    )
    return f'<div class="report-figure">{body}</div>'


def _table(df: pd.DataFrame) -> str:
    def fmt(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.4g}"
        return v

    return df.map(fmt).to_html(index=False, escape=True, border=0)


def _config_section(ctx: Context) -> str:
    groups = ctx.groups
    parts = []
    if len(groups) > 1:
        fields = list(groups[0].differing_fields)
        rows = [
            {"config": g.label, **{f: g.differing_fields[f] for f in fields}, "seeds": g.seeds}
            for g in groups
        ]
        parts.append(
            f"<p>{len(groups)} configs, differing in {html_text(', '.join(fields))}; "
            "each config's seeds are aggregated, configs are never averaged together.</p>"
        )
        parts.append(_table(pd.DataFrame(rows).astype(str)))
    for g in groups:
        run = g.runs[0]
        runs_text = ", ".join(html_text(str(r.path)) for r in g.runs)
        parts.append(
            f"<h3>{html_text(g.label)}</h3><p>runs ({len(g.runs)}, seeds {g.seeds}): "
            f"{runs_text}</p>"
        )
        devs = deviations(run)
        items = "".join(f'<li class="deviation">{html_text(d)}</li>' for d in devs)
        parts.append(
            "<p>Deviations from the paper (Reddy, ICLR 2024):</p>"
            + (
                f"<ul>{items}</ul>"
                if devs
                else "<p>none: the author's code's optimiser and the toolkit's schedule</p>"
            )
        )
        cfg = pd.DataFrame([{"field": k, "value": str(v)} for k, v in config_fields(run).items()])
        parts.append(f"<details><summary>full config</summary>{_table(cfg)}</details>")
    items = "".join(f"<li>{html_text(d)}</li>" for d in TOOLKIT_DEVIATIONS)
    parts.append(f"<p>Deviations of every run of this toolkit:</p><ul>{items}</ul>")
    return "\n".join(parts)


def _transition_section(ctx: Context) -> str:
    from interp.analysis.transition import event_order, transition_report

    runs, groups = ctx.runs, ctx.groups
    parts = []
    report = transition_report([r.path for r in runs])
    cols = [
        c
        for c in ("run", "config", "transitioned", "step", "cliff_step", "width")
        + ("plateau_level", "plateau_measured", "plateau_length", "final_level", "r2", "reason")
        if c in report.columns
    ]
    # one name per number (interp.viz.vocabulary): the table's headers say which jump it is
    names = {"step": f"{OBSERVED} ({OBSERVED_DEFINITION})", "cliff_step": CLIFF}
    parts.append(_table(report[cols].rename(columns=names)))
    parts.append(
        f'<p class="muted">{OBSERVED}: the midpoint of the logistic fitted to the IC accuracy; '
        f"{CLIFF}: the steepest drop of the IC loss in log-step (what forecasts are scored "
        "against); width: 10-90% rise; mean and std over the seeds of each config that "
        "transitioned.</p>"
    )
    for g in groups:
        run = g.runs[0]
        measures = [c for c in ("cla", "ila1", "tila2", "ic_acc") if c in run.metrics.columns]
        if "ic_acc" not in measures or len(measures) < 2:
            continue
        order = event_order(run.metrics, measures)
        parts.append(
            f"<p>Order of events, {html_text(Path(run.path).name)} "
            "(lag: steps after IC accuracy):</p>" + _table(order)
        )
    return "\n".join(parts)


def _calibrated_forecast(run, note, cutoff: float, fraction: float, observed) -> str:
    """The calibrated forecast from the IC loss seen up to ``cutoff`` (progress or template, as
    ``induction-cliff fit RUN --fraction F`` gives it:
    :func:`phenomenology.fit.calibrated_forecast`), its figure and its error."""
    from interp.viz.dynamics_plots import forecast_figure
    from phenomenology.fit import calibrated_forecast, read_run
    from phenomenology.transition_law import law_prior

    _, task = read_run(run)  # the run already open
    optimizer = run.train_config.optimizer
    prior, calibration, _ = law_prior(run.task, run.model_config, run.train_config)
    fc = calibrated_forecast(
        run.metrics,
        until=cutoff,
        task=task,
        optimizer=optimizer,
        prior=prior,
        calibration=calibration,
    )
    head = f"Forecast from {fraction:.0%} of the plateau (steps &le; {cutoff:.0f})"
    if fc is None:
        return f"<p>{head}: the jump is already seen there.</p>"
    if not fc.ok:
        return f"<p>{head}: {html_text(fc.reason)}.</p>"
    how = fc.detail.get("method", "template")
    error = (fc.step - observed) / observed if observed else float("nan")
    text = (
        f"<p>{head}, by the calibrated {how} forecaster: {FORECAST} of the {CLIFF} "
        f"{_num(fc.step, '.0f')}, interval [{_num(fc.low, '.0f')}, {_num(fc.high, '.0f')}] "
        f"({html_text(str(fc.detail.get('interval', '')))}, which "
        f"{html_text(str(fc.detail.get('held_out', 'was not measured on held-out runs')))}); "
        f"{CLIFF} {_num(observed, '.0f')}; relative error {_num(error, '+.1%')}.</p>"
    )
    fig = forecast_figure(
        run.metrics,
        task=task,
        until=cutoff,
        observed_step=observed,
        note=note,
        optimizer=optimizer,
        method=how,
        forecast=fc,
    )
    return text + _fig_html(fig)


def _fit_section(ctx: Context) -> str:
    from interp.viz.fit_overlay import fit_overlay, model_title, saved_fit
    from phenomenology.fit import observed_transition

    config = ctx.options["report"]
    if not config.fit:
        return "<p>Not computed (<code>--no-fit</code>).</p>"
    fraction = config.forecast_fraction
    parts = [
        '<p class="muted">The dynamics model of the run\'s <code>fit.json</code> (else the '
        "three-parameter nested-logit model) fitted to its curve; then fitted to the first "
        f"{fraction:.0%} of the plateau only, to forecast the jump.</p>",
    ]
    for run in ctx.runs:
        name = Path(run.path).name
        parts.append(f"<h3>{html_text(name)}</h3>")
        saved = saved_fit(run)
        origin = "settings of the run's fit.json" if saved else "no fit.json: fitted for this page"
        saved = saved or {"model": "nested-logit", "target": "ic_loss", "column": "ic_loss"}
        saved = {"aux": (), "options": None, "until": None} | saved
        saved.pop("observed", None)
        target, model = saved["target"], saved["model"]
        try:
            obs = observed_transition(run.metrics, column=saved["column"])
            observed = obs["transition_step"]
            est, fig = fit_overlay(
                run,
                **saved,
                observed_step=observed,
                title=f"{model_title(model)}: {name}",
                note=run_note(run),
            )
            parts.append(
                f"<p>Fit ({html_text(origin)}): R<sup>2</sup> = {_num(est.r2_, '.4f')}, "
                f"{FITTED} step {_num(est.transition_step_, '.0f')} (a fit to the whole curve, "
                f"not a forecast); {html_text(observed_name(saved['column']))} "
                f"{_num(observed, '.0f')}.</p>" + _fig_html(fig)
            )
            start, onset = obs["plateau_start_step"], obs["onset_step"]
            cutoff = (
                start + fraction * (onset - start)
                if start is not None and onset is not None
                else float("nan")
            )
            if not math.isfinite(cutoff):
                parts.append("<p>No plateau detected: no forecast.</p>")
                continue
            if target == "ic_loss":
                parts.append(_calibrated_forecast(run, run_note(run), cutoff, fraction, observed))
                continue
            fc, fig = fit_overlay(
                run,
                **{**saved, "aux": (), "until": cutoff},
                observed_step=observed,
                title=f"Forecast of the jump from {fraction:.0%} of the plateau: {name}",
                note=run_note(run),
            )
            error = (fc.transition_step_ - observed) / observed if observed else float("nan")
            parts.append(
                f"<p>{FORECAST.capitalize()} (the {html_text(model)} model fitted to steps "
                f"&le; {cutoff:.0f}, uncalibrated): step {_num(fc.transition_step_, '.0f')} "
                f"&plusmn; {_num(fc.transition_step_stderr_, '.0f')}; "
                f"{html_text(observed_name(saved['column']))} {_num(observed, '.0f')}; "
                f"relative error {_num(error, '+.1%')}.</p>" + _fig_html(fig)
            )
        except (ValueError, RuntimeError, ArithmeticError) as err:
            logger.warning("fit of %s failed: %s", run.path, err)
            parts.append(f'<p class="error">fit failed: {html_text(str(err))}</p>')
    return "\n".join(parts)


def _num(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "none"
    return format(value, spec)


def _explorer_section(ctx: Context) -> str:
    groups, config = ctx.groups, ctx.options["report"].explorer
    parts = [
        "<p>Drag the step slider (or focus it and use the arrow keys); pick the evaluation set, "
        "the sequence and the layer. Tokens: <b>x</b><i>i</i> item, <b>l</b><i>i</i> its "
        "label, <b>q</b> the query; <b>c</b>12 a trained class, <b>n</b>1 the sequence's first "
        "novel class, <b>y</b>5 label id 5. The causally masked upper triangle is blank.</p>",
    ]
    for i, g in enumerate(groups):
        run = g.runs[0]
        if len(groups) > 1:
            parts.append(f"<h3>{html_text(g.label)}: {html_text(Path(run.path).name)}</h3>")
        parts.append(explorer_html(explorer_data(run, config), f"explorer-{i}"))
    return "\n".join(parts)


def build_report(
    runs: Sequence, config: ReportConfig | None = None, *, title: str | None = None
) -> str:
    """The report page for some runs, as one HTML string.

    Args:
        runs: :class:`interp.io.rundir.Run` objects (one, or several seeds and/or configs).
        config: what the page contains (default :class:`ReportConfig`).
        title: page title (default: the run directories' names).

    Returns:
        A complete HTML document with plotly.js inline.
    """
    import plotly.offline

    config = config or ReportConfig()
    runs = list(runs)
    ctx = run_context(runs, {"report": config})
    title = title or "induction-cliff report: " + ", ".join(Path(r.path).name for r in runs)
    sections_html = []
    for section in sections(report=True):
        if section.html is not None:
            body = section.html(ctx)
        else:
            body = "\n".join(_fig_html(d.figure) for d in section.figures(ctx))
        if body:  # a section with nothing to show for these runs (no llc.csv, ...) is left out
            n = len(sections_html) + 1
            heading = (
                f'<h2 id="section-{html_attr(section.name)}">{n}. {html_text(section.title)}</h2>'
            )
            sections_html.append(heading + "\n" + body)
    plotly_js = plotly.offline.get_plotlyjs()
    body = "\n".join(sections_html)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html_text(title)}</title>
<style>{_CSS}</style>
<script>{plotly_js}</script>
</head><body>
<h1>{html_text(title)}</h1>
<p class="muted">Written by <code>induction-cliff report</code>. Self-contained: opens offline.</p>
{body}
<script>{EXPLORER_JS}</script>
</body></html>
"""


def write_report(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike | None = None,
    config: ReportConfig | None = None,
) -> Path:
    """Check the inputs, build the report and write it atomically.

    Args:
        run_dirs: run directories.
        out: the HTML file (default ``RUN_DIR/report.html`` for one run; required for several).
        config: what the page contains.

    Returns:
        The path written.

    Raises:
        ReportInputError: bad input (see :func:`check_report_inputs`), before any work.
    """
    from interp.io.checkpoints import write_text_atomic

    runs, out_path = check_report_inputs(run_dirs, out)
    page = build_report(runs, config)
    write_text_atomic(out_path, page)
    logger.info("wrote %s (%.1f MB)", out_path, len(page.encode()) / 1e6)
    return out_path


register_section(
    "config",
    title="Config and deviations from the paper",
    html=_config_section,
    order=10,
    in_figures=False,
)
register_section(
    "transition",
    title="Plateau and transition (IC accuracy)",
    html=_transition_section,
    order=30,
    in_figures=False,
)
register_section(
    "fit_forecast",
    title="Dynamics-model fit and forecast [reconstruction]",
    html=_fit_section,
    order=50,
    in_figures=False,
)
register_section(
    "explorer", title="Attention explorer", html=_explorer_section, order=80, in_figures=False
)
