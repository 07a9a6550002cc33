"""Fitting the nested-logit model to a training run's curves.

:class:`NestedLogitFit` is a scikit-learn-style estimator. ``X`` is the training step, ``y`` the
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
  a fitted ``floor_``.
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
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from phenomenology.landscape import LossFn, check_task, detect_cliff, gradient_flow

__all__ = [
    "AUX_QUANTITIES",
    "DEFAULT_MAPS",
    "NestedLogitFit",
    "detect_run_transition",
    "fit_run",
    "forecast_transition",
    "read_run",
]

AUX_QUANTITIES = {"ic_loss": "loss", "ic_acc": "acc", "cla": "cla", "ila1": "s1", "tila2": "p"}
"""Run-curve name -> model quantity it is compared with."""

DEFAULT_MAPS = {"ila1": "affine", "tila2": "affine", "cla": "identity", "ic_acc": "identity"}
"""How each bounded curve is compared with its model quantity (see the module docstring)."""
# Box for the fitted start: wide enough for any plateau the data can show (beta1_0 = -40 puts the
# jump ~e^34 times later than beta1_0 = -6), narrow enough to stop a fit from running off to
# "no jump ever" or to a large negative readout that the first steps would have to undo.
_START_BOUNDS = {"beta1": (-40.0, 40.0), "alpha": (-20.0, 20.0), "xi": (-2.0, 40.0)}
_TARGETS = ("ic_loss", "ic_acc")
# Solver settings for fits: tight tolerances so finite-difference Jacobians with a 1e-4 relative
# step see the parameters, not the solver's adaptive-step noise.
_RTOL, _ATOL, _DIFF_STEP = 1e-9, 1e-11, 1e-4


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


class NestedLogitFit(RegressorMixin, BaseEstimator):
    """Fits the nested-logit model's gradient flow to a run's curves versus training step.

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

    Attributes:
        time_scale_, start_, floor_: fitted values (``floor_`` is 0 when not fitted).
        params_: dict of all fitted parameters; stderr_: their standard errors.
        cov_: covariance of the internal parameter vector ``[log time_scale, *start, (floor)]``.
        aux_maps_: ``{name: (a, b)}`` fitted affine maps (ILA1 and TILA2 by default).
        transition_step_, transition_step_stderr_: predicted transition step (``inf`` when the
            fitted model has no cliff within 100 times the fitted span of steps).
        r2_: R^2 of the target on the data it was fitted to.
        result_: the ``scipy.optimize.OptimizeResult``.
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

    # ---- validation and the forward model ---------------------------------------------------

    def _validate(self) -> None:
        check_task(self.L, self.N, self.B)
        if self.target not in _TARGETS:
            raise ValueError(f"target must be one of {_TARGETS}, got {self.target!r}")
        for a in self.aux:
            if a not in AUX_QUANTITIES or a == self.target:
                allowed = sorted(set(AUX_QUANTITIES) - {self.target})
                raise ValueError(f"aux entries must be among {allowed}, got {a!r}")
        for s in self.fit_start:
            if s not in ("beta1", "alpha", "xi"):
                raise ValueError(f"fit_start entries must be beta1, alpha or xi, got {s!r}")
        for k, v in dict(self.maps or {}).items():
            if k not in DEFAULT_MAPS or v not in ("identity", "affine"):
                raise ValueError(
                    f"maps must map names among {sorted(DEFAULT_MAPS)} to 'identity' or "
                    f"'affine', got {k!r}: {v!r}"
                )
        if not self.aux_weight > 0:
            raise ValueError(f"aux_weight must be > 0, got {self.aux_weight!r}")

    @property
    def _maps(self) -> dict[str, str]:
        return DEFAULT_MAPS | dict(self.maps or {})

    @property
    def _uses_floor(self) -> bool:
        return bool(self.free_floor) and self.target == "ic_loss"

    def _unpack(self, theta: np.ndarray) -> tuple[float, dict[str, float], float]:
        start = {"beta1": 0.0, "alpha": 0.0, "xi": 0.0} | dict(self.fixed_start or {})
        for i, name in enumerate(self.fit_start):
            start[name] = float(theta[1 + i])
        floor = float(theta[-1]) if self._uses_floor else 0.0
        return math.exp(theta[0]), start, floor

    def _trajectory(self, steps: np.ndarray, theta: np.ndarray) -> pd.DataFrame:
        ts, start, _ = self._unpack(theta)
        return gradient_flow(
            start,
            L=self.L,
            N=self.N,
            B=self.B,
            t_eval=steps / ts,
            rtol=_RTOL,
            atol=_ATOL,
            loss_fn=self.loss_fn,
        )

    def _map(self, name: str, q: np.ndarray, floor: float) -> np.ndarray:
        if name == "ic_loss" and self._uses_floor:
            return floor + (1.0 - floor / math.log(self.L)) * q
        return q

    def _curves(self, traj: pd.DataFrame, theta: np.ndarray, ys: Mapping[str, np.ndarray] | None):
        """Model predictions per curve; affine maps fitted to ``ys`` when given, else stored."""
        _, _, floor = self._unpack(theta)
        out, maps = {}, {}
        for name in (self.target, *self.aux):
            q = self._map(name, traj[AUX_QUANTITIES[name]].to_numpy(), floor)
            if name != "ic_loss" and self._maps[name] == "affine":
                if ys is not None:
                    a, b = _bounded_affine(q, ys[name])
                else:
                    a, b = self.aux_maps_[name]
                maps[name] = (float(a), float(b))
                q = a + b * q
            out[name] = q
        return out, maps

    def _residuals(self, theta, steps, ys, scales):
        try:
            traj = self._trajectory(steps, theta)
        except RuntimeError:
            return np.full(sum(len(v) for v in ys.values()), 1e3)
        preds, _ = self._curves(traj, theta, ys)
        res = []
        for name, y in ys.items():
            w = 1.0 if name == self.target else self.aux_weight
            res.append(w * (preds[name] - y) / scales[name])
        return np.concatenate(res)

    # ---- seeding ---------------------------------------------------------------------------

    def _seeds(self, steps, ys, scales) -> list[np.ndarray]:
        """Grid over ``beta1_0`` and the time scale, using one dense trajectory per ``beta1_0``.

        Returns the best seed of each ``(beta1_0, xi_0)``, best first.
        """
        seeds = []
        span = steps[-1]
        # Where the data's own cliff is (if it has one): seeds that put the model's cliff there.
        y = ys[self.target] if self.target == "ic_loss" else 1.0 - ys[self.target]
        y = pd.Series(y).rolling(5, center=True, min_periods=1).median().to_numpy()
        data_cliff = detect_cliff(np.maximum(steps, 1e-9), y).transition
        floor0 = float(np.min(ys[self.target])) if self._uses_floor else 0.0
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
            log_grid = np.log(span / t_cliff) + np.linspace(-4.0, 4.0, 81)
            for log_ts in np.r_[math.log(data_cliff / t_cliff), log_grid]:
                theta = [log_ts] + [start[s] for s in self.fit_start]
                theta = np.array(theta + ([floor0] if self._uses_floor else []))
                t = steps / math.exp(log_ts)
                sub = pd.DataFrame(
                    {c: np.interp(t, traj["t"], traj[c]) for c in ("loss", "acc", "cla", "s1", "p")}
                )
                preds, _ = self._curves(sub, theta, ys)
                cost = sum(
                    np.sum(((preds[k] - y) / scales[k]) ** 2)
                    * (1.0 if k == self.target else self.aux_weight**2)
                    for k, y in ys.items()
                )
                if cost < best_cost:
                    best, best_cost = theta, cost
            seeds.append((best_cost, best))
        if not seeds:
            raise RuntimeError("NestedLogitFit: no seed trajectory could be integrated")
        return [theta for _, theta in sorted(seeds, key=lambda pair: pair[0])]

    # ---- the estimator API -----------------------------------------------------------------

    def _ys(self, y, n: int) -> dict[str, np.ndarray]:
        if isinstance(y, pd.DataFrame):
            missing = [c for c in (self.target, *self.aux) if c not in y.columns]
            if missing:
                raise ValueError(f"y is missing columns {missing}")
            ys = {c: y[c].to_numpy(dtype=float) for c in (self.target, *self.aux)}
        else:
            if self.aux:
                raise ValueError("y must be a DataFrame with the target and aux columns when aux")
            ys = {self.target: np.asarray(y, dtype=float).reshape(-1)}
        for k, v in ys.items():
            if v.shape != (n,) or not np.all(np.isfinite(v)):
                raise ValueError(f"y[{k!r}] must be finite with one value per step")
        return ys

    def fit(self, X, y) -> NestedLogitFit:
        """Fits time scale, start (and floor) to the curves.

        Args:
            X: training steps, shape ``[n]`` or ``[n, 1]``, increasing.
            y: the target curve ``[n]``, or a DataFrame with the target and ``aux`` columns.

        Returns:
            self.
        """
        self._validate()
        steps = _steps(X)
        ys = self._ys(y, steps.size)
        # Floors on the scales: a curve that hardly moves (CLA pinned at 1, ILA1 flat before the
        # jump) must not get an enormous weight from its tiny standard deviation.
        scales = {
            k: max(float(np.std(v)), 0.05 * (math.log(self.L) if k == "ic_loss" else 1.0))
            for k, v in ys.items()
        }
        lower = [-np.inf] + [_START_BOUNDS[s][0] for s in self.fit_start]
        upper = [np.inf] + [_START_BOUNDS[s][1] for s in self.fit_start]
        if self._uses_floor:
            lower.append(-math.log(self.L))
            upper.append(math.log(self.L))

        def solve(theta0, max_nfev):
            theta0 = np.clip(theta0, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
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
        seeds = self._seeds(steps, ys, scales)[: self.n_starts]
        trials = [solve(theta0, 10 * len(theta0)) for theta0 in seeds] if len(seeds) > 1 else []
        best = min(trials, key=lambda r: r.cost) if trials else None
        res = solve(best.x if best else seeds[0], self.max_nfev)
        if best is not None and best.cost < res.cost:
            res = best
        self.result_ = res
        m, k = res.fun.size, res.x.size
        s2 = 2.0 * res.cost / max(m - k, 1)
        J = res.jac
        self.cov_ = np.linalg.pinv(J.T @ J) * s2
        se = np.sqrt(np.clip(np.diag(self.cov_), 0.0, None))
        self.time_scale_, self.start_, self.floor_ = self._unpack(res.x)
        self.params_ = {"time_scale": self.time_scale_} | {
            f"{s}_0": self.start_[s] for s in self.fit_start
        }
        self.stderr_ = {"time_scale": self.time_scale_ * se[0]} | {
            f"{s}_0": float(se[1 + i]) for i, s in enumerate(self.fit_start)
        }
        if self._uses_floor:
            self.params_["floor"] = self.floor_
            self.stderr_["floor"] = float(se[-1])
        _, self.aux_maps_ = self._curves(self._trajectory(steps, res.x), res.x, ys)
        self.n_features_in_ = 1
        self.fit_steps_ = (float(steps[0]), float(steps[-1]))
        self.r2_ = self.score(steps, ys[self.target])
        self.transition_step_ = self._transition(res.x, steps[-1])
        # Delta method: finite-difference gradient of the transition step in theta.
        g = np.zeros(k)
        for i in range(k):
            h = 1e-3 * max(1.0, abs(res.x[i]))
            tp, tm = res.x.copy(), res.x.copy()
            tp[i] += h
            tm[i] -= h
            g[i] = (self._transition(tp, steps[-1]) - self._transition(tm, steps[-1])) / (2 * h)
        var = g @ self.cov_ @ g if np.all(np.isfinite(g)) else math.inf
        self.transition_step_stderr_ = float(math.sqrt(max(var, 0.0)))
        return self

    def _transition(self, theta: np.ndarray, last_step: float) -> float:
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
        return detect_cliff(t_grid, loss).transition * ts

    def predict_curves(self, X) -> pd.DataFrame:
        """Fitted model at the given steps: parameters, model quantities and mapped curves.

        Returns:
            DataFrame with ``step, t, beta1, alpha, xi, s1, p, loss, acc, cla`` and one column per
            fitted curve (target and aux) in the run's units.
        """
        check_is_fitted(self, "result_")
        steps = np.asarray(X, dtype=float).reshape(-1)
        theta = self.result_.x
        traj = self._trajectory(steps, theta)
        preds, _ = self._curves(traj, theta, None)
        traj.insert(0, "step", steps)
        for k, v in preds.items():
            traj[k] = v
        return traj

    def predict(self, X) -> np.ndarray:
        """Predicted target curve (IC loss or IC accuracy) at steps ``X``."""
        return self.predict_curves(_steps(X))[self.target].to_numpy()

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of the target curve; ``y`` is the curve or a DataFrame holding it."""
        yt = y[self.target].to_numpy(dtype=float) if isinstance(y, pd.DataFrame) else y
        yt = np.asarray(yt, dtype=float).reshape(-1)
        pred = self.predict(X)
        w = np.ones_like(yt) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        ss_res = np.sum(w * (yt - pred) ** 2)
        ss_tot = np.sum(w * (yt - np.average(yt, weights=w)) ** 2)
        return float(1.0 - ss_res / ss_tot)

    def summary(self) -> dict:
        """JSON-ready summary: R^2, transition step, parameters and their standard errors."""
        return _jsonable({
            "r2": self.r2_,
            "transition_step": self.transition_step_,
            "transition_step_stderr": self.transition_step_stderr_,
            "params": self.params_,
            "stderr": self.stderr_,
            "aux_maps": {k: list(v) for k, v in self.aux_maps_.items()},
            "fit_steps": list(self.fit_steps_),
            "task": {"L": self.L, "N": self.N, "B": self.B},
            "target": self.target,
            "aux": list(self.aux),
            "free_floor": self._uses_floor,
            "cost": float(self.result_.cost),
            "nfev": int(self.result_.nfev),
            "success": bool(self.result_.success),
            "model": "nested-logit gradient flow [docs/science.md section 4, reconstruction]",
        })  # fmt: skip


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


# ---- run directories --------------------------------------------------------------------------


def read_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict]:
    """Reads ``metrics.csv`` and the task part of ``config.json`` of a run directory.

    Returns:
        ``(metrics, {"L": ..., "N": ..., "B": ...})`` where ``B`` is the evaluation burstiness
        (``task.B_eval``, or ``task.B`` when that is null or absent; 1 when ``B`` is 0).
    """
    run_dir = Path(run_dir)
    metrics = pd.read_csv(run_dir / "metrics.csv")
    task = json.loads((run_dir / "config.json").read_text())["task"]
    B = task.get("B_eval")
    if B is None:
        B = task.get("B", 2) or 1
    return metrics, {"L": task.get("L", 32), "N": task.get("N", 8), "B": int(B)}


def _clean(metrics: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in ("step", *columns) if c not in metrics.columns]
    if missing:
        raise ValueError(f"metrics is missing columns {missing}")
    df = metrics[["step", *columns]].dropna().sort_values("step")
    return df.drop_duplicates("step").reset_index(drop=True)


def detect_run_transition(
    metrics: pd.DataFrame, *, column: str = "ic_loss", smooth: int = 5
) -> dict[str, float]:
    """Transition on a run's curve: :func:`~phenomenology.landscape.detect_cliff` after a rolling
    median of ``smooth`` evaluations (accuracies are turned into ``1 - acc`` first).

    Returns:
        dict with ``transition_step``, ``onset_step``, ``end_step``, ``plateau_start_step``.
    """
    df = _clean(metrics, [column])
    y = df[column].to_numpy(dtype=float)
    if column.endswith("acc"):
        y = 1.0 - y
    if smooth > 1:
        y = pd.Series(y).rolling(smooth, center=True, min_periods=1).median().to_numpy()
    steps = df["step"].to_numpy(dtype=float)
    c = detect_cliff(np.maximum(steps, 1e-9), y)
    return {
        "transition_step": c.transition,
        "onset_step": c.onset,
        "end_step": c.end,
        "plateau_start_step": c.plateau_start,
    }


def fit_run(
    run_dir: str | Path,
    *,
    target: str = "ic_loss",
    aux: Sequence[str] = (),
    until_step: float | None = None,
    out_name: str | None = "fit.json",
    **estimator_kwargs,
) -> dict:
    """Fits the nested-logit model to a run directory and writes the result beside it.

    Args:
        run_dir: directory with ``metrics.csv`` and ``config.json`` (see ``docs/CONTRACT.md``).
        target: ``"ic_loss"`` or ``"ic_acc"``.
        aux: further curves fitted jointly (``cla, ila1, tila2, ic_acc, ic_loss``).
        until_step: fit only evaluations with ``step <= until_step``.
        out_name: file written in ``run_dir`` (None: write nothing).
        **estimator_kwargs: passed to :class:`NestedLogitFit`.

    Returns:
        the :meth:`NestedLogitFit.summary` dict plus ``r2_all`` (R^2 over the whole curve),
        ``observed`` (the transition detected on the data) and ``run_dir``.
    """
    metrics, task = read_run(run_dir)
    df = _clean(metrics, [target, *aux])
    fit_df = df if until_step is None else df[df["step"] <= until_step]
    est = NestedLogitFit(**task, target=target, aux=tuple(aux), **estimator_kwargs)
    est.fit(fit_df["step"].to_numpy(dtype=float), fit_df[[target, *aux]])
    out = est.summary()
    out["r2_all"] = est.score(df["step"].to_numpy(dtype=float), df[target].to_numpy(dtype=float))
    out["until_step"] = until_step
    out["observed"] = detect_run_transition(df, column=target)
    out["run_dir"] = str(run_dir)
    out = _jsonable(out)
    if out_name is not None:
        (Path(run_dir) / out_name).write_text(json.dumps(out, indent=2) + "\n")
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

    The plateau is read off the (smoothed) target curve with :func:`detect_run_transition`:
    it runs from ``plateau_start_step`` to ``onset_step``. The fit uses only evaluations with
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
        **estimator_kwargs: passed to :class:`NestedLogitFit`.

    Returns:
        dict with ``forecast_step``, ``forecast_stderr``, ``actual_step``, ``error_steps``,
        ``relative_error``, ``cutoff_step``, ``r2_fitted``, ``params``, ``stderr``.
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
    df = _clean(metrics, [target, *aux])
    obs = detect_run_transition(df, column=target)
    start, onset = obs["plateau_start_step"], obs["onset_step"]
    cutoff = start + fraction_of_plateau * (onset - start)
    part = df[df["step"] <= cutoff]
    est = NestedLogitFit(**task, target=target, aux=aux, free_floor=free_floor, **estimator_kwargs)
    est.fit(part["step"].to_numpy(dtype=float), part[[target, *aux]])
    actual = obs["transition_step"]
    return _jsonable({
        "forecast_step": est.transition_step_,
        "forecast_stderr": est.transition_step_stderr_,
        "actual_step": actual,
        "error_steps": est.transition_step_ - actual,
        "relative_error": (est.transition_step_ - actual) / actual,
        "cutoff_step": float(cutoff),
        "fraction_of_plateau": fraction_of_plateau,
        "n_points_fitted": int(len(part)),
        "r2_fitted": est.r2_,
        "params": est.params_,
        "stderr": est.stderr_,
        "aux": list(aux),
        "observed": obs,
    })  # fmt: skip
