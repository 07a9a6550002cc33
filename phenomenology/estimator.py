"""The one estimator of the dynamics models (:class:`DynamicsFit`, scikit-learn style): a
least-squares fit of any registered model from its seeds, parameter uncertainties from the
Jacobian, the predicted transition step and its 80% interval from a moving-block bootstrap;
:class:`NestedLogitFit` is it with the nested-logit model."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from interp.io.errors import DidNotConverge
from phenomenology import landscape
from phenomenology.landscape import FlowDidNotConverge, LossFn
from phenomenology.models import DynamicsModel, get_model
from phenomenology.nested_logit import _DIFF_STEP, NestedLogitModel, _steps

__all__ = ["INTERVAL_LEVEL", "DynamicsFit", "FitDidNotConverge", "NestedLogitFit"]

logger = logging.getLogger(__name__)

INTERVAL_LEVEL = 0.8
# A fit in which this many trial integrations ran past their evaluation budget stops with "did
# not converge" (a fit of a curve with a cliff has none: see landscape.MAX_FLOW_EVALS).
MAX_STALLED_FLOWS = 3


class FitDidNotConverge(DidNotConverge):
    """The fit's gradient flows kept running past their budget of evaluations."""


# ---- the estimator -----------------------------------------------------------------------------


def _at_bound(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Which entries of ``x`` sit at a finite bound (within 1e-6 of the bound's scale)."""
    x, lower, upper = (np.asarray(a, dtype=float) for a in (x, lower, upper))
    out = np.zeros(x.shape, dtype=bool)
    for b in (lower, upper):
        finite = np.isfinite(b)
        tol = 1e-6 * np.maximum(1.0, np.abs(np.where(finite, b, 0.0)))
        out |= finite & (np.abs(x - np.where(finite, b, 0.0)) <= tol)
    return out


def _block_length(r: np.ndarray) -> int:
    """Moving-block length for residuals ``r``: the lag where their autocorrelation first falls
    below ``1/e``, at least ``n^(1/3)`` and at most ``n/3``."""
    n = r.size
    rc = r - r.mean()
    var = float(rc @ rc)
    lag = 1
    if var > 0:
        for k in range(1, n // 3):
            if float(rc[:-k] @ rc[k:]) / var < math.exp(-1):
                lag = k
                break
        else:
            lag = n // 3
    return int(max(1, min(max(lag, math.ceil(n ** (1 / 3))), max(1, n // 3))))


def _block_resample(r: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    n = r.size
    starts = rng.integers(0, n - block + 1, size=math.ceil(n / block))
    return np.concatenate([r[s : s + block] for s in starts])[:n]


class DynamicsFit(RegressorMixin, BaseEstimator):
    """Fits any registered dynamics model to curves versus training step.

    Args:
        model: a name from :func:`phenomenology.models.model_names` (default ``"nested-logit"``).
        task: task parameters handed to the model (``{"L": 32, "N": 8, "B": 2}``).
        target: the measure ``predict`` and ``score`` refer to (default: the model's first).
        aux: further measures fitted jointly; ``y`` must then be a DataFrame with those columns.
        options: model options (see the model's class).
        aux_weight: weight of each auxiliary curve relative to the target.
        n_starts: local fits run from the model's best seeds; the lowest cost is kept.
        max_nfev: cap on residual evaluations of the final ``least_squares`` run.
        n_boot: bootstrap replicates for the transition's 80% interval (0: no interval).
        random_state: seed of the bootstrap.

    Attributes:
        model_: the fitted model instance; params_, stderr_: fitted parameters and Jacobian
            standard errors (user units; None for a parameter at a bound); cov_: covariance of
            the internal vector ``theta`` (zero rows and columns for those at a bound).
        pinned_: ``{parameter: "lower" | "upper"}`` for the parameters that ended at one of the
            model's bounds: not estimated by the data, only limited by the bound.
        r2_: R^2 of the target on the data it was fitted to; fit_steps_: first and last step.
        transition_step_, transition_step_stderr_: predicted transition step (``inf`` when the
            fitted model has no transition within 100 times the fitted span) and its
            delta-method standard error.
        transition_interval_: ``(low, high)`` 80% interval (``high`` is ``inf`` when over 10% of
            the replicates have no transition); interval_method_: how it was computed.
        result_: the ``scipy.optimize.OptimizeResult``. Models add their own (the nested-logit
            model: ``time_scale_, start_, floor_, aux_maps_``).
    """

    def __init__(
        self,
        model: str = "nested-logit",
        *,
        task: Mapping[str, Any] | None = None,
        target: str | None = None,
        aux: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
        aux_weight: float = 1.0,
        n_starts: int = 3,
        max_nfev: int = 200,
        n_boot: int = 50,
        random_state: int = 0,
    ):
        self.model = model
        self.task = task
        self.target = target
        self.aux = aux
        self.options = options
        self.aux_weight = aux_weight
        self.n_starts = n_starts
        self.max_nfev = max_nfev
        self.n_boot = n_boot
        self.random_state = random_state

    # Subclasses with their own constructor (NestedLogitFit) override these two.
    def _model_name(self) -> str:
        return self.model

    def _build(self) -> DynamicsModel:
        cls = get_model(self.model)
        target = self.target if self.target is not None else next(iter(cls.predicts))
        try:
            return cls(
                task=dict(self.task or {}),
                target=target,
                aux=tuple(self.aux),
                **dict(self.options or {}),
            )
        except TypeError as err:  # an option the model does not take
            raise ValueError(f"model {self.model!r}: bad options: {err}") from None

    def _check_common(self) -> None:
        if not self.aux_weight > 0:
            raise ValueError(f"aux_weight must be > 0, got {self.aux_weight!r}")
        if int(self.n_boot) != self.n_boot or self.n_boot < 0:
            raise ValueError(f"n_boot must be an integer >= 0, got {self.n_boot!r}")

    def _ys(self, model: DynamicsModel, y, n: int) -> dict[str, np.ndarray]:
        if isinstance(y, pd.DataFrame):
            missing = [c for c in model.measures if c not in y.columns]
            if missing:
                raise ValueError(f"y is missing columns {missing}")
            ys = {c: y[c].to_numpy(dtype=float) for c in model.measures}
        else:
            if model.aux:
                raise ValueError("y must be a DataFrame with the target and aux columns when aux")
            ys = {model.target: np.asarray(y, dtype=float).reshape(-1)}
        for k, v in ys.items():
            if v.shape != (n,) or not np.all(np.isfinite(v)):
                raise ValueError(f"y[{k!r}] must be finite with one value per step")
        return ys

    def _residuals(self, theta, steps, ys, scales):
        try:
            traj = self.model_.trajectory(steps, theta)
            preds = self.model_.curves(traj, theta, ys)
        except FlowDidNotConverge:
            self._stalled += 1
            if self._stalled >= MAX_STALLED_FLOWS:
                raise FitDidNotConverge(
                    f"the {self._model_name()} fit did not converge: {self._stalled} of its "
                    f"gradient flows needed over {landscape.MAX_FLOW_EVALS} evaluations"
                ) from None
            return np.full(sum(len(v) for v in ys.values()), 1e3)
        except (RuntimeError, FloatingPointError, OverflowError):
            return np.full(sum(len(v) for v in ys.values()), 1e3)
        return np.concatenate([(preds[k] - y) / scales[k] for k, y in ys.items()])

    def fit(self, X, y) -> DynamicsFit:
        """Fits the model's parameters to the curves.

        Args:
            X: training steps, shape ``[n]`` or ``[n, 1]``, increasing.
            y: the target curve ``[n]``, or a DataFrame with the target and ``aux`` columns.

        Returns:
            self.

        Raises:
            FitDidNotConverge: the model's gradient flows kept exceeding their budget of
                evaluations (a curve the model cannot describe).
        """
        self._stalled = 0
        try:
            return self._fit(X, y)
        except FlowDidNotConverge as err:
            raise FitDidNotConverge(
                f"the {self._model_name()} fit did not converge: {err}"
            ) from None

    def _fit(self, X, y) -> DynamicsFit:
        self._check_common()
        model = self._build()
        self.model_ = model
        steps = _steps(X)
        ys = self._ys(model, y, steps.size)
        scales = {
            k: model.scale(k, v) / (1.0 if k == model.target else self.aux_weight)
            for k, v in ys.items()
        }
        lower, upper = model.bounds()

        def solve(theta0, max_nfev):
            theta0 = np.clip(theta0, lower + 1e-9, upper - 1e-9)
            return least_squares(
                self._residuals,
                theta0,
                args=(steps, ys, scales),
                bounds=(lower, upper),
                diff_step=_DIFF_STEP,
                max_nfev=max_nfev,
                x_scale="jac",
            )

        # A short local fit from each of the best seeds, then the best one to convergence.
        seeds = model.seeds(steps, ys, scales)[: self.n_starts]
        if not seeds:
            raise RuntimeError(f"model {model.name!r} gave no starting point")
        trials = [solve(theta0, 10 * len(theta0)) for theta0 in seeds] if len(seeds) > 1 else []
        best = min(trials, key=lambda r: r.cost) if trials else None
        res = solve(best.x if best else seeds[0], self.max_nfev)
        if best is not None and best.cost < res.cost:
            res = best
        self.result_ = res
        m, k = res.fun.size, res.x.size
        # A parameter at one of its bounds is not estimated: the data pushed it there, and the
        # Jacobian's curvature says nothing about its uncertainty. It gets no standard error and
        # the covariance of the others is that of the free parameters alone.
        pinned = _at_bound(res.x, lower, upper)
        free = ~pinned
        s2 = 2.0 * res.cost / max(m - int(free.sum()), 1)
        J = res.jac
        self.cov_ = np.zeros((k, k))
        self.cov_[np.ix_(free, free)] = np.linalg.pinv(J[:, free].T @ J[:, free]) * s2
        model.curves(model.trajectory(steps, res.x), res.x, ys)  # final closed-form maps
        self.params_, self.stderr_ = model.report(res.x, self.cov_)
        # The report lists the parameters in theta's order (time scale first, then the rest).
        names = list(self.params_)
        self.pinned_ = {}
        if len(names) == k:
            for i in np.nonzero(pinned)[0]:
                side = "lower" if abs(res.x[i] - lower[i]) <= abs(res.x[i] - upper[i]) else "upper"
                self.pinned_[names[i]] = side
                self.stderr_[names[i]] = None
        for name, value in model.fitted_attributes(res.x).items():
            setattr(self, name, value)
        self.n_features_in_ = 1
        self.fit_steps_ = (float(steps[0]), float(steps[-1]))
        self.r2_ = self.score(steps, ys[model.target])
        last = steps[-1]
        self.transition_step_ = model.transition(res.x, last)
        # Delta method: finite-difference gradient of the transition step in theta.
        g = np.zeros(k)
        for i in range(k):
            h = 1e-3 * max(1.0, abs(res.x[i]))
            tp, tm = res.x.copy(), res.x.copy()
            tp[i] += h
            tm[i] -= h
            g[i] = (model.transition(tp, last) - model.transition(tm, last)) / (2 * h)
        var = g @ self.cov_ @ g if np.all(np.isfinite(g)) else math.inf
        self.transition_step_stderr_ = float(math.sqrt(max(var, 0.0)))
        self._bootstrap(res, [v.size for v in ys.values()], lower, upper, last)
        return self

    def _bootstrap(self, res, sizes, lower, upper, last) -> None:
        """80% interval of the transition step: moving-block bootstrap of each curve's residuals,
        each replicate refitted by one Gauss-Newton step ``-J^+ r*`` from the fit."""
        self.interval_method_ = (
            f"moving-block bootstrap of residuals ({self.n_boot} replicates, one Gauss-Newton "
            "refit each), 10th-90th percentile"
        )
        self.transition_interval_ = (math.nan, math.nan)
        if self.n_boot == 0 or not math.isfinite(self.transition_step_):
            self.interval_method_ = "none (no bootstrap)" if self.n_boot == 0 else "none"
            return
        rng = np.random.default_rng(self.random_state)
        r = res.fun
        cuts = np.cumsum([0, *sizes])
        segments = [r[a:b] - r[a:b].mean() for a, b in zip(cuts[:-1], cuts[1:])]
        blocks = [_block_length(seg) for seg in segments]
        self.bootstrap_block_ = blocks[0]
        Jp = np.linalg.pinv(res.jac)
        out = np.empty(self.n_boot)
        for i in range(self.n_boot):
            rs = np.concatenate([_block_resample(s, b, rng) for s, b in zip(segments, blocks)])
            theta = np.clip(res.x - Jp @ rs, lower, upper)
            out[i] = self.model_.transition(theta, last)
        self.bootstrap_transitions_ = out
        finite = out[np.isfinite(out)]
        lo_q, hi_q = (1 - INTERVAL_LEVEL) / 2, 1 - (1 - INTERVAL_LEVEL) / 2
        if finite.size < (1 - lo_q) * out.size:
            # Over 10% of replicates never jump: the interval is open above.
            low = float(np.quantile(np.where(np.isfinite(out), out, np.inf), lo_q))
            self.transition_interval_ = (low, math.inf)
        else:
            self.transition_interval_ = (
                float(np.quantile(np.where(np.isfinite(out), out, np.inf), lo_q)),
                float(np.quantile(np.where(np.isfinite(out), out, np.inf), hi_q)),
            )

    def predict_curves(self, X) -> pd.DataFrame:
        """Fitted model at the given steps: its quantities and one column per fitted curve.

        Returns:
            DataFrame with ``step``, the model's trajectory columns (the nested-logit model:
            ``t, beta1, alpha, xi, s1, p, loss, acc, cla``) and one column per fitted measure
            (target and aux) in the run's units.
        """
        check_is_fitted(self, "result_")
        steps = np.asarray(X, dtype=float).reshape(-1)
        theta = self.result_.x
        traj = self.model_.trajectory(steps, theta)
        preds = self.model_.curves(traj, theta, None)
        if "step" not in traj.columns:
            traj.insert(0, "step", steps)
        for k, v in preds.items():
            traj[k] = v
        return traj

    def predict(self, X) -> np.ndarray:
        """Predicted target curve at steps ``X``."""
        check_is_fitted(self, "result_")
        return self.predict_curves(_steps(X))[self.model_.target].to_numpy()

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of the target curve; ``y`` is the curve or a DataFrame holding it."""
        check_is_fitted(self, "result_")
        target = self.model_.target
        yt = y[target].to_numpy(dtype=float) if isinstance(y, pd.DataFrame) else y
        yt = np.asarray(yt, dtype=float).reshape(-1)
        pred = self.predict(X)
        w = np.ones_like(yt) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        ss_res = np.sum(w * (yt - pred) ** 2)
        ss_tot = np.sum(w * (yt - np.average(yt, weights=w)) ** 2)
        return float(1.0 - ss_res / ss_tot)

    def summary(self) -> dict:
        """JSON-ready summary: model, R^2, transition step and interval, parameters, errors."""
        check_is_fitted(self, "result_")
        m = self.model_
        return _jsonable(
            {
                "model": m.name,
                "model_description": m.description,
                "r2": self.r2_,
                "transition_step": self.transition_step_,
                "transition_step_stderr": self.transition_step_stderr_,
                "transition_interval": list(self.transition_interval_),
                "interval_level": INTERVAL_LEVEL,
                "interval_method": self.interval_method_,
                "params": self.params_,
                "stderr": self.stderr_,
                "pinned": dict(getattr(self, "pinned_", {})),
                "fit_steps": list(self.fit_steps_),
                "task": dict(m.task),
                "target": m.target,
                "aux": list(m.aux),
                "cost": float(self.result_.cost),
                "nfev": int(self.result_.nfev),
                "success": bool(self.result_.success),
            }
            | m.summary()
        )


class NestedLogitFit(DynamicsFit):
    """:class:`DynamicsFit` of the nested-logit model, with its options as arguments.

    Fitted parameters: ``time_scale_`` (training steps per unit of model time), the start
    ``start_ = {"beta1": ..., "alpha": ..., "xi": ...}`` (those in ``fit_start``; the others stay
    at ``fixed_start``) and, for a loss target with ``free_floor``, ``floor_``.

    Args:
        L: labels; N: context pairs; B: burstiness of the evaluation set (``n = N / B``).
        target: ``"ic_loss"`` or ``"ic_acc"``, the curve ``predict`` and ``score`` refer to.
        aux: further curves fitted jointly, any of ``ic_loss, ic_acc, cla, ila1, tila2``; ``y``
            must then be a DataFrame with those columns.
        free_floor: fit a loss floor (see the module docstring); loss targets only.
        fit_start: which initial conditions are free. The default leaves ``alpha_0`` fixed (at 0,
            an untrained query-key match): from a loss curve alone ``alpha_0`` and ``beta1_0``
            trade off along a ridge of equally good fits (both set when ``u = alpha s1`` takes
            off), so only their combination is identified. Free all three when fitting ILA1 and
            TILA2 jointly.
        fixed_start: values of the initial conditions that are not free (default 0).
        aux_weight: weight of each auxiliary curve relative to the target.
        maps: overrides of :data:`DEFAULT_MAPS`, e.g. ``{"cla": "affine"}`` to compare the
            network's argmax CLA with the model's soft one through a boxed affine map.
        beta1_grid: ``beta1_0`` values tried to seed the fit (the plateau length depends on it
            exponentially, so local search alone is not enough).
        n_starts: local fits run from the best seeds (of different ``beta1_0``); the one with
            the lowest cost is kept.
        max_nfev: cap on residual evaluations of each ``least_squares`` run.
        loss_fn: optional user loss form (see :mod:`phenomenology.landscape`).
        n_boot, random_state: the bootstrap interval (see :class:`DynamicsFit`).

    Attributes:
        time_scale_, start_, floor_: fitted values (``floor_`` is 0 when not fitted).
        aux_maps_: ``{name: (a, b)}`` fitted affine maps (ILA1 and TILA2 by default).
        and those of :class:`DynamicsFit`.
    """

    def __init__(
        self,
        L: float = 32,
        N: int = 8,
        B: int = 2,
        *,
        target: str = "ic_loss",
        aux: Sequence[str] = (),
        free_floor: bool = True,
        fit_start: Sequence[str] = ("beta1", "xi"),
        fixed_start: Mapping[str, float] | None = None,
        aux_weight: float = 1.0,
        maps: Mapping[str, str] | None = None,
        beta1_grid: Sequence[float] = tuple(np.linspace(-14.0, -1.0, 14)),
        n_starts: int = 3,
        max_nfev: int = 200,
        loss_fn: LossFn | None = None,
        n_boot: int = 50,
        random_state: int = 0,
    ):
        self.L = L
        self.N = N
        self.B = B
        self.target = target
        self.aux = aux
        self.free_floor = free_floor
        self.fit_start = fit_start
        self.fixed_start = fixed_start
        self.aux_weight = aux_weight
        self.maps = maps
        self.beta1_grid = beta1_grid
        self.n_starts = n_starts
        self.max_nfev = max_nfev
        self.loss_fn = loss_fn
        self.n_boot = n_boot
        self.random_state = random_state

    def _model_name(self) -> str:
        return NestedLogitModel.name

    def _build(self) -> DynamicsModel:
        return NestedLogitModel(
            task={"L": self.L, "N": self.N, "B": self.B},
            target=self.target,
            aux=tuple(self.aux),
            free_floor=self.free_floor,
            fit_start=self.fit_start,
            fixed_start=self.fixed_start,
            maps=self.maps,
            beta1_grid=self.beta1_grid,
            loss_fn=self.loss_fn,
        )


def _jsonable(obj):
    """Plain JSON types: numpy scalars to Python, non-finite floats to None."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer, int)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
