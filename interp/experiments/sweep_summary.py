"""A sweep's results: one summary row per point from what is on disk (final accuracies, the
transition of IC accuracy), the mean and spread over seeds, and the phase-diagram figure; above
the figures (:mod:`interp.viz`), as orchestration is."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from interp.experiments.sweep_spec import (
    _FINAL_METRICS,
    _TRANSITION_COLUMNS,
    SUMMARY,
    SUMMARY_OVER_SEEDS,
    SweepSpec,
    _fmt,
    _read_status,
    load_manifest,
    point_dir,
)
from interp.io import checkpoints
from interp.io.errors import DamagedFileError, RunDirectoryError
from interp.io.paths import check_no_links
from interp.io.rundir import (
    read_metrics,
)

_log = logging.getLogger(__name__)

__all__ = ["summarize_sweep", "aggregate_seeds", "write_summary", "write_sweep_figures"]


# summary and figure


def summarize_sweep(out_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per point of the sweep in ``out_dir``, from what is on disk.

    Returns:
        Columns ``point``, the grid fields, ``seed``, ``steps`` (configured), ``steps_done``,
        final ``ic_acc``, ``ic2_acc``, ``iw_acc``, the transition of IC accuracy
        (:func:`interp.analysis.transition.detect_transition`): ``transition_step``,
        ``transition_width``, ``plateau_level`` (the logistic's floor), ``plateau_measured`` (median
        IC accuracy over the last 20% of the plateau), ``plateau_length`` (NaN without a transition)
        and ``transition_reason`` (why not, else empty), then ``status`` (``done``, ``failed``,
        ``interrupted``, ``partial``, ``pending`` or ``damaged``: a ``metrics.csv`` emptied or
        holding text) and ``error``.
    """
    from interp.analysis.transition import detect_transition

    out = Path(out_dir)
    manifest = load_manifest(out)
    fields = SweepSpec.from_dict(manifest["spec"]).fields
    status = _read_status(out)
    rows = []
    for p in manifest["points"]:
        run_dir = point_dir(out, p["name"])
        steps = int(p["train"]["steps"])
        row = {"point": p["name"], **{f: p["values"].get(f) for f in fields}, "seed": p["seed"]}
        row |= {"steps": steps, "steps_done": 0}
        row |= {m: float("nan") for m in (*_FINAL_METRICS, *_TRANSITION_COLUMNS)}
        row["transition_reason"] = "no metrics yet"
        try:
            metrics, damaged = read_metrics(run_dir / "metrics.csv").frame, ""
        except DamagedFileError as err:
            metrics, damaged = pd.DataFrame(), str(err)
        if len(metrics):
            last = metrics.iloc[-1]
            row["steps_done"] = int(metrics["step"].max())
            row |= {m: float(last[m]) for m in _FINAL_METRICS if m in metrics}
            r = detect_transition(metrics["step"], metrics["ic_acc"])
            row["transition_reason"] = r.reason
            if r.transitioned:
                row |= {
                    "transition_step": r.step,
                    "transition_width": r.width,
                    "plateau_level": r.plateau_level,
                    "plateau_measured": r.plateau_measured,
                    "plateau_length": r.plateau_length,
                }
        said = status.get(p["name"], {})
        if not len(metrics) and said.get("status") == "done":
            damaged = damaged or f"{run_dir / 'metrics.csv'} has no rows, yet the point finished"
        if damaged:
            row["status"], row["error"] = "damaged", damaged
        elif row["steps_done"] >= steps:
            row["status"], row["error"] = "done", ""
        elif said.get("status") in ("failed", "interrupted"):
            row["status"], row["error"] = said["status"], said.get("error", "")
        else:
            row["status"], row["error"] = ("partial" if len(metrics) else "pending"), ""
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate_seeds(summary: pd.DataFrame, fields: Sequence[str]) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each grid point of a :func:`summarize_sweep`.

    Args:
        summary: the per-point summary.
        fields: the grid fields (the grouping columns; none: one row over all seeds).

    Returns:
        The fields, ``n_seeds``, ``n_done``, ``n_transitioned``, then ``<metric>_mean`` and
        ``<metric>_std`` for ``steps_done``, the final accuracies and the transition columns
        (std is NaN for one seed; transition columns average the seeds that transitioned).
    """
    fields = list(fields)
    numeric = ["steps_done", *_FINAL_METRICS, *_TRANSITION_COLUMNS]
    groups = summary.groupby(fields, sort=False, dropna=False) if fields else [((), summary)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(fields, key))
        row |= {
            "n_seeds": len(g),
            "n_done": int((g["status"] == "done").sum()),
            "n_transitioned": int(g["transition_step"].notna().sum()),
        }
        for m in numeric:
            values = pd.to_numeric(g[m], errors="coerce")
            row[f"{m}_mean"] = float(values.mean()) if values.notna().any() else float("nan")
            row[f"{m}_std"] = float(values.std()) if values.notna().sum() > 1 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def write_summary(out_dir: str | os.PathLike, summary: pd.DataFrame | None = None) -> list[Path]:
    """Write ``summary.csv`` and ``summary_over_seeds.csv`` (rebuilt from disk if not given)."""
    out = Path(out_dir)
    summary = summarize_sweep(out) if summary is None else summary
    fields = SweepSpec.from_dict(load_manifest(out)["spec"]).fields
    paths = [out / SUMMARY, out / SUMMARY_OVER_SEEDS]
    checkpoints.write_text_atomic(paths[0], summary.to_csv(index=False))
    checkpoints.write_text_atomic(paths[1], aggregate_seeds(summary, fields).to_csv(index=False))
    return paths


def _figure_note(out: Path, manifest: dict, summary: pd.DataFrame) -> tuple[str, str]:
    """Title and note (deviations from the paper) of a sweep's figure."""
    from interp.io.rundir import load_run
    from interp.viz.figures import run_note

    spec = manifest["spec"]
    notes = []
    for p in manifest["points"]:
        if (out / p["name"] / "config.json").exists():
            note = run_note(load_run(out / p["name"]))
            if note and note not in notes:
                notes.append(note)
    steps = sorted({int(p["train"]["steps"]) for p in manifest["points"]})
    steps_text = f"{steps[0]} steps" if len(steps) == 1 else "steps per grid point"
    from interp.train.presets import PAPER_TRAIN

    if max(steps) < PAPER_TRAIN.steps:  # every point stopped before the default length
        steps_text += f" (default: {PAPER_TRAIN.steps:.0e})".replace("e+0", "e")
    seeds = spec.get("seeds", [])
    seeds_text = f"mean over {len(seeds)} seeds" if len(seeds) > 1 else f"seed {seeds[0]}"
    unfinished = int((summary["status"] != "done").sum())
    title = f"{spec['preset']}: final accuracy after {steps_text}, {seeds_text}"
    if unfinished:
        title += f" ({unfinished} of {len(summary)} runs unfinished)"
    if len(notes) > 2:
        notes = ["optimiser or encoding varies over the grid"]
    return title, "; ".join(notes)


def write_sweep_figures(
    out_dir: str | os.PathLike,
    summary: pd.DataFrame | None = None,
    formats: Sequence[str] = ("png", "pdf", "html"),
    *,
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the sweep's phase-diagram figure(s) into ``out_dir/figures`` (and their CSV).

    A 2-D grid gives heatmaps of final IC and IW accuracy; a 1-D grid, IC / IC2 / IW accuracy
    against the field with the spread over seeds; a larger grid, one 2-D diagram per value of the
    other fields. A grid of seeds only has no diagram. Without Chromium, static formats are
    skipped with a warning and HTML is written instead.

    Returns:
        The paths written.
    """
    from interp.viz.export import export_figure
    from interp.viz.sweep_plots import plot_sweep

    log = log or _log.info  # the CLI shows interp's INFO lines on stderr
    out = Path(out_dir)
    manifest = load_manifest(out)
    summary = summarize_sweep(out) if summary is None else summary
    fields = SweepSpec.from_dict(manifest["spec"]).fields
    # each field's values in grid order, as the points hold them (typed; references by name)
    order = {f: list(dict.fromkeys(p["values"][f] for p in manifest["points"])) for f in fields}
    have = summary[summary["ic_acc"].notna()]
    if not fields or have.empty:
        log("no phase diagram: " + ("the grid has no field" if not fields else "no metrics yet"))
        return []
    title, note = _figure_note(out, manifest, summary)
    panels = [((), have)]
    if len(fields) > 2:
        rest = fields[2:]
        panels = [
            (key if isinstance(key, tuple) else (key,), g)
            for key, g in have.groupby(rest, sort=False, dropna=False)
        ]
    written = []
    for key, part in panels:
        suffix = "".join(f"_{f}={_fmt(v)}" for f, v in zip(fields[2:], key))
        where = ", ".join(f"{f}={v}" for f, v in zip(fields[2:], key))
        fig = plot_sweep(
            part,
            fields[:2],
            order=order,
            title=f"{title}{' at ' + where if where else ''}",
            note=note or None,
        )
        stem = out / "figures" / f"phase_diagram{suffix}"
        check_no_links(out, stem.relative_to(out))  # a linked figures/ is refused, not followed
        try:
            written += export_figure(fig, stem, formats)
        except RunDirectoryError:
            raise
        except RuntimeError as err:  # no Chromium for static formats: keep the interactive one
            log(f"warning: {err}; writing HTML only")
            written += export_figure(fig, stem, ("html",))
    return written
