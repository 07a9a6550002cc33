"""The one fit overlay: a registered dynamics model refitted to a run's curves (as its ``fit.json``
says, or as asked) and drawn over them, for the figure set and the report alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from interp.viz.dynamics_plots import plot_fit_overlay
from interp.viz.vocabulary import FORECAST, observed_name
from phenomenology.fit import DynamicsFit, read_run
from phenomenology.models import model_names

__all__ = ["saved_fit", "fit_overlay", "model_title"]


def saved_fit(run) -> dict | None:
    """The fit settings of the run's ``fit.json`` (None: there is none): ``model`` (old files that
    name it by its description: ``nested-logit``), ``target``, ``column``, ``aux`` (those the run
    has), ``options``, ``until`` and the ``observed`` transition step."""
    path = Path(run.path) / "fit.json"
    if not path.exists():
        return None
    from interp.io.outputs import read_json_object

    saved = read_json_object(path)  # a damaged fit.json: one line naming it
    _check_types(saved, path)
    target = saved.get("target", "ic_loss")
    model = saved.get("model") if saved.get("model") in model_names() else "nested-logit"
    settings = {
        "model": model,
        "target": target,
        "column": saved.get("column", target),
        "aux": tuple(a for a in saved.get("aux", ()) if a in run.metrics.columns),
        "options": saved.get("options"),
        "until": saved.get("until_step"),
        "observed": (saved.get("observed") or {}).get("transition_step"),
    }
    _check_settings(settings, run, path)
    return settings


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The fields of fit.json an overlay reads, and what each must be (None: absent or null).
_FIELDS = {
    "model": (lambda v: isinstance(v, str), "a model name"),
    "target": (lambda v: isinstance(v, str), "a column name"),
    "column": (lambda v: isinstance(v, str), "a column name"),
    "aux": (lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v), "a list"),
    "options": (lambda v: isinstance(v, dict), "an object"),
    "until_step": (_is_number, "a number"),
    "observed": (
        lambda v: (
            isinstance(v, dict)
            and (v.get("transition_step") is None or _is_number(v["transition_step"]))
        ),
        "an object with a numeric transition_step",
    ),
}


def _check_types(saved: dict, path: Path) -> None:
    """Refuse a fit.json whose fields have the wrong type, naming the file and the field."""
    from interp.io.errors import DamagedFileError

    for name, (ok, kind) in _FIELDS.items():
        value = saved.get(name)
        if value is not None and not ok(value):
            raise DamagedFileError(
                f"{path}: field {name!r} is {value!r}, not {kind}: a damaged fit.json"
            )


def _check_settings(settings: dict, run, path: Path) -> None:
    """Refuse a fit.json whose column is not one of the run's or whose target, aux or options
    the model does not take, naming the file and the field (before any figure is drawn)."""
    from interp.io.errors import DamagedFileError

    column = settings["column"]
    if column not in run.metrics.columns:
        raise DamagedFileError(
            f"{path}: field 'column' is {column!r}, not a column of the run's metrics.csv: a "
            "damaged fit.json"
        )
    _, task = read_run(run)
    try:
        DynamicsFit(
            settings["model"],
            task=task,
            target=settings["target"],
            aux=settings["aux"],
            options=settings["options"],
        )._build()
    except (ValueError, KeyError, TypeError) as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DamagedFileError(
            f"{path}: field 'target', 'aux' or 'options' is not the model's ({detail}): a "
            "damaged fit.json"
        ) from None


def model_title(model: str) -> str:
    """How figures name a model's fit."""
    return "Nested-logit fit [reconstruction]" if model == "nested-logit" else model


def fit_overlay(
    run,
    *,
    model: str = "nested-logit",
    target: str = "ic_loss",
    column: str | None = None,
    aux=(),
    options: dict | None = None,
    until: float | None = None,
    observed_step: float | None = None,
    title: str | None = None,
    note: str | None = None,
) -> tuple[DynamicsFit, go.Figure]:
    """Fit ``model`` to the run's ``column`` (as ``target``; steps <= ``until``) and draw the fitted
    curves over the run's, with the fit's transition (the *fitted transition* of a whole-curve
    fit, a *forecast* with ``until``), the one seen on the data (``observed_step``: the IC-loss
    cliff of an ``ic_loss`` column, :func:`interp.viz.vocabulary.observed_name`) and the cut-off.

    Only the curves the fit compared with the data are drawn (``target`` and ``aux``): the
    model's other quantities (the nested-logit model's soft CLA, say, which sits far below the
    network's argmax CLA) are not fits of the run's curves.

    Returns:
        The fitted estimator and the figure.
    """
    _, task = read_run(run)
    metrics = run.metrics
    column = column or target
    df = metrics[["step", column, *aux]].rename(columns={column: target})
    df = df.dropna().sort_values("step")
    seen = df if until is None else df[df["step"] <= until]
    est = DynamicsFit(
        model, task=task, target=target, aux=tuple(aux), options=options, n_boot=0
    ).fit(seen["step"].to_numpy(dtype=float), seen[[target, *aux]])
    grid = np.linspace(0.0, float(metrics["step"].max()), 400)
    fitted = est.transition_step_
    # the steps and names go in the legend; the subtitle stays one line at a column's width
    seen_text = None if until is None else f"{FORECAST} from steps <= {until:.0f}"
    fig = plot_fit_overlay(
        metrics.rename(columns={column: target}),
        est.predict_curves(grid),
        fitted_step=fitted,
        observed_step=observed_step,
        observed_label=observed_name(column),
        cutoff_step=until,
        columns=[target, *aux],
        title=title or f"{model_title(model)}: {Path(run.path).name}",
        note="; ".join(n for n in (seen_text, note) if n) or None,
    )
    return est, fig
