"""The nested-logit dynamics model (``"nested-logit"`` in :mod:`phenomenology.models`).

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
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from interp.analysis.measures import MeasureTable
from phenomenology.landscape import LossFn, check_task, detect_cliff, gradient_flow
from phenomenology.models import DynamicsModel, register_model

__all__ = ["AUX_QUANTITIES", "DEFAULT_MAPS", "NestedLogitModel", "sharpened_cla"]

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
    """The nested-logit gradient flow [docs/science.md section 4, reconstruction] as a registered
    model.

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
                    start,
                    L=self.L,
                    N=self.N,
                    B=self.B,
                    t_eval=np.r_[0.0, t_grid],
                    loss_fn=self.loss_fn,
                )
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
