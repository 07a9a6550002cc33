"""The live forecast of the transition while a run trains: at each evaluation on the plateau, the
progress forecast (:mod:`phenomenology.progress`) where the optimiser has a calibration, else the
template forecast (:mod:`phenomenology.forecast`), into the ``forecast_step``, ``forecast_low``
and ``forecast_high`` columns of ``metrics.csv``; :class:`LiveForecast` hands it to the training
loop as a callback. A run whose configuration lies inside the transition law's data
(:mod:`phenomenology.transition_law`) starts from the law's forecast, which the curve updates
(:mod:`phenomenology.prior`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from interp.analysis.transition import find_transition
from phenomenology.curves import MIN_POINTS, plateau_problem
from phenomenology.forecast import Forecast, forecast_curve
from phenomenology.progress import progress_calibration_for, progress_forecast

__all__ = [
    "FORECAST_COLUMNS",
    "LiveForecast",
    "live_every",
    "live_forecast",
    "progress_text",
    "thin",
]

FORECAST_COLUMNS = ("forecast_step", "forecast_low", "forecast_high")
"""The ``metrics.csv`` columns of the live forecast (empty when there is none)."""

LIVE_MAX_POINTS = 80
"""The live forecast fits at most this many evaluations (evenly thinned; the first and last kept),
so its cost per evaluation stays flat over a long run."""


def thin(n: int, max_points: int = LIVE_MAX_POINTS) -> np.ndarray:
    """Indices of at most ``max_points`` of ``n`` points, evenly spread, first and last kept."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max_points)).astype(int))


def live_every(steps: int, eval_every: int, fits: int = 25) -> int:
    """Fit the live forecast at every ``k``-th evaluation, ``k`` such that a run has about
    ``fits`` fits (the evaluations between carry the last forecast forward)."""
    return max(1, math.ceil((steps // eval_every + 1) / fits))


def live_forecast(
    rows,
    task: Mapping[str, float],
    *,
    column: str = "ic_loss",
    every: int = 1,
    optimizer: str | None = None,
    progress_column: str = "tila2",
    prior=None,
    calibration: Mapping | None = None,
) -> dict:
    """The forecast columns for the newest of ``rows`` (the metrics rows so far, dicts).

    With a ``prior`` (the transition law's forecast of the run's configuration,
    :func:`phenomenology.transition_law.law_prior`), the forecast is the prior updated by the
    partial curve (:func:`phenomenology.prior.combine` with ``calibration``), at every
    evaluation with enough points for a fit. Without one: where the rows have
    ``progress_column`` and the optimiser a progress calibration, the progress forecast
    (:mod:`phenomenology.progress`) once ``column`` shows a plateau; otherwise (or when it cannot
    forecast) the template forecast of ``column``.

    A deterministic function of the rows (a resumed run writes the same values as an uninterrupted
    one): NaN in all three columns before a forecast is possible (too few points, no plateau yet)
    and once the transition is seen. The fit runs at every ``every``-th row (row index a multiple
    of ``every``); the rows between carry the previous row's forecast while the transition is not
    seen.
    """
    steps = np.array([float(r["step"]) for r in rows])
    y = np.array([float(r.get(column, math.nan)) for r in rows])
    ok = np.isfinite(y)
    steps, y = steps[ok], y[ok]
    nan = dict.fromkeys(FORECAST_COLUMNS, math.nan)
    if len(steps) < MIN_POINTS:
        return nan
    if (len(rows) - 1) % every:
        return _carried(rows, steps, y) or nan
    idx = thin(len(steps))
    if prior is not None:
        return _live_combined(rows, steps, y, idx, task, progress_column, prior, calibration)
    fc = _live_progress(rows, steps[idx], y[idx], progress_column, optimizer)
    if fc is None or not fc.ok:
        fc = forecast_curve(steps[idx], y[idx], task=task, optimizer=optimizer)
    if not fc.ok:
        return nan
    return dict(zip(FORECAST_COLUMNS, (fc.step, fc.low, fc.high), strict=True))


def _carried(rows, steps: np.ndarray, y: np.ndarray) -> dict | None:
    """The previous row's forecast, carried to a row between fits (None: it had none, or the
    transition is seen now)."""
    prev = rows[-2] if len(rows) > 1 else {}
    carried = [float(prev.get(c, math.nan)) for c in FORECAST_COLUMNS]
    if not all(math.isfinite(v) for v in carried):
        return None
    if find_transition(steps, y, method="cliff", direction="falling").transitioned:
        return None
    return dict(zip(FORECAST_COLUMNS, carried, strict=True))


def _live_combined(rows, steps, y, idx, task, progress_column, prior, calibration) -> dict:
    """The law's prior updated by the thinned curve so far (NaN once the transition is seen)."""
    import pandas as pd

    from phenomenology.prior import combine, curve_step

    if find_transition(steps, y, method="cliff", direction="falling").transitioned:
        return dict.fromkeys(FORECAST_COLUMNS, math.nan)
    part = pd.DataFrame({"step": steps[idx], "ic_loss": y[idx]})
    if progress_column in rows[-1]:
        by_step = {float(r["step"]): float(r.get(progress_column, math.nan)) for r in rows}
        part["tila2"] = [by_step.get(float(s), math.nan) for s in part["step"]]
    step, method = curve_step(part, task, extended=True)
    post = combine(prior, step, method, float(steps[-1]), calibration or {})
    if not post.transitions:
        return dict.fromkeys(FORECAST_COLUMNS, math.nan)
    return dict(zip(FORECAST_COLUMNS, (post.step, post.low, post.high), strict=True))


def _live_progress(rows, steps, y, column: str, optimizer: str | None) -> Forecast | None:
    """The progress forecast of the live rows, or None where it does not apply (no such column,
    no calibration for the optimiser, no plateau yet on the loss or its jump already seen)."""
    if column not in rows[-1] or progress_calibration_for(optimizer) is None:
        return None
    p = np.array([[float(r["step"]), float(r.get(column, math.nan))] for r in rows])
    p = p[np.isfinite(p[:, 1])]
    if len(p) < MIN_POINTS or plateau_problem(steps, y, direction="falling") is not None:
        return None
    if find_transition(steps, y, method="cliff", direction="falling").transitioned:
        return None
    idx = thin(len(p))
    return progress_forecast(p[idx, 0], p[idx, 1], optimizer=optimizer)


def progress_text(row: Mapping[str, float]) -> str | None:
    """``"30.2k ± 1.1k"`` for the progress bar (``±`` half the 80% interval), or None."""
    step = row.get("forecast_step")
    if step is None or not math.isfinite(step):
        return None
    half = (row["forecast_high"] - row["forecast_low"]) / 2

    def k(x: float) -> str:
        return f"{x / 1000:.1f}k" if abs(x) >= 1000 else f"{x:.0f}"

    return f"{k(step)} ± {k(half)}"


class LiveForecast:
    """The live forecast as a callback of the training loop
    (:class:`interp.train.training.EvalCallback`): at each evaluation the forecast columns of
    :func:`live_forecast` from the IC loss so far, refitted every :func:`live_every` evaluations,
    calibrated for the run's optimiser; the progress bar shows it (``cliff ~``) and whether it
    falls within the run's budget (``in budget``), with the AUROC measured for the law's forecast
    at that fraction of the budget where the law gives the prior (:mod:`phenomenology.warning`).
    It keeps only the budget and the step of its last call, which every run of a stacked training
    shares, so one instance serves them all."""

    def __init__(self) -> None:
        self.budget: int | None = None
        self.seen = 0.0
        self.with_law = False

    def __call__(self, run, row: Mapping[str, float]) -> dict:
        if "ic_loss" not in row:
            return {}
        from phenomenology.transition_law import law_prior

        task, cfg = run.task, run.cfg
        prior, calibration, _ = law_prior(task, getattr(run.model, "cfg", None), cfg)
        self.budget, self.seen, self.with_law = (
            int(cfg.steps),
            float(row["step"]),
            prior is not None,
        )
        return live_forecast(
            [*run.rows, row],
            {"L": task.L, "N": task.N, "B": int(task.B_eval_effective)},
            every=live_every(cfg.steps, cfg.eval_every),
            optimizer=cfg.optimizer,
            prior=prior,
            calibration=calibration,
        )

    def progress(self, row: Mapping[str, float]) -> dict[str, str]:
        text = progress_text(row) if "forecast_step" in row else None
        if text is None:
            return {}
        out = {"cliff ~": text}
        if self.budget:
            from phenomenology.warning import short_verdict

            signals = ("law",) if self.with_law else ()
            out["in budget"] = short_verdict(
                float(row["forecast_step"]), self.seen, self.budget, signals
            )
        return out
