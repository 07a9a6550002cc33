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

The nested-logit model: ``X`` is the training step, ``y`` the
run's IC loss (or IC accuracy), optionally together with ILA1, TILA2 and CLA. The model's gradient
flow [docs/science.md section 4, reconstruction; see :mod:`phenomenology.landscape`] is
evaluated at model time ``t = step / time_scale_`` from a fitted start ``(beta1_0, alpha_0,
xi_0)``; ``scipy.optimize.least_squares`` fits those parameters and their uncertainties come
from its Jacobian
(``cov = s^2 (J^T J)^+``, ``s^2 = SSR / (m - k)``; the delta method for derived quantities).

How the model's quantities are compared with the network's:

- ``ic_loss`` <-> ``loss``. The model's loss runs from ``log L`` to 0; the network's IC loss levels
  off at a floor. With ``free_floor=True`` (default) the prediction is
  ``floor + (1 - floor / log L) * loss``: the start stays at ``log L`` and the model's zero maps to
  a fitted ``floor_``, bounded to ``[0, log L]`` (a cross-entropy is never negative).
- ``ic_acc`` <-> ``acc`` (the probability the model gives the correct label), no free parameter.
- ``cla`` <-> the model's probability mass on context labels, no free parameter.
- ``ila1`` <-> ``s1`` and ``tila2`` <-> ``p``, each through an affine map ``a + b * q`` solved in
  closed form at every evaluation (variable projection), because the network's attention
  baselines (about one over the number of visible keys) are not the model's. The map is boxed
  (``0 <= b <= 1``, ``0 <= a <= 1 - b``) so that it maps attention shares to attention shares.

Each curve's residuals are divided by that curve's standard deviation (at least 5% of its range,
``log L`` for the loss and 1 for the others), so the curves weigh alike; ``aux_weight`` scales the
auxiliary ones.

CLA and accuracy are compared with the model's soft analogues (probability mass on the context
labels, probability of the correct label). The network's argmax-based CLA starts near ``n/L``
like the model's but climbs much sooner (0.94 on the fig3 runs while the IC loss is still 2.45,
where the model's soft CLA is far lower), and the minimal model's jumps to 1 at once: fitting
``cla`` with the identity map distorts fits to real runs, so leave it out there.

The predicted transition step is the step of the steepest drop (per unit of log-time) of the
fitted model's loss, found on the fitted trajectory even when it lies beyond the data, which is
what :func:`forecast_transition` uses.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from interp.analysis.measures import MeasureTable
from phenomenology.landscape import LossFn, check_task, detect_cliff, gradient_flow
from phenomenology.models import DynamicsModel, get_model, register_model

__all__ = [
    "AUX_QUANTITIES",
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

AUX_QUANTITIES = MeasureTable("fit_quantity", {"ic_loss": "loss", "ic_acc": "acc"})
"""Run-curve name -> nested-logit model quantity it is compared with."""

DEFAULT_MAPS = MeasureTable("fit_map", {"ic_acc": "identity"})
"""How each bounded curve is compared with its model quantity (see the module docstring)."""
# Box for the fitted start: wide enough for any plateau the data can show (beta1_0 = -40 puts the
# jump ~e^34 times later than beta1_0 = -6), narrow enough to stop a fit from running off to
# "no jump ever" or to a large negative readout that the first steps would have to undo.
_START_BOUNDS = {"beta1": (-40.0, 40.0), "alpha": (-20.0, 20.0), "xi": (-2.0, 40.0)}
_TARGETS = ("ic_loss", "ic_acc")
# Solver settings for fits: tight tolerances so finite-difference Jacobians with a 1e-4 relative
# step see the parameters, not the solver's adaptive-step noise.
_RTOL, _ATOL, _DIFF_STEP = 1e-9, 1e-11, 1e-4

MIN_POINTS = 8
"""Fewest evaluations a fit accepts (fewer is an error, not a fit)."""

PAPER_TASK = {"L": 32, "N": 8, "B": 2}
"""The paper's task (Fig. 1d / Fig. 3 evaluation sets), the default for a plain curve."""

INTERVAL_LEVEL = 0.8


def _steps(X) -> np.ndarray:
    x = np.asarray(X, dtype=float)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1 or x.size < 5:
        raise ValueError("X must be steps, shape [n] or [n, 1], with n >= 5")
    if np.any(x < 0) or np.any(np.diff(x) <= 0):
        raise ValueError("X (steps) must be >= 0 and strictly increasing")
    return x


def _bounded_affine(q: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``y ~ a + b q`` with the map keeping [0, 1] inside [0, 1]: ``0 <= b <= 1``,
    ``0 <= a <= 1 - b`` (an attention share maps to an attention share). Without the box a
    nearly flat ``q`` (the plateau) could be stretched to fit noise."""
    qc, yc = q - q.mean(), y - y.mean()
    var = float(qc @ qc)
    b = float(np.clip((qc @ yc) / var, 0.0, 1.0)) if var > 0 else 0.0
    a = float(np.clip(np.mean(y - b * q), 0.0, 1.0 - b))
    return a, b


def sharpened_cla(cla: np.ndarray, kappa: float, L: float, n: int) -> np.ndarray:
    """The model's soft CLA at temperature ``1 / kappa``: what an argmax over noisy logits sees.

    The argmax of logits ``z_i + s g_i`` (Gumbel noise ``g_i``) is distributed as the softmax of
    ``z / s`` (the Gumbel-max identity), so the network's argmax CLA is the model's probability
    mass on the context labels with its context-label bonus ``z`` multiplied by ``kappa = 1 / s``:
    odds ``n e^(kappa z) / (L - n)`` (docs/science.md section 4). ``kappa = 1`` is the identity.
    """
    c = np.clip(np.asarray(cla, dtype=float), 1e-12, 1 - 1e-12)
    base = n / (L - n) if L > n else 1.0
    log_odds = math.log(base) + kappa * (np.log(c / (1 - c)) - math.log(base))
    return 0.5 * (1.0 + np.tanh(0.5 * log_odds))


_KAPPAS = np.geomspace(1.0, 30.0, 120)


def _best_sharpening(cla: np.ndarray, y: np.ndarray, L: float, n: int) -> float:
    """Least-squares ``kappa`` in ``[1, 30]`` of :func:`sharpened_cla` (a grid, then a parabola)."""
    cost = np.array([np.sum((sharpened_cla(cla, k, L, n) - y) ** 2) for k in _KAPPAS])
    i = int(np.argmin(cost))
    if 0 < i < len(_KAPPAS) - 1:
        a, b, c = cost[i - 1 : i + 2]
        den = a - 2 * b + c
        if den > 0:
            shift = float(np.clip(0.5 * (a - c) / den, -0.5, 0.5))
            return float(_KAPPAS[i] * (_KAPPAS[1] / _KAPPAS[0]) ** shift)
    return float(_KAPPAS[i])


# ---- the nested-logit model --------------------------------------------------------------------


@register_model
class NestedLogitModel(DynamicsModel):
    """The nested-logit gradient flow [docs/science.md section 4, reconstruction] as a registered model.

    ``theta = [log time_scale, *start (those in fit_start), (floor)]``. Options (see
    :class:`NestedLogitFit` for each): ``free_floor``, ``fit_start``, ``fixed_start``, ``maps``,
    ``beta1_grid``, ``loss_fn``. Task: ``L, N, B``.
    """

    name = "nested-logit"
    description = "nested-logit gradient flow [docs/science.md section 4, reconstruction]"
    predicts = AUX_QUANTITIES

    def __init__(
        self,
        *,
        task: Mapping[str, Any],
        target: str = "ic_loss",
        aux: Sequence[str] = (),
        free_floor: bool = True,
        fit_start: Sequence[str] = ("beta1", "xi"),
        fixed_start: Mapping[str, float] | None = None,
        maps: Mapping[str, str] | None = None,
        beta1_grid: Sequence[float] = tuple(np.linspace(-14.0, -1.0, 14)),
        loss_fn: LossFn | None = None,
    ):
        missing = [k for k in ("L", "N", "B") if k not in task]
        if missing:
            raise ValueError(f"model nested-logit needs the task parameters {missing}")
        self.L, self.N, self.B = task["L"], task["N"], task["B"]
        check_task(self.L, self.N, self.B)
        if target not in _TARGETS:
            raise ValueError(f"target must be one of {_TARGETS}, got {target!r}")
        super().__init__(task={"L": self.L, "N": self.N, "B": self.B}, target=target, aux=aux)
        for s in fit_start:
            if s not in ("beta1", "alpha", "xi"):
                raise ValueError(f"fit_start entries must be beta1, alpha or xi, got {s!r}")
        for k, v in dict(maps or {}).items():
            if k not in DEFAULT_MAPS or v not in ("identity", "affine", "sharpened"):
                raise ValueError(
                    f"maps must map names among {sorted(DEFAULT_MAPS)} to 'identity', 'affine' "
                    f"or 'sharpened', got {k!r}: {v!r}"
                )
            if v == "sharpened" and k != "cla":
                raise ValueError(f"maps: 'sharpened' is the map of cla only, got {k!r}")
        self.free_floor = free_floor
        self.fit_start = tuple(fit_start)
        self.fixed_start = fixed_start
        self.maps = {**DEFAULT_MAPS, **dict(maps or {})}
        self.beta1_grid = beta1_grid
        self.loss_fn = loss_fn
        self.aux_maps: dict[str, tuple[float, float]] = {}

    @property
    def _uses_floor(self) -> bool:
        return bool(self.free_floor) and self.target == "ic_loss"

    def param_names(self) -> tuple[str, ...]:
        return ("log_time_scale", *(f"{s}_0" for s in self.fit_start)) + (
            ("floor",) if self._uses_floor else ()
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lower = [-np.inf] + [_START_BOUNDS[s][0] for s in self.fit_start]
        upper = [np.inf] + [_START_BOUNDS[s][1] for s in self.fit_start]
        if self._uses_floor:
            # A cross-entropy floor: between 0 and the chance level log L.
            lower.append(0.0)
            upper.append(math.log(self.L))
        return np.array(lower), np.array(upper)

    def scale(self, measure: str, y: np.ndarray) -> float:
        # Floors on the scales: a curve that hardly moves (CLA pinned at 1, ILA1 flat before the
        # jump) must not get an enormous weight from its tiny standard deviation.
        return max(float(np.std(y)), 0.05 * (math.log(self.L) if measure == "ic_loss" else 1.0))

    def _unpack(self, theta: np.ndarray) -> tuple[float, dict[str, float], float]:
        start = {"beta1": 0.0, "alpha": 0.0, "xi": 0.0} | dict(self.fixed_start or {})
        for i, name in enumerate(self.fit_start):
            start[name] = float(theta[1 + i])
        floor = float(theta[-1]) if self._uses_floor else 0.0
        return math.exp(theta[0]), start, floor

    def trajectory(self, steps: np.ndarray, theta: np.ndarray) -> pd.DataFrame:
        ts, start, _ = self._unpack(theta)
        return gradient_flow(
            start,
            L=self.L,
            N=self.N,
            B=self.B,
            t_eval=np.asarray(steps, dtype=float) / ts,
            rtol=_RTOL,
            atol=_ATOL,
            loss_fn=self.loss_fn,
        )

    def _map(self, name: str, q: np.ndarray, floor: float) -> np.ndarray:
        if name == "ic_loss" and self._uses_floor:
            return floor + (1.0 - floor / math.log(self.L)) * q
        return q

    def curves(self, traj, theta, ys):
        """Model predictions per curve; affine maps fitted to ``ys`` when given, else stored."""
        _, _, floor = self._unpack(theta)
        out = {}
        for name in self.measures:
            q = self._map(name, np.asarray(traj[AUX_QUANTITIES[name]], dtype=float), floor)
            if name == "cla" and self.maps[name] == "sharpened":
                if ys is not None:
                    self.aux_maps[name] = (
                        _best_sharpening(q, ys[name], self.L, self.N // self.B),
                        0.0,
                    )
                q = sharpened_cla(q, self.aux_maps[name][0], self.L, self.N // self.B)
            elif name != "ic_loss" and self.maps[name] == "affine":
                if ys is not None:
                    a, b = _bounded_affine(q, ys[name])
                    self.aux_maps[name] = (float(a), float(b))
                else:
                    a, b = self.aux_maps[name]
                q = a + b * q
            out[name] = q
        return out

    def seeds(self, steps, ys, scales) -> list[np.ndarray]:
        """Grid over ``beta1_0`` and the time scale, using one dense trajectory per ``beta1_0``.

        Returns the best seed of each ``(beta1_0, xi_0)``, best first.
        """
        seeds = []
        span = steps[-1]
        # Where the data's own cliff is (if it has one): seeds that put the model's cliff there.
        y = ys[self.target] if self.target == "ic_loss" else 1.0 - ys[self.target]
        y = pd.Series(y).rolling(5, center=True, min_periods=1).median().to_numpy()
        data_cliff = detect_cliff(np.maximum(steps, 1e-9), y).transition
        floor0 = max(float(np.min(ys[self.target])), 0.0) if self._uses_floor else 0.0
        b1_grid = self.beta1_grid if "beta1" in self.fit_start else self.beta1_grid[:1]
        # xi_0 < 0 starts the loss above log L, as a network's random readout often does.
        xi_grid = (0.0, -1.0) if "xi" in self.fit_start else (None,)
        for b1, xi0 in itertools.product(b1_grid, xi_grid):
            start = {"beta1": 0.0, "alpha": 0.0, "xi": 0.0} | dict(self.fixed_start or {})
            if "beta1" in self.fit_start:
                start["beta1"] = float(b1)
            if xi0 is not None:
                start["xi"] = xi0
            # Model time of the cliff, to size the grid of time scales.
            t_grid = np.geomspace(1e-3, 1e6, 4000)
            try:
                traj = gradient_flow(
                    start, L=self.L, N=self.N, B=self.B, t_eval=np.r_[0.0, t_grid],
                    loss_fn=self.loss_fn,
                )  # fmt: skip
            except RuntimeError:
                continue
            best, best_cost = None, np.inf
            t_cliff = detect_cliff(t_grid, traj["loss"].to_numpy()[1:]).transition
            # Plain arrays: the grid below reads them thousands of times.
            tt = traj["t"].to_numpy()
            cols = {c: traj[c].to_numpy() for c in ("loss", "acc", "cla", "s1", "p")}
            log_grid = np.log(span / t_cliff) + np.linspace(-4.0, 4.0, 81)
            for log_ts in np.r_[math.log(data_cliff / t_cliff), log_grid]:
                theta = [log_ts] + [start[s] for s in self.fit_start]
                theta = np.array(theta + ([floor0] if self._uses_floor else []))
                t = steps / math.exp(log_ts)
                sub = {c: np.interp(t, tt, cols[c]) for c in cols}
                preds = self.curves(sub, theta, ys)
                cost = sum(np.sum(((preds[k] - y) / scales[k]) ** 2) for k, y in ys.items())
                if cost < best_cost:
                    best, best_cost = theta, cost
            seeds.append((best_cost, best))
        if not seeds:
            raise RuntimeError("nested-logit: no seed trajectory could be integrated")
        return [theta for _, theta in sorted(seeds, key=lambda pair: pair[0])]

    def transition(self, theta: np.ndarray, last_step: float) -> float:
        """Step of the fitted model's steepest log-time loss drop, searched well past the data."""
        ts, start, _ = self._unpack(theta)
        t_hi = 100.0 * last_step / ts
        t_grid = np.geomspace(t_hi * 1e-6, t_hi, 4000)
        traj = gradient_flow(
            start, L=self.L, N=self.N, B=self.B, t_eval=np.r_[0.0, t_grid], loss_fn=self.loss_fn
        )
        loss = traj["loss"].to_numpy()[1:]
        # No cliff within 100 data spans: the loss never gets well below the plateau at log n.
        if np.min(loss) > 0.5 * math.log(self.N // self.B):
            return math.inf
        # detect_cliff's transition (the largest -t dl/dt on the grid), refined between grid
        # points by a parabola in log t: grid points lie 0.35% apart, and the delta method and
        # the bootstrap need steps that move continuously with the parameters.
        slope = -np.gradient(loss, t_grid) * t_grid
        i = int(np.argmax(slope[1:])) + 1
        if i >= len(t_grid) - 1:
            return float(t_grid[i] * ts)
        a, b, c = slope[i - 1], slope[i], slope[i + 1]
        denom = a - 2 * b + c
        shift = 0.5 * (a - c) / denom if denom < 0 else 0.0
        log_step = math.log(t_grid[1] / t_grid[0])
        return float(t_grid[i] * math.exp(np.clip(shift, -0.5, 0.5) * log_step) * ts)

    def report(self, theta, cov) -> tuple[dict, dict]:
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        ts, start, floor = self._unpack(theta)
        params = {"time_scale": ts} | {f"{s}_0": start[s] for s in self.fit_start}
        stderr = {"time_scale": ts * float(se[0])} | {
            f"{s}_0": float(se[1 + i]) for i, s in enumerate(self.fit_start)
        }
        if self._uses_floor:
            params["floor"] = floor
            stderr["floor"] = float(se[-1])
        return params, stderr

    def fitted_attributes(self, theta) -> dict[str, Any]:
        ts, start, floor = self._unpack(theta)
        return {
            "time_scale_": ts,
            "start_": start,
            "floor_": floor,
            "aux_maps_": {k: v for k, v in self.aux_maps.items() if k in self.measures},
        }

    def summary(self) -> dict[str, Any]:
        return {
            "aux_maps": {k: list(v) for k, v in self.aux_maps.items() if k in self.measures},
            "task": {"L": self.L, "N": self.N, "B": self.B},
            "free_floor": self._uses_floor,
        }


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
            return cls(task=dict(self.task or {}), target=target, aux=tuple(self.aux),
                       **dict(self.options or {}))  # fmt: skip
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
        """
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
        return _jsonable({
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
        } | m.summary())  # fmt: skip


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


# ---- curves, run directories and forecasts ----------------------------------------------------


def read_run(run_dir) -> tuple[pd.DataFrame, dict]:
    """Metrics and task of a run directory (opened with :func:`interp.train.training.load_run`)
    or of a :class:`~interp.train.training.Run` already open.

    Returns:
        ``(metrics, {"L": ..., "N": ..., "B": ...})`` where ``B`` is the evaluation burstiness
        (``TaskConfig.B_eval_effective``).
    """
    from interp.train.training import Run, load_run

    run = run_dir if isinstance(run_dir, Run) else load_run(run_dir)
    t = run.task
    return run.metrics, {"L": t.L, "N": t.N, "B": int(t.B_eval_effective)}


def _clean(metrics: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in ("step", *columns) if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics is missing columns {missing}")
    df = metrics[["step", *columns]].dropna().sort_values("step")
    return df.drop_duplicates("step").reset_index(drop=True)


def observed_transition(
    metrics: pd.DataFrame, *, column: str = "ic_loss", method: str | None = None
) -> dict[str, Any]:
    """The transition seen on a run's curve, by :func:`interp.analysis.transition.find_transition` (method
    from the column's direction unless given: ``cliff`` on a loss, ``logistic`` otherwise).

    Returns:
        dict with ``transitioned``, ``transition_step`` (None when there is none),
        ``onset_step`` (end of the plateau), ``end_step``, ``plateau_start_step``, ``method``
        and ``reason``.
    """
    from interp.analysis.transition import find_transition, measure_direction

    df = _clean(metrics, [column])
    r = find_transition(
        df["step"].to_numpy(dtype=float),
        df[column].to_numpy(dtype=float),
        method=method,
        direction=measure_direction(column),
    )
    end = None if r.plateau_end is None or r.width is None else r.plateau_end + r.width
    if r.method == "logistic" and r.step is not None and r.width is not None:
        end = r.step + r.width / 2
    return {
        "transitioned": bool(r.transitioned),
        "transition_step": r.step if r.transitioned else None,
        "onset_step": r.plateau_end,
        "end_step": end,
        "plateau_start_step": r.plateau_start,
        "method": r.method,
        "reason": r.reason,
    }


def plateau_problem(steps, values, *, direction: str, window: float = 0.1, tol: float = 0.05):
    """Why a curve shows no plateau (None when it has one).

    A plateau is a stretch of at least ``window`` of the recorded steps over which the (rolling-
    median smoothed) curve moves by at most ``tol`` of its whole range or by four times its
    noise, whichever is larger (the noise: the robust spread of successive differences, so a
    steady trend does not count as noise). A curve that keeps rising or falling at a steady pace
    has none, and no plateau means nothing to forecast a jump from.
    """
    steps = np.asarray(steps, float)
    raw = np.asarray(values, float)
    y = pd.Series(raw).rolling(5, center=True, min_periods=1).median().to_numpy()
    span, rng = steps[-1] - steps[0], float(np.ptp(y))
    if rng == 0:
        return None
    d = np.diff(raw)
    noise = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    allowed = max(tol * rng, 4 * noise)
    for i in range(len(steps)):
        # The shortest stretch ending at point i that covers `window` of the steps.
        j = int(np.searchsorted(steps, steps[i] - window * span, side="right")) - 1
        if j >= 0 and np.ptp(y[j : i + 1]) <= allowed:
            return None
    return (
        f"no plateau: the {direction} curve moves by more than {tol:.0%} of its range (and more "
        f"than its noise) over every stretch of {window:.0%} of the steps"
    )


FORECAST_METHODS = ("auto", "template", "progress")


def check_forecast_method(curve: pd.DataFrame, *, method: str, progress_column: str,
                          optimizer: str | None, source: str = "curve") -> None:  # fmt: skip
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
):
    """The calibrated forecast of a curve's IC-loss plateau (``column``) seen up to step
    ``until``: the progress forecast (:mod:`phenomenology.progress`) of ``progress_column`` where
    ``method`` allows it and it can forecast, else the template forecast
    (:mod:`phenomenology.forecast`). What ``fit`` reports and the report page shows.

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
) -> dict:
    """Fits a registered model to a curve table and forecasts its transition.

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

    Returns:
        JSON-ready dict: :meth:`DynamicsFit.summary` plus ``column``, ``options``,
        ``fitted_until`` (the last step fitted), ``until_step`` (the cut-off asked for, from
        ``until`` or ``fraction``; None for the whole curve), ``n_points_fitted``, ``r2_all``, ``observed``,
        ``forecast_transition_step``, ``forecast_interval`` ``[low, high]`` and ``forecast``
        (``"ok"`` or ``"cannot forecast: ..."``), and ``forecast_error`` where both are known.

    Raises:
        ValueError: one line naming the field (and ``source``) for every bad input.
    """
    from interp.analysis.transition import measure_direction

    check_curve(curve, task=task, model=model, column=column, target=target, aux=aux,
                options=options, source=source)  # fmt: skip
    if until is not None and fraction is not None:
        raise ValueError("give --until or --fraction, not both")
    check_forecast_method(curve, method=method, progress_column=progress_column,
                          optimizer=optimizer, source=source)  # fmt: skip
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"--fraction must be in (0, 1], got {fraction!r}")
    target = target or column
    df = _clean(curve, [column, *aux]).rename(columns={column: target})
    observed = observed_transition(df, column=target)
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
    kwargs = {"n_boot": n_boot, "random_state": random_state} | dict(estimator_options or {})
    est = DynamicsFit(model, task=dict(task), target=target, aux=tuple(aux), options=options,
                      **kwargs)  # fmt: skip
    est.fit(part["step"].to_numpy(dtype=float), part[[target, *aux]])
    out = est.summary()
    steps = part["step"].to_numpy(dtype=float)
    problem = plateau_problem(
        steps, part[target].to_numpy(dtype=float), direction=measure_direction(target)
    )
    if problem is None and not math.isfinite(est.transition_step_):
        problem = "the fitted model has no transition within 100 times the fitted span"
    out["column"] = column
    out["options"] = dict(options or {})
    out["fitted_until"] = float(steps[-1])
    out["until_step"] = None if cutoff is None else float(cutoff)
    out["n_points_fitted"] = int(len(part))
    out["r2_all"] = est.score(df["step"].to_numpy(dtype=float), df[target].to_numpy(dtype=float))
    out["observed"] = observed
    calibrated = None
    if problem is None and model == NestedLogitModel.name and target == "ic_loss":
        calibrated = calibrated_forecast(curve, until=float(steps[-1]), task=task, column=column,
                                         optimizer=optimizer, method=method,
                                         progress_column=progress_column)  # fmt: skip
    progress_why = None if calibrated is None else calibrated.detail.get("progress_why")
    calibrated_ok = calibrated is not None and calibrated.ok
    if not calibrated_ok and method == "progress" and calibrated is not None:
        problem = calibrated.reason.removeprefix("cannot forecast: ")  # asked for, it cannot
    if calibrated_ok:
        out["forecast"] = "ok"
        out["forecast_transition_step"] = calibrated.step
        out["forecast_interval"] = [calibrated.low, calibrated.high]
        out["forecast_from"] = calibrated.detail.get("method", "template")
        if out["forecast_from"] == "progress":
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
    actual = observed["transition_step"]
    if problem is None and actual is not None:
        out["forecast_error"] = out["forecast_transition_step"] - actual
        out["forecast_relative_error"] = out["forecast_error"] / actual
    out["source"] = source
    return _jsonable(out)


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
        run_dir: a run directory, opened with :func:`interp.train.training.load_run`.
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
    from interp.io.checkpoints import write_json_atomic
    from interp.train.training import Run, load_run

    run = run_dir if isinstance(run_dir, Run) else load_run(run_dir)
    metrics, task = read_run(run)
    options, est = _split(estimator_kwargs)
    out = fit_curve(metrics, task=task, model=model, column=target, aux=aux, until=until_step,
                    fraction=fraction, options=options, estimator_options=est,
                    source=str(Path(run.path) / "metrics.csv"),
                    optimizer=run.train_config.optimizer, method=method)  # fmt: skip
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
    out = fit_curve(metrics, task=task, column=target, aux=aux, fraction=fraction_of_plateau,
                    options={"free_floor": free_floor, **options}, estimator_options=est)  # fmt: skip
    actual = out["observed"]["transition_step"]
    forecast = out["transition_step"]
    error = None if forecast is None or actual is None else forecast - actual
    return _jsonable({
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
    })  # fmt: skip
