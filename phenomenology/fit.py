"""Fitting a registered dynamics model to a training run's curves (or any curve).

:class:`DynamicsFit` is the one scikit-learn-style estimator: it fits any model of the registry
(:mod:`phenomenology.models`) by ``scipy.optimize.least_squares`` from the model's seeds, and
gives parameter uncertainties from the Jacobian, the predicted transition step (with a delta-
method standard error) and an 80% interval for it from a moving-block bootstrap of the residuals
(curves are autocorrelated, so the residuals are resampled in blocks; each replicate is refitted by
one Gauss-Newton step from the fit, see :meth:`DynamicsFit.fit`). :func:`fit_curve` fits a curve
table (``induction-cliff fit``), :func:`fit_run` a run directory.

The nested-logit model is one registered implementation, ``"nested-logit"``
(:class:`NestedLogitModel`); :class:`NestedLogitFit` is ``DynamicsFit`` with that model and its
options as keyword arguments, as before.

The nested-logit model itself (how its quantities meet the network's curves) is
:mod:`phenomenology.nested_logit`, the estimator :mod:`phenomenology.estimator`, reading run
curves :mod:`phenomenology.curves`: this module fits curves and run directories and forecasts
from them, and re-exports those modules' public names (``phenomenology.fit.NestedLogitFit``).

The predicted transition step is the step of the steepest drop (per unit of log-time) of the
fitted model's loss, found on the fitted trajectory even when it lies beyond the data, which is
what :func:`forecast_transition` uses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from phenomenology.curves import (
    MIN_POINTS,
    PAPER_TASK,
    _clean,
    check_values,
    observed_transition,
    plateau_problem,
    read_run,
)
from phenomenology.estimator import (
    INTERVAL_LEVEL,
    DynamicsFit,
    FitDidNotConverge,
    NestedLogitFit,
    _jsonable,
)
from phenomenology.models import get_model
from phenomenology.nested_logit import (
    AUX_QUANTITIES,
    DEFAULT_MAPS,
    NestedLogitModel,
    sharpened_cla,
)

__all__ = [
    "AUX_QUANTITIES",
    "INTERVAL_LEVEL",
    "sharpened_cla",
    "check_curve",
    "DEFAULT_MAPS",
    "MIN_POINTS",
    "PAPER_TASK",
    "DynamicsFit",
    "NestedLogitFit",
    "NestedLogitModel",
    "fit_curve",
    "fit_run",
    "forecast_transition",
    "observed_transition",
    "plateau_problem",
    "read_run",
]

logger = logging.getLogger(__name__)


FORECAST_METHODS = ("auto", "template", "progress")


def check_forecast_method(
    curve: pd.DataFrame,
    *,
    method: str,
    progress_column: str,
    optimizer: str | None,
    source: str = "curve",
) -> None:
    """Checks ``--method`` and ``--progress-column`` against a curve, before any work.

    Raises:
        ValueError: one line: an unknown method; ``progress`` with no such column, one that holds
            no numbers, or an optimiser the progress forecast has no calibration for.
    """
    from phenomenology.progress import PROGRESS_CALIBRATIONS

    if method not in FORECAST_METHODS:
        raise ValueError(f"--method={method!r} is invalid: allowed values are {FORECAST_METHODS}")
    if method != "progress":
        return
    if progress_column not in curve.columns:
        cols = [x for x in curve.columns if x != "step"]
        raise ValueError(
            f"{source}: --method progress reads column {progress_column!r}, which does not exist "
            f"(columns: {cols}); name it with --progress-column"
        )
    if not pd.api.types.is_numeric_dtype(curve[progress_column]):
        raise ValueError(f"{source}: column {progress_column!r} holds values that are not numbers")
    if (optimizer or "sgd") not in PROGRESS_CALIBRATIONS:
        raise ValueError(
            f"{source}: --method progress is calibrated for {sorted(PROGRESS_CALIBRATIONS)} only, "
            f"not optimizer={optimizer!r}; use --method template"
        )


def calibrated_forecast(
    curve: pd.DataFrame,
    *,
    until: float,
    task: Mapping[str, Any],
    optimizer: str | None = None,
    method: str = "auto",
    progress_column: str = "tila2",
    column: str = "ic_loss",
    prior=None,
    calibration=None,
):
    """The calibrated forecast of a curve's IC-loss plateau (``column``) seen up to step
    ``until``: the progress forecast (:mod:`phenomenology.progress`) of ``progress_column`` where
    ``method`` allows it and it can forecast, else the template forecast
    (:mod:`phenomenology.forecast`). What ``fit`` reports and the report page shows.

    With a ``prior`` (the transition law's forecast of the run's configuration,
    :func:`phenomenology.transition_law.law_prior`) and ``method="auto"``, the prior updated by
    the partial curve (:func:`phenomenology.prior.combine`; ``detail["method"] == "combined"``).

    Returns:
        A :class:`~phenomenology.forecast.Forecast` (with ``detail["progress_why"]`` when ``auto``
        fell back to the template), or None when the jump is already seen on the loss (then
        there is nothing to forecast, only to fit).
    """
    from interp.analysis.transition import find_transition
    from phenomenology.forecast import forecast_curve
    from phenomenology.progress import progress_forecast

    df = _clean(curve, [column])
    df = df[df["step"] <= until]
    steps, y = df["step"].to_numpy(dtype=float), df[column].to_numpy(dtype=float)
    if find_transition(steps, y, method="cliff", direction="falling").transitioned:
        return None
    if prior is not None and method == "auto":
        return _combined_forecast(curve, df, task, progress_column, column, prior, calibration)
    fc, why = None, None
    if method in ("auto", "progress") and progress_column in curve.columns:
        seen = _clean(curve, [progress_column])
        seen = seen[seen["step"] <= until]
        fc = progress_forecast(seen["step"], seen[progress_column], optimizer=optimizer)
        why = None if fc.ok else fc.reason
    if method == "template" or (method == "auto" and (fc is None or not fc.ok)):
        fc = forecast_curve(steps, y, task=task, check_plateau=False, optimizer=optimizer)
        if why:
            fc.detail["progress_why"] = why
    return fc


def _combined_forecast(curve, df, task, progress_column, column, prior, calibration):
    from phenomenology.forecast import Forecast
    from phenomenology.prior import combine, curve_step

    part = pd.DataFrame({"step": df["step"], "ic_loss": df[column]})
    if progress_column in curve.columns:
        by_step = dict(zip(curve["step"].astype(float), curve[progress_column].astype(float)))
        part["tila2"] = [by_step.get(float(s), math.nan) for s in part["step"]]
    step, how = curve_step(part, task, extended=True)
    last = float(part["step"].iloc[-1])
    post = combine(prior, step, how, last, calibration or {})
    if not post.transitions:
        return Forecast(
            None,
            None,
            None,
            last,
            reason=f"cannot forecast: {prior.reason}",
            detail={"method": "combined"},
        )
    return Forecast(
        post.step,
        post.low,
        post.high,
        last,
        raw_step=step,
        detail={
            "method": "combined",
            "update": how or "none",
            "prior_step": prior.step,
            "prior_interval": [prior.low, prior.high],
            "interval": "the 10-90% quantiles of log T's posterior given the law's prior and the "
            "calibrated partial-curve forecast, truncated to T > the last step seen",
            "held_out": "is scored held out in docs/results/transition-law.md",
        },
    )


def check_curve(
    curve: pd.DataFrame,
    *,
    task: Mapping[str, Any],
    model: str = "nested-logit",
    column: str = "ic_loss",
    target: str | None = None,
    aux: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    source: str = "curve",
) -> None:
    """Checks that :func:`fit_curve` can fit this curve, before any fitting starts.

    Raises:
        ValueError: one line naming the field and ``source``: no ``step`` column, a column that
            does not exist, non-numeric steps, fewer than :data:`MIN_POINTS` points, an unknown
            model, a target the model does not predict, bad task parameters or model options.
    """
    if "step" not in curve.columns:
        raise ValueError(f"{source}: no 'step' column (columns: {list(curve.columns)})")
    for c in (column, *aux):
        if c not in curve.columns:
            cols = [x for x in curve.columns if x != "step"]
            raise ValueError(f"{source}: column {c!r} does not exist (columns: {cols})")
    for c in ("step", column, *aux):
        if not pd.api.types.is_numeric_dtype(curve[c]):
            raise ValueError(f"{source}: column {c!r} holds values that are not numbers")
    cls = get_model(model)
    target = target or column
    if target not in cls.predicts:
        raise ValueError(
            f"--column {column!r}: model {model!r} predicts {sorted(cls.predicts)}; name the "
            f"measure the column stands for with --target"
        )
    df = _clean(curve, [column, *aux])
    if len(df) < MIN_POINTS:
        raise ValueError(
            f"{source}: column {column!r} has {len(df)} points; a fit needs at least {MIN_POINTS}"
        )
    if np.any(df["step"].to_numpy(dtype=float) < 0):
        raise ValueError(f"{source}: column 'step' has negative steps")
    DynamicsFit(model, task=dict(task), target=target, aux=tuple(aux), options=options)._build()


def _seen_part(df: pd.DataFrame, observed: dict, until, fraction, source: str):
    """The cut-off (``until``, or ``fraction`` of the observed plateau) and the rows up to it."""
    cutoff = until
    if fraction is not None:
        if not observed["transitioned"]:
            raise ValueError(
                f"--fraction needs a curve whose transition is seen ({source}: "
                f"{observed['reason']}); use --until"
            )
        start, onset = observed["plateau_start_step"], observed["onset_step"]
        cutoff = start + fraction * (onset - start)
    part = df if cutoff is None else df[df["step"] <= cutoff]
    if len(part) < MIN_POINTS:
        raise ValueError(
            f"{source}: only {len(part)} points with step <= {cutoff:g}; a fit needs at least "
            f"{MIN_POINTS}"
        )
    return cutoff, part


def _add_forecast(
    out: dict,
    curve,
    est,
    problem,
    *,
    until,
    task,
    model,
    target,
    column,
    optimizer,
    method,
    progress_column,
    prior=None,
    calibration=None,
):
    """The forecast fields of :func:`fit_curve`'s result: the calibrated forecast of an IC-loss
    plateau where it applies, else the fitted model's transition, else why there is none; and
    where there is a forecast and ``out["observed"]`` a transition, the forecast's error (forecast
    minus observed step, and that over the observed step)."""
    calibrated = None
    if problem is None and model == NestedLogitModel.name and target == "ic_loss":
        calibrated = calibrated_forecast(
            curve,
            until=until,
            task=task,
            column=column,
            optimizer=optimizer,
            method=method,
            progress_column=progress_column,
            prior=prior,
            calibration=calibration,
        )
    progress_why = None if calibrated is None else calibrated.detail.get("progress_why")
    calibrated_ok = calibrated is not None and calibrated.ok
    if not calibrated_ok and method == "progress" and calibrated is not None:
        problem = calibrated.reason.removeprefix("cannot forecast: ")  # asked for, it cannot
    if calibrated_ok:
        out["forecast"] = "ok"
        out["forecast_transition_step"] = calibrated.step
        out["forecast_interval"] = [calibrated.low, calibrated.high]
        out["forecast_from"] = calibrated.detail.get("method", "template")
        if out["forecast_from"] == "combined":
            d = calibrated.detail
            out["forecast_update"] = d["update"]  # the partial curve's forecaster, or "none"
            out["forecast_method"] = (
                f"the transition law's forecast of this configuration ({d['prior_step']:.0f}, "
                f"80% {d['prior_interval'][0]:.0f}-{d['prior_interval'][1]:.0f}) updated by the "
                f"partial curve ({d['update']} forecaster); interval: {d['interval']}; it "
                f"{d['held_out']}"
            )
        elif out["forecast_from"] == "progress":
            out["forecast_method"] = (
                f"calibrated progress forecast (phenomenology.progress): {progress_column} "
                f"excess reaches its threshold at {calibrated.raw_step:.0f}, x the "
                f"{optimizer or 'sgd'} calibration; interval: "
                f"{calibrated.detail.get('interval')}, which {calibrated.detail.get('held_out')}"
            )
        else:
            out["forecast_method"] = (
                "calibrated template fit (phenomenology.forecast): raw "
                f"{calibrated.raw_step:.0f} x the {optimizer or 'sgd'} calibration; interval: "
                f"{calibrated.detail.get('interval')}, which {calibrated.detail.get('held_out')}"
                + (f" (progress forecast: {progress_why})" if progress_why else "")
            )
        out["forecast_calibration"] = optimizer or "sgd"
    elif problem is None:
        out["forecast"] = "ok"
        out["forecast_transition_step"] = est.transition_step_
        out["forecast_interval"] = list(est.transition_interval_)
        out["forecast_method"] = f"the fitted model's transition; interval: {est.interval_method_}"
        out["forecast_from"] = "fitted model"
    else:
        out["forecast"] = f"cannot forecast: {problem}"
        out["forecast_transition_step"] = None
        out["forecast_interval"] = None
    actual = out["observed"]["transition_step"]
    if problem is None and actual is not None:
        out["forecast_error"] = out["forecast_transition_step"] - actual
        out["forecast_relative_error"] = out["forecast_error"] / actual


def fit_curve(
    curve: pd.DataFrame,
    *,
    task: Mapping[str, Any],
    model: str = "nested-logit",
    column: str = "ic_loss",
    target: str | None = None,
    aux: Sequence[str] = (),
    until: float | None = None,
    fraction: float | None = None,
    options: Mapping[str, Any] | None = None,
    n_boot: int = 50,
    random_state: int = 0,
    source: str = "curve",
    estimator_options: Mapping[str, Any] | None = None,
    optimizer: str | None = None,
    method: str = "auto",
    progress_column: str = "tila2",
    prior=None,
    calibration=None,
) -> dict:
    """Fits a registered model to a curve table and forecasts its transition; a bad input raises
    ``ValueError`` in one line naming the field (and ``source``).

    Args:
        curve: a table with a ``step`` column and ``column`` (and the ``aux`` columns).
        task: task parameters for the model (``{"L": ..., "N": ..., "B": ...}``).
        model: a registered model name.
        column: the curve to fit.
        target: the model's measure the column stands for (default: ``column`` itself).
        aux: further columns fitted jointly (measures the model predicts).
        until: fit only rows with ``step <= until``.
        fraction: fit only the first ``fraction`` of the plateau seen on the whole curve (from
            its start to its onset; the whole curve must show the transition).
        options: model options.
        n_boot, random_state: the bootstrap interval.
        source: what the curve is, for messages (a path).
        estimator_options: further :class:`DynamicsFit` arguments (``aux_weight``,
            ``n_starts``, ``max_nfev``).
        optimizer: the optimiser that trained the curve (``sgd``, the default, or ``adam``): it
            picks the forecast's calibration (:data:`phenomenology.forecast.CALIBRATIONS`).
        method: how an IC-loss plateau is forecast: ``template`` (the calibrated template fit of
            :mod:`phenomenology.forecast`), ``progress`` (the growth of ``progress_column``,
            :mod:`phenomenology.progress`; the curve must have that column and the optimiser a
            progress calibration) or ``auto`` (progress where it can forecast, else template).
        progress_column: the progress measure's column (default ``tila2``).
        prior, calibration: the law's prior (:func:`phenomenology.transition_law.law_prior`).

    Returns:
        JSON-ready dict: :meth:`DynamicsFit.summary` plus ``column``, ``options``,
        ``fitted_until`` (the last step fitted), ``until_step`` (the cut-off asked for, from
        ``until`` or ``fraction``; None for the whole curve), ``n_points_fitted``, ``r2_all``,
        ``observed``, ``forecast_transition_step``, ``forecast_interval`` ``[low, high]`` and
        ``forecast`` (``"ok"`` or ``"cannot forecast: ..."``), and ``forecast_error`` where both are
        known.
    """
    check_curve(
        curve,
        task=task,
        model=model,
        column=column,
        target=target,
        aux=aux,
        options=options,
        source=source,
    )
    _check_cutoff(until, fraction)
    check_forecast_method(
        curve, method=method, progress_column=progress_column, optimizer=optimizer, source=source
    )
    target = target or column
    df = _clean(curve, [column, *aux]).rename(columns={column: target})
    observed = observed_transition(df, column=target)
    cutoff, part = _seen_part(df, observed, until, fraction, source)
    check_values(df.rename(columns={target: column}), [column, *aux], target, source)
    kwargs = {"n_boot": n_boot, "random_state": random_state} | dict(estimator_options or {})
    where = f"{source}: column {column!r}"
    est, out, problem = _fit_seen_part(part, df, model, task, target, aux, options, kwargs, where)
    out["column"] = column
    out["options"] = dict(options or {})
    out["until_step"] = None if cutoff is None else float(cutoff)
    out["observed"] = observed
    _add_forecast(
        out,
        curve,
        est,
        problem,
        until=out["fitted_until"],
        task=task,
        model=model,
        target=target,
        column=column,
        optimizer=optimizer,
        method=method,
        progress_column=progress_column,
        prior=prior,
        calibration=calibration,
    )
    out["source"] = source
    return _jsonable(out)


def _check_cutoff(until, fraction) -> None:
    """One line for a cut-off asked for twice or a fraction outside (0, 1]."""
    if until is not None and fraction is not None:
        raise ValueError("give --until or --fraction, not both")
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"--fraction must be in (0, 1], got {fraction!r}")


def _fit_seen_part(part, df, model, task, target, aux, options, kwargs, where: str) -> tuple:
    """Fit ``model`` (a :class:`DynamicsFit` with ``kwargs``) to the part of the curve seen;
    returns the fitted estimator, its summary (plus ``fitted_until``, ``n_points_fitted`` and
    ``r2_all``, the R^2 on the whole curve ``df``) and the problem that stops a forecast from it
    (None when there is none). A fit that does not converge is raised naming ``where`` (the file
    and column)."""
    from interp.analysis.transition import measure_direction

    est = DynamicsFit(
        model, task=dict(task), target=target, aux=tuple(aux), options=options, **kwargs
    )
    steps = part["step"].to_numpy(dtype=float)
    try:
        est.fit(steps, part[[target, *aux]])
    except FitDidNotConverge as err:
        raise FitDidNotConverge(f"{where}: {err}") from None
    out = est.summary()
    problem = plateau_problem(
        steps, part[target].to_numpy(dtype=float), direction=measure_direction(target)
    )
    if problem is None and not math.isfinite(est.transition_step_):
        problem = "the fitted model has no transition within 100 times the fitted span"
    out["fitted_until"] = float(steps[-1])
    out["n_points_fitted"] = int(len(part))
    out["r2_all"] = est.score(df["step"].to_numpy(dtype=float), df[target].to_numpy(dtype=float))
    return est, out, problem


_ESTIMATOR_KEYS = ("aux_weight", "n_starts", "max_nfev", "n_boot", "random_state")


def _split(kwargs: Mapping[str, Any]) -> tuple[dict, dict]:
    """``(model options, DynamicsFit arguments)`` out of one keyword dict."""
    est = {k: v for k, v in kwargs.items() if k in _ESTIMATOR_KEYS}
    return {k: v for k, v in kwargs.items() if k not in _ESTIMATOR_KEYS}, est


def fit_run(
    run_dir: str | Path,
    *,
    target: str = "ic_loss",
    aux: Sequence[str] = (),
    until_step: float | None = None,
    out_name: str | None = "fit.json",
    model: str = "nested-logit",
    fraction: float | None = None,
    method: str = "auto",
    **estimator_kwargs,
) -> dict:
    """Fits a registered model (default: the nested-logit model) to a run directory.

    Args:
        run_dir: a run directory, opened with :func:`interp.io.rundir.load_run`.
        target: the curve (``metrics.csv`` column) fitted, ``ic_loss`` by default.
        aux: further curves fitted jointly (``cla, ila1, tila2, ic_acc, ic_loss``).
        until_step: fit only evaluations with ``step <= until_step``.
        out_name: file written in ``run_dir`` (None: write nothing), atomically.
        model: a registered model name.
        fraction: fit only the first ``fraction`` of the plateau (see :func:`fit_curve`).
        method: how a plateau is forecast (see :func:`fit_curve`); the run's own optimiser picks
            the calibration.
        **estimator_kwargs: model options (the nested-logit model: ``free_floor``, ...) and
            :class:`DynamicsFit` arguments (``aux_weight``, ``n_starts``, ``max_nfev``,
            ``n_boot``, ``random_state``).

    Returns:
        The :func:`fit_curve` dict plus ``run_dir``.
    """
    from interp.io.atomic import write_json_atomic
    from interp.io.rundir import Run, load_run

    run = run_dir if isinstance(run_dir, Run) else load_run(run_dir)
    metrics, task = read_run(run)
    options, est = _split(estimator_kwargs)
    out = fit_curve(
        metrics,
        task=task,
        model=model,
        column=target,
        aux=aux,
        until=until_step,
        fraction=fraction,
        options=options,
        estimator_options=est,
        source=str(Path(run.path) / "metrics.csv"),
        optimizer=run.train_config.optimizer,
        method=method,
    )
    out["run_dir"] = str(run.path)
    if out_name is not None:
        write_json_atomic(Path(run.path) / out_name, out)
    return out


def forecast_transition(
    run: str | Path | pd.DataFrame,
    fraction_of_plateau: float = 0.8,
    *,
    L: float | None = None,
    N: int | None = None,
    B: int | None = None,
    target: str = "ic_loss",
    aux: Sequence[str] = (),
    free_floor: bool = False,
    **estimator_kwargs,
) -> dict:
    """Forecasts the jump from the curves before it, and compares with where it really came.

    The plateau is read off the target curve with :func:`observed_transition`: it runs from
    ``plateau_start_step`` to ``onset_step``. The fit uses only evaluations with
    ``step <= plateau_start + fraction_of_plateau * (onset - plateau_start)``.

    Args:
        run: a run directory, or a metrics DataFrame (then give ``L, N, B``).
        fraction_of_plateau: how much of the plateau the fit may see, in ``(0, 1]``.
        L, N, B: the task, when ``run`` is a DataFrame.
        target: ``"ic_loss"`` or ``"ic_acc"``.
        aux: curves fitted jointly (those missing from the metrics are dropped). Default: IC
            loss alone. Measured (80% of the plateau): on two paper-fig3 network runs (seeds 0,
            1; jump at 30000 / 30500 steps) IC loss alone forecast 15% early; adding ILA1 and
            TILA2 gave 16% early, adding CLA as well 21% early, and CLA alone (the network's
            argmax CLA climbs far faster than the model's soft one) no jump at all. On the
            model's own noisy curves CLA helped a little (errors 1-15%).
        free_floor: off by default: before the jump the data say nothing about the loss floor,
            and a free floor would absorb the plateau.
        **estimator_kwargs: nested-logit options (see :class:`NestedLogitFit`).

    Returns:
        dict with ``forecast_step``, ``forecast_stderr``, ``forecast_interval``, ``actual_step``,
        ``error_steps``, ``relative_error``, ``cutoff_step``, ``r2_fitted``, ``params``,
        ``stderr``.
    """
    if not 0 < fraction_of_plateau <= 1:
        raise ValueError(f"fraction_of_plateau must be in (0, 1], got {fraction_of_plateau!r}")
    if isinstance(run, pd.DataFrame):
        if None in (L, N, B):
            raise ValueError("L, N and B must be given when run is a DataFrame")
        metrics, task = run, {"L": L, "N": N, "B": B}
    else:
        metrics, task = read_run(run)
    aux = tuple(a for a in aux if a in metrics.columns and a != target)
    options, est = _split(estimator_kwargs)
    out = fit_curve(
        metrics,
        task=task,
        column=target,
        aux=aux,
        fraction=fraction_of_plateau,
        options={"free_floor": free_floor, **options},
        estimator_options=est,
    )
    actual = out["observed"]["transition_step"]
    forecast = out["transition_step"]
    error = None if forecast is None or actual is None else forecast - actual
    return _jsonable(
        {
            "forecast_step": forecast,
            "forecast_stderr": out["transition_step_stderr"],
            "forecast_interval": out["transition_interval"],
            "forecast": out["forecast"],
            "actual_step": actual,
            "error_steps": error,
            "relative_error": None if error is None else error / actual,
            "cutoff_step": out["until_step"],
            "fraction_of_plateau": fraction_of_plateau,
            "n_points_fitted": out["n_points_fitted"],
            "r2_fitted": out["r2"],
            "params": out["params"],
            "stderr": out["stderr"],
            "aux": list(aux),
            "observed": out["observed"],
        }
    )
