"""A Gaussian-process correction of a parametric transition law: :class:`GaussianProcess` (a
squared-exponential kernel with one length scale per input and white noise, fitted by maximum
marginal likelihood) and :class:`CorrectedLaw`, a law of :mod:`phenomenology.law_forms` plus the
process fitted to its error across configurations."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from phenomenology.law_forms import (
    Z80,
    FittedLaw,
    LogLinearLaw,
    Prediction,
    _configs,
    _transitioned,
    config_key,
)

__all__ = ["GP_FIELDS", "CorrectedLaw", "FittedCorrected", "GaussianProcess"]


GP_FIELDS = ("lr", "N", "B", "L", "K", "eps", "p_C")
"""The configuration fields the correction of :class:`CorrectedLaw` reads (as logarithms)."""


GP_BOUNDS = ((1e-6, 10.0), (0.05, 100.0), (1e-6, 1.0))
"""Bounds of the correction's prior variance, of each length scale (in sd of the field's log over
the configurations) and of the white-noise variance."""


@dataclass(frozen=True)
class GaussianProcess:
    """A Gaussian process on standardized inputs: a squared-exponential kernel with one length
    scale per input and a white-noise term, ``k(x, x') = s2 exp(-|(x - x') / l|^2 / 2) + w2
    [x = x']``. ``theta`` is ``log(s2, l_1..l_d, w2)``."""

    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray
    chol: np.ndarray = field(repr=False, compare=False)
    alpha: np.ndarray = field(repr=False, compare=False)

    @staticmethod
    def _parts(X: np.ndarray, theta: np.ndarray):
        s2, ell, w2 = math.exp(theta[0]), np.exp(theta[1:-1]), math.exp(theta[-1])
        D = (X[:, None, :] - X[None, :, :]) ** 2 / ell**2  # [n, n, d]
        Kf = s2 * np.exp(-0.5 * D.sum(axis=-1))
        return Kf, D, w2

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, theta: np.ndarray | None = None) -> GaussianProcess:
        """The process on ``X -> y``, its hyperparameters set to ``theta`` or fitted by maximum
        marginal likelihood (L-BFGS-B from a fixed start, analytic gradient: deterministic on one
        machine, not across machines). The likelihood has many local optima of nearly equal
        height, with length scales at their bounds or along flat directions: the last bits of
        the linear algebra, which differ between BLAS kernels (OpenBLAS picks one per CPU; set
        ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 machine to see it), send the optimizer to
        another optimum. The committed held-out table's fits then differ between CPUs, a few of
        its forecasts by percents; the best of several fixed starts differs too, as often."""
        n, d = X.shape
        if theta is None:
            from scipy.optimize import minimize  # only to fit: a stored law comes with its theta

            lo = [
                math.log(GP_BOUNDS[0][0]),
                *[math.log(GP_BOUNDS[1][0])] * d,
                math.log(GP_BOUNDS[2][0]),
            ]
            hi = [
                math.log(GP_BOUNDS[0][1]),
                *[math.log(GP_BOUNDS[1][1])] * d,
                math.log(GP_BOUNDS[2][1]),
            ]
            start = np.array([math.log(0.01), *[0.0] * d, math.log(0.01)])
            sol = minimize(
                cls._neg_log_likelihood,
                start,
                args=(X, y),
                jac=True,
                method="L-BFGS-B",
                bounds=list(zip(lo, hi, strict=True)),
            )
            theta = sol.x
        theta = np.asarray(theta, float)
        Kf, _, w2 = cls._parts(X, theta)
        chol = np.linalg.cholesky(Kf + w2 * np.eye(n))
        alpha = _cho_solve(chol, y)
        return cls(X, y, theta, chol, alpha)

    @classmethod
    def _neg_log_likelihood(cls, theta: np.ndarray, X: np.ndarray, y: np.ndarray):
        n = len(y)
        Kf, D, w2 = cls._parts(X, theta)
        try:
            chol = np.linalg.cholesky(Kf + w2 * np.eye(n))
        except np.linalg.LinAlgError:
            return 1e25, np.zeros_like(theta)
        alpha = _cho_solve(chol, y)
        lml = -0.5 * y @ alpha - np.log(np.diag(chol)).sum() - 0.5 * n * math.log(2 * math.pi)
        chol_inv = np.linalg.inv(chol)
        inner = np.outer(alpha, alpha) - chol_inv.T @ chol_inv
        grads = [Kf, *(Kf * D[..., k] for k in range(D.shape[-1])), w2 * np.eye(n)]
        grad = np.array([0.5 * np.sum(inner * g) for g in grads])
        return -lml, -grad

    def predict(self, x: np.ndarray) -> tuple[float, float]:
        """The mean and sd (white noise included) at one standardized input ``x``."""
        s2, ell, w2 = math.exp(self.theta[0]), np.exp(self.theta[1:-1]), math.exp(self.theta[-1])
        k = s2 * np.exp(-0.5 * (((self.X - x) / ell) ** 2).sum(axis=1))
        v = np.linalg.solve(self.chol, k)
        return float(k @ self.alpha), float(math.sqrt(max(s2 + w2 - v @ v, 0.0)))


def _cho_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.linalg import solve_triangular

    z = solve_triangular(chol, b, lower=True)
    return solve_triangular(chol.T, z, lower=False)


def _gp_x(config: Mapping[str, float]) -> np.ndarray:
    return np.log(np.array([float(config[f]) for f in GP_FIELDS]))


@dataclass(frozen=True)
class CorrectedLaw:
    """A parametric law plus a Gaussian-process correction of its residuals across
    configurations: ``log T = base(config) + f(config)``, ``f`` a Gaussian process over the log
    fields of :data:`GP_FIELDS` (a squared-exponential kernel with one length scale per field and
    a white-noise term), fitted to each configuration's mean (or median) residual of the base
    law. Near the data the correction takes out the base law's local bias; far from it, it
    returns to 0 and its uncertainty grows, so the interval widens where the data say least. A
    run's 80% interval adds the seeds' pooled scatter about their configuration's mean to the
    process's predictive variance (normal). Where the base law predicts no transition, or a step
    of 0, so does this.

    Attributes:
        name, label: as :class:`LogLinearLaw`'s.
        base: the parametric law.
        target: what the process is fitted to, each configuration's ``mean`` or ``median``
            residual (the median: the law forecasts a configuration's median step, and one late
            seed moves it less).
    """

    name: str
    label: str
    base: LogLinearLaw
    target: str = "mean"

    @property
    def terms(self) -> tuple[str, ...]:
        return self.base.terms

    @property
    def extra(self) -> tuple[str, ...]:
        return self.base.extra

    def fit(self, rows: pd.DataFrame) -> FittedCorrected:
        fitted = self.base.fit(rows)
        ok = rows[_transitioned(rows)]
        configs = _configs(ok)
        design = self.base.design(configs)
        finite = np.isfinite(design).all(axis=1)  # runs the base law cannot fit: no residual
        mean, _ = self.base.mean_and_gradient(
            fitted.coef, design[finite], [c for c, f in zip(configs, finite) if f]
        )
        resid = pd.Series(np.log(ok["transition_step"].to_numpy(float))[finite] - mean)
        key = config_key(ok)[finite].to_numpy()
        by = resid.groupby(key, sort=True)
        y_ = (by.median() if self.target == "median" else by.mean()).to_numpy()
        first = pd.DataFrame(configs)[finite].groupby(key, sort=True).first()
        X_ = np.log(first[list(GP_FIELDS)].to_numpy(float))
        within = resid - by.transform("mean")
        dof = len(within) - len(y_)
        if len(y_) < 3 or dof < 1:
            raise ValueError(f"{self.label}: {len(y_)} configurations cannot fit a correction")
        seed_var = float(np.square(within.to_numpy()).sum() / dof)
        center, scale = X_.mean(axis=0), X_.std(axis=0)
        scale[scale == 0] = 1.0
        gp = GaussianProcess.fit((X_ - center) / scale, y_)
        return FittedCorrected(self, fitted, X_, y_, center, scale, gp.theta, seed_var, dof, gp)


@dataclass(frozen=True)
class FittedCorrected:
    """A fitted :class:`CorrectedLaw`: the base law's fit, the configurations' log fields ``X``
    and mean (or median) residuals ``y``, the fields' centring and scaling, the process's log
    hyperparameters ``theta``, the seeds' pooled variance about their configuration's mean and
    its degrees of freedom."""

    model: CorrectedLaw
    base: FittedLaw
    X: np.ndarray
    y: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    theta: np.ndarray
    seed_var: float
    dof: int
    gp: GaussianProcess = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def n(self) -> int:
        return self.base.n

    @property
    def sigma(self) -> float:
        return self.base.sigma

    def coefficients(self) -> dict[str, float]:
        return self.base.coefficients()

    def stderr(self) -> dict[str, float]:
        return self.base.stderr()

    def hyperparameters(self) -> dict[str, float]:
        """The correction's scales: its prior sd, one length scale per field (in sd of that
        field's log over the data's configurations; large: the field hardly matters) and the sd
        of a configuration's own deviation (white noise)."""
        t = self.theta
        out = {"prior sd": math.exp(t[0] / 2)}
        for f, s in zip(GP_FIELDS, np.exp(t[1:-1]), strict=True):
            out[f"length scale of log {f}"] = float(s)
        out["configuration noise sd"] = math.exp(t[-1] / 2)
        out["seeds' sd"] = float(math.sqrt(self.seed_var))
        return out

    def correction(self, config: Mapping[str, float]) -> tuple[float, float]:
        """The process's mean and sd (white noise included) of the base law's error at
        ``config``."""
        return self.gp.predict((_gp_x(config) - self.center) / self.scale)

    def predict(self, config: Mapping[str, float]) -> Prediction:
        p = self.base.predict(config)
        if not p.transitions:
            return p
        shift, sd_gp = self.correction(config)
        mean = p.log_mean + shift
        sd = math.sqrt(sd_gp**2 + self.seed_var)
        return Prediction.interval(mean, Z80 * sd, log_sd=sd)

    def to_dict(self) -> dict:
        return {
            "model": self.model.name,
            "base": self.base.to_dict(),
            "X": [[float(v) for v in r] for r in self.X],
            "y": [float(v) for v in self.y],
            "center": [float(v) for v in self.center],
            "scale": [float(v) for v in self.scale],
            "theta": [float(v) for v in self.theta],
            "seed_var": self.seed_var,
            "dof": self.dof,
        }

    @staticmethod
    def from_dict(d: Mapping, model: CorrectedLaw) -> FittedCorrected:
        """The fit stored by :meth:`to_dict`, of ``model`` (its base's terms and the
        correction's shape checked against the stored ones)."""
        if d["base"]["model"] != model.base.name:
            raise ValueError(f"the stored law {d['model']!r} has another base than the code's")
        base = FittedLaw.from_dict(d["base"], model.base)
        X, y = np.array(d["X"], float), np.array(d["y"], float)
        center, scale = np.array(d["center"], float), np.array(d["scale"], float)
        theta = np.array(d["theta"], float)
        if (
            X.ndim != 2
            or X.shape != (len(y), len(GP_FIELDS))
            or theta.shape != (len(GP_FIELDS) + 2,)
        ):
            raise ValueError(f"the stored law {d['model']!r} has a correction of another shape")
        gp = GaussianProcess.fit((X - center) / scale, y, theta=theta)
        return FittedCorrected(
            model, base, X, y, center, scale, theta, float(d["seed_var"]), int(d["dof"]), gp
        )
