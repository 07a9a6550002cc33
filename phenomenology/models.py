"""The registry of dynamics models: what :class:`phenomenology.fit.DynamicsFit` can fit.

A dynamics model predicts a run's curves (IC loss, IC accuracy, attention measures, ...) as
functions of the training step from a few parameters. It is registered under a name, and then
``DynamicsFit(model=NAME)`` and ``induction-cliff fit PATH --model NAME`` fit it. Three forms:

- a **curve model**: a function of the step, its parameters fitted directly::

      register_model(
          "logistic-step",
          params=("height", "t_mid", "width"),
          bounds={"height": (0, 10), "t_mid": (0, 1e7), "width": (1, 1e7)},
          start=lambda steps, y, task: {"height": y[0], "t_mid": steps[-1] / 2,
                                        "width": steps[-1] / 20},
          curve=lambda steps, p, task: {
              "loss": p["height"] / (1 + np.exp((steps - p["t_mid"]) / p["width"]))},
          predicts={"ic_loss": "loss"},
      )

- a **loss model**: a loss over named parameters whose gradient flow, in model time
  ``t = step / time_scale``, is the curve; the fitted parameters are ``time_scale`` and the
  start of each parameter (``loss=`` and optionally ``quantities=`` instead of ``curve=``, see
  :func:`phenomenology.landscape.flow`);
- a **class**: a :class:`DynamicsModel` subclass, for models that need their own seeding, maps or
  transition (the nested-logit model, :class:`phenomenology.fit.NestedLogitModel`).

``predicts`` maps each network measure the model can be compared with (a column of
``metrics.csv``) to the model quantity that stands for it. Residuals of each measure are divided by
its scale (:meth:`DynamicsModel.scale`), so curves fitted jointly weigh alike.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from interp.registry import Registry
from phenomenology.landscape import flow

__all__ = [
    "DynamicsModel",
    "CurveModel",
    "LossModel",
    "register_model",
    "get_model",
    "model_names",
    "unregister_model",
]

logger = logging.getLogger(__name__)

_REGISTRY: Registry[type[DynamicsModel]] = Registry(
    "model",
    field="model",
    entry="DynamicsModel",
    hint="(a plugin's model needs --plugin PATH_OR_MODULE)",
    sort=True,
)
"""Name -> dynamics model class (:class:`interp.registry.Registry`)."""


class DynamicsModel:
    """Base class of a dynamics model; one instance is built per fit.

    Subclasses set ``name``, ``description`` and ``predicts`` and implement
    :meth:`param_names`, :meth:`bounds`, :meth:`seeds` and :meth:`trajectory`; the others have
    defaults. ``theta`` is the internal parameter vector, in the order of :meth:`param_names`.

    Args:
        task: task parameters (``{"L": ..., "N": ..., "B": ...}`` for the network's task).
        target: the measure ``predict`` and ``score`` refer to (a key of ``predicts``).
        aux: further measures fitted jointly (keys of ``predicts``).
        **options: model options (the nested-logit model's ``free_floor``, ``maps``, ...).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    predicts: ClassVar[Mapping[str, str]] = {}
    """Network measure -> model quantity that stands for it."""

    def __init__(self, *, task: Mapping[str, Any], target: str, aux: Sequence[str] = (), **options):
        if target not in self.predicts:
            raise ValueError(
                f"target {target!r} is not predicted by model {self.name!r}: it predicts "
                f"{sorted(self.predicts)}"
            )
        for a in aux:
            if a not in self.predicts or a == target:
                allowed = sorted(set(self.predicts) - {target})
                raise ValueError(f"aux entries must be among {allowed}, got {a!r}")
        if options:
            raise ValueError(f"model {self.name!r} takes no options, got {sorted(options)}")
        self.task = dict(task)
        self.target = target
        self.aux = tuple(aux)

    @property
    def measures(self) -> tuple[str, ...]:
        """The fitted measures: the target, then the auxiliary ones."""
        return (self.target, *self.aux)

    def param_names(self) -> tuple[str, ...]:
        """Names of the entries of ``theta``."""
        raise NotImplementedError

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``theta`` (``-inf`` / ``inf`` where free)."""
        n = len(self.param_names())
        return np.full(n, -np.inf), np.full(n, np.inf)

    def seeds(self, steps: np.ndarray, ys: Mapping[str, np.ndarray], scales) -> list[np.ndarray]:
        """Starting vectors for the local fits, best first."""
        raise NotImplementedError

    def trajectory(self, steps: np.ndarray, theta: np.ndarray) -> pd.DataFrame:
        """Model quantities (one column each, those named in ``predicts``) at ``steps``.

        Raises:
            RuntimeError: the model cannot be evaluated at ``theta`` (the fit then treats the
                point as very bad).
        """
        raise NotImplementedError

    def curves(
        self, traj: Mapping[str, np.ndarray], theta: np.ndarray, ys: Mapping[str, np.ndarray] | None
    ) -> dict[str, np.ndarray]:
        """Predictions of each fitted measure in the run's units (default: the quantity itself).

        ``traj`` is what :meth:`trajectory` returns, or a plain ``{column: array}`` mapping.

        ``ys`` is the data during fitting (for maps solved in closed form) and None afterwards.
        """
        return {m: np.asarray(traj[self.predicts[m]], dtype=float) for m in self.measures}

    def scale(self, measure: str, y: np.ndarray) -> float:
        """Residual scale of a measure: its standard deviation, at least 5% of its range (of 1
        when the range is 0)."""
        floor = 0.05 * (float(np.ptp(y)) or 1.0)
        return max(float(np.std(y)), floor)

    def report(self, theta: np.ndarray, cov: np.ndarray) -> tuple[dict, dict]:
        """``(params, stderr)`` in user units (default: ``theta`` by name, root of cov's
        diagonal)."""
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        names = self.param_names()
        return (
            {n: float(v) for n, v in zip(names, theta)},
            {n: float(s) for n, s in zip(names, se)},
        )

    def direction(self, measure: str) -> str:
        """``"falling"`` (a loss) or ``"rising"``; see
        :func:`interp.analysis.transition.measure_direction`."""
        from interp.analysis.transition import measure_direction

        return measure_direction(measure)

    def transition(self, theta: np.ndarray, last_step: float) -> float:
        """Transition step of the fitted target curve, searched up to 100 x ``last_step``.

        Default: :func:`interp.analysis.transition.find_transition` (``cliff`` for a falling target,
        ``logistic`` for a rising one) on the predicted curve over a dense grid; ``inf`` when it
        finds no abrupt transition there.
        """
        from interp.analysis.transition import find_transition

        grid = np.geomspace(1e-3 * last_step, 100.0 * last_step, 4000)
        try:
            pred = self.curves(self.trajectory(grid, theta), theta, None)[self.target]
        except RuntimeError:
            return math.inf
        direction = self.direction(self.target)
        r = find_transition(grid, pred, direction=direction, smooth_window=1)
        if not r.transitioned or r.step is None:
            return math.inf
        if r.method == "logistic":
            return float(r.step)
        # The cliff is the argmax over grid points (0.3% apart): refine it on a fine local grid
        # so that nearby parameters give distinguishable steps (the delta method, the bootstrap).
        local = np.linspace(r.step / 1.01, r.step * 1.01, 2001)
        try:
            y = self.curves(self.trajectory(local, theta), theta, None)[self.target]
        except RuntimeError:
            return float(r.step)
        sign = 1.0 if direction == "falling" else -1.0
        return float(local[int(np.argmax(-sign * local * np.gradient(y, local)))])

    def fitted_attributes(self, theta: np.ndarray) -> dict[str, Any]:
        """Extra fitted attributes (name ending in ``_``) set on the estimator after a fit."""
        return {}

    def summary(self) -> dict[str, Any]:
        """Extra keys of the fit's JSON summary."""
        return {}


class CurveModel(DynamicsModel):
    """A model given as a curve function of the step (see :func:`register_model`)."""

    params: ClassVar[tuple[str, ...]] = ()
    param_bounds: ClassVar[Mapping[str, tuple[float, float]]] = {}
    start: ClassVar[Any] = None
    curve_fn: ClassVar[Callable | None] = None

    def param_names(self) -> tuple[str, ...]:
        return tuple(self.params)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        b = [self.param_bounds.get(p, (-np.inf, np.inf)) for p in self.params]
        return np.array([lo for lo, _ in b], float), np.array([hi for _, hi in b], float)

    def seeds(self, steps, ys, scales) -> list[np.ndarray]:
        starts = _starts(self.start, steps, ys[self.target], self.task)
        return [np.array([float(s[p]) for p in self.params]) for s in starts]

    def trajectory(self, steps, theta) -> pd.DataFrame:
        p = dict(zip(self.params, (float(v) for v in theta)))
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            out = type(self).curve_fn(np.asarray(steps, float), p, self.task)
        steps = np.asarray(steps, float)
        cols = {k: np.broadcast_to(np.asarray(v, float), steps.shape) for k, v in out.items()}
        if not all(np.all(np.isfinite(v)) for v in cols.values()):
            raise RuntimeError(f"model {self.name!r}: non-finite curve at {p}")
        return pd.DataFrame({"step": steps} | cols)


class LossModel(DynamicsModel):
    """A model given as a loss whose gradient flow is the curve (see :func:`register_model`).

    ``theta = [log time_scale, start of each parameter]``; reported as ``time_scale`` and
    ``{name}_0``.
    """

    params: ClassVar[tuple[str, ...]] = ()
    param_bounds: ClassVar[Mapping[str, tuple[float, float]]] = {}
    start: ClassVar[Any] = None
    loss_fn: ClassVar[Callable | None] = None
    quantities_fn: ClassVar[Callable | None] = None

    def param_names(self) -> tuple[str, ...]:
        return ("log_time_scale", *(f"{p}_0" for p in self.params))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        b = [self.param_bounds.get(p, (-np.inf, np.inf)) for p in self.params]
        return np.array([-np.inf, *(lo for lo, _ in b)]), np.array([np.inf, *(hi for _, hi in b)])

    def _flow(self, t: np.ndarray, start: Mapping[str, float]) -> pd.DataFrame:
        cls = type(self)
        return flow(cls.loss_fn, start, t_eval=t, task=self.task, quantities=cls.quantities_fn)

    def seeds(self, steps, ys, scales) -> list[np.ndarray]:
        """For each declared start: the time scale that best fits on a grid, from one dense
        trajectory in model time."""
        out = []
        t_grid = np.r_[0.0, np.geomspace(1e-3, 1e4, 600)]
        for s in _starts(self.start, steps, ys[self.target], self.task):
            start = {p: float(s[p]) for p in self.params}
            try:
                traj = self._flow(t_grid, start)
            except RuntimeError:
                continue
            tt = traj["t"].to_numpy()
            cols = {c: traj[c].to_numpy() for c in traj.columns}
            best, best_cost = None, np.inf
            for log_ts in math.log(max(steps[-1], 1.0)) + np.linspace(-10.0, 4.0, 57):
                t = steps / math.exp(log_ts)
                sub = {c: np.interp(t, tt, cols[c]) for c in cols}
                theta = np.array([log_ts, *start.values()])
                preds = self.curves(sub, theta, ys)
                cost = sum(np.sum(((preds[k] - y) / scales[k]) ** 2) for k, y in ys.items())
                if cost < best_cost:
                    best, best_cost = theta, cost
            if best is not None:
                out.append((best_cost, best))
        if not out:
            raise RuntimeError(f"model {self.name!r}: no start could be integrated")
        return [theta for _, theta in sorted(out, key=lambda pair: pair[0])]

    def trajectory(self, steps, theta) -> pd.DataFrame:
        start = dict(zip(self.params, (float(v) for v in theta[1:])))
        traj = self._flow(np.asarray(steps, float) / math.exp(theta[0]), start)
        traj.insert(0, "step", np.asarray(steps, float))
        return traj

    def report(self, theta, cov) -> tuple[dict, dict]:
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        ts = math.exp(theta[0])
        params = {"time_scale": ts} | {f"{p}_0": float(v) for p, v in zip(self.params, theta[1:])}
        stderr = {"time_scale": ts * float(se[0])} | {
            f"{p}_0": float(s) for p, s in zip(self.params, se[1:])
        }
        return params, stderr


def _starts(start, steps, y, task) -> list[Mapping[str, float]]:
    s = start(steps, y, task) if callable(start) else start
    if isinstance(s, Mapping):
        return [s]
    return list(s)


def _check_model_args(name, params, bounds, start, curve, loss, predicts) -> None:
    """The arguments of :func:`register_model`'s curve and loss forms, each refused in one line."""
    _REGISTRY.check_name(name)
    if (curve is None) == (loss is None):
        raise ValueError(f"register_model({name!r}): give exactly one of curve= and loss=")
    if not params:
        raise ValueError(f"register_model({name!r}): params must name the parameters")
    if start is None:
        raise ValueError(f"register_model({name!r}): start is required")
    if not predicts:
        raise ValueError(
            f"register_model({name!r}): predicts must map network measures to quantities"
        )
    unknown = sorted(set(bounds or {}) - set(params))
    if unknown:
        raise ValueError(f"register_model({name!r}): bounds name unknown params {unknown}")
    for p, (lo, hi) in (bounds or {}).items():
        if not lo < hi:
            raise ValueError(f"register_model({name!r}): bounds[{p!r}] must have low < high")


def _model_class(name, params, bounds, start, curve, loss, quantities, predicts) -> type:
    """The :class:`CurveModel` or :class:`LossModel` subclass of a checked curve or loss form."""
    attrs = {
        "name": name,
        "predicts": dict(predicts),
        "params": tuple(params),
        "param_bounds": dict(bounds or {}),
        "start": staticmethod(start) if callable(start) else start,
    }
    if curve is not None:
        return type(f"Registered_{name}", (CurveModel,), attrs | {"curve_fn": staticmethod(curve)})
    attrs["loss_fn"] = staticmethod(loss)
    attrs["quantities_fn"] = staticmethod(quantities) if quantities else None
    return type(f"Registered_{name}", (LossModel,), attrs)


def register_model(
    name: str | type[DynamicsModel] | None = None,
    *,
    params: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: Mapping[str, float] | Callable | Sequence[Mapping[str, float]] | None = None,
    curve: Callable | None = None,
    loss: Callable | None = None,
    quantities: Callable | None = None,
    predicts: Mapping[str, str] | None = None,
    description: str = "",
    replace: bool = False,
):
    """Registers a dynamics model under a name (see the module docstring for the three forms).

    Args:
        name: the registry name; or a :class:`DynamicsModel` subclass (with ``name`` set) to
            register as it is; None returns a class decorator.
        params: parameter names (curve and loss models).
        bounds: ``{param: (low, high)}`` (missing: unbounded). For a loss model, bounds on the
            start of each parameter.
        start: ``{param: value}``, a list of them (each is tried), or a callable
            ``start(steps, y, task)`` returning either, ``y`` being the target curve.
        curve: ``curve(steps, params, task) -> {quantity: array}``: a curve model.
        loss: ``loss(params, task) -> float``: a loss model (gradient flow in model time).
        quantities: loss models: ``quantities(params_over_time, task) -> {quantity: array}``
            (default: ``{"loss": ...}``).
        predicts: ``{network measure: model quantity}``, e.g. ``{"ic_loss": "loss"}``.
        description: one line for ``fit.json`` and listings.
        replace: allow replacing a model of the same name.

    Returns:
        The registered class (or a decorator, when ``name`` is None).
    """
    if name is None:
        return lambda cls: register_model(cls, replace=replace)
    if isinstance(name, type):
        if not issubclass(name, DynamicsModel) or not name.name:
            raise ValueError("a registered class must subclass DynamicsModel and set its name")
        cls = name
    else:
        _check_model_args(name, params, bounds, start, curve, loss, predicts)
        cls = _model_class(name, params, bounds, start, curve, loss, quantities, predicts)
        cls.description = description or f"{'curve' if curve else 'loss'} model {name}"
    _REGISTRY.declare(cls.name, cls, replace=replace)
    logger.debug("registered dynamics model %s", cls.name)
    return cls


def unregister_model(name: str) -> None:
    """Removes a model from the registry (tests and notebooks that re-register)."""
    _REGISTRY.withdraw(name)


def get_model(name: str) -> type[DynamicsModel]:
    """The registered model class of that name.

    Raises:
        ValueError: naming the unknown model and the registered ones.
    """
    return _REGISTRY.require(name)


def model_names() -> list[str]:
    """Names of the registered models, sorted."""
    return sorted(_REGISTRY)
