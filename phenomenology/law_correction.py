"""A Gaussian-process correction of a parametric transition law: :class:`GaussianProcess` (a
squared-exponential kernel with one length scale per input and white noise, fitted as the mode
of its marginal likelihood times weak priors) and :class:`CorrectedLaw`, a law of
:mod:`phenomenology.law_forms` plus the process fitted to its error across configurations."""

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

__all__ = [
    "GP_DIGITS",
    "GP_FIELDS",
    "GP_PRIOR",
    "GP_SPAN",
    "CorrectedLaw",
    "FittedCorrected",
    "GaussianProcess",
]


GP_FIELDS = ("lr", "N", "B", "L", "K", "eps", "p_C")
"""The configuration fields the correction of :class:`CorrectedLaw` reads (as logarithms)."""


GP_PRIOR = ((math.log(0.01), 3.0), (0.0, 2.0), (math.log(0.01), 3.0))
"""The correction's weak priors, normal on the logarithms (mean, sd) of its prior variance, of
each length scale (in sd of the field's log over the configurations) and of the white-noise
variance. Without them the marginal likelihood is flat along a length scale whose field hardly
matters, and its maximum is not a point but a plateau."""

GP_SPAN = 4.0
"""The search's bounds, in prior sds either side of each prior mean (a trial step of the search
beyond them would overflow the kernel)."""

GP_DIGITS = 6
"""The decimals the fitted log hyperparameters are rounded to."""


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
        s2, w2 = math.exp(theta[0]), math.exp(theta[-1])
        with np.errstate(over="ignore"):  # a search's trial step: an infinite length scale
            ell = np.exp(theta[1:-1])
            D = (X[:, None, :] - X[None, :, :]) ** 2 / ell**2  # [n, n, d]
        Kf = s2 * np.exp(-0.5 * D.sum(axis=-1))
        return Kf, D, w2

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, theta: np.ndarray | None = None) -> GaussianProcess:
        """The process on ``X -> y``, its hyperparameters set to ``theta`` or fitted: the mode of
        the marginal likelihood times the weak priors of :data:`GP_PRIOR` (L-BFGS-B from a fixed
        start, then Newton steps to the mode within the arithmetic's precision), rounded to
        :data:`GP_DIGITS` decimals. The maximum of the likelihood alone is ill-posed: flat along
        the length scale of a field that hardly matters, it has many nearly equal optima, and
        the last bits of the linear algebra, which differ between BLAS kernels and thread
        counts, sent the optimizer to one or another. The priors make each mode a point, the
        Newton steps find it to about 1e-12, and the rounding keeps those last bits out of the
        forecasts. The posterior can still have more than one mode (for a few subsets of the
        transition grid, the length scale of log eps near 1 or near 30): the search from its
        fixed start reaches the same one under OpenBLAS's Haswell and SkylakeX kernels and one
        or two threads, but another start, or other bounds, can reach another."""
        if theta is None:
            theta = cls._mode(X, y)
        theta = np.asarray(theta, float)
        n = len(y)
        Kf, _, w2 = cls._parts(X, theta)
        chol = np.linalg.cholesky(Kf + w2 * np.eye(n))
        alpha = _cho_solve(chol, y)
        return cls(X, y, theta, chol, alpha)

    @classmethod
    def _mode(cls, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The posterior mode of the log hyperparameters, rounded to :data:`GP_DIGITS`."""
        from scipy.optimize import minimize

        mean, sd = _prior(X.shape[1])
        bounds = list(zip(mean - GP_SPAN * sd, mean + GP_SPAN * sd, strict=True))
        theta = mean
        for _ in range(8):  # L-BFGS-B can stop short of the mode (its line search failing)
            sol = minimize(
                cls._neg_log_posterior,
                theta,
                args=(X, y),
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": 1000, "ftol": 1e-15, "gtol": 1e-9},
            )
            theta = cls._newton(sol.x, X, y, bounds)
            if np.max(np.abs(cls._neg_log_posterior(theta, X, y)[1])) < 1e-8:
                break
        return np.round(theta, GP_DIGITS) + 0.0

    @classmethod
    def _newton(cls, theta: np.ndarray, X: np.ndarray, y: np.ndarray, bounds) -> np.ndarray:
        """``theta`` moved by Newton steps on the gradient of :meth:`_neg_log_posterior`, while
        its Hessian is positive definite and the steps are small and within ``bounds``, to the
        mode nearby within the arithmetic's precision."""
        lo, hi = np.array(bounds).T
        for _ in range(30):
            g, H = cls._gradient_and_hessian(theta, X, y)
            try:
                chol = np.linalg.cholesky(H)
            except np.linalg.LinAlgError:
                break  # not a mode's neighbourhood
            step = -_cho_solve(chol, g)
            if np.max(np.abs(step)) > 0.1 or np.any(theta + step < lo) or np.any(theta + step > hi):
                break  # a Newton step is for the last digits of a mode inside the bounds
            theta = theta + step
            if np.max(np.abs(step)) < 1e-13:
                break
        return theta

    @classmethod
    def _gradient_and_hessian(cls, theta: np.ndarray, X: np.ndarray, y: np.ndarray):
        """The gradient of :meth:`_neg_log_posterior` and its Hessian, by central differences
        of the gradient (symmetrized)."""
        h, k = 1e-5, len(theta)
        H = np.empty((k, k))
        for i in range(k):
            e = np.zeros(k)
            e[i] = h
            up, down = (
                cls._neg_log_posterior(theta + e, X, y),
                cls._neg_log_posterior(theta - e, X, y),
            )
            H[:, i] = (up[1] - down[1]) / (2 * h)
        return cls._neg_log_posterior(theta, X, y)[1], (H + H.T) / 2

    @classmethod
    def _neg_log_posterior(cls, theta: np.ndarray, X: np.ndarray, y: np.ndarray):
        """Minus the log marginal likelihood minus the log priors of :data:`GP_PRIOR`, and its
        gradient in ``theta``."""
        nll, grad = cls._neg_log_likelihood(theta, X, y)
        mean, sd = _prior(len(theta) - 2)
        z = (theta - mean) / sd
        return nll + 0.5 * float(z @ z), grad + z / sd

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


def _prior(d: int) -> tuple[np.ndarray, np.ndarray]:
    """The means and sds of :data:`GP_PRIOR` for ``d`` inputs, in the order of ``theta``."""
    (m0, s0), (m1, s1), (m2, s2) = GP_PRIOR
    return np.array([m0, *[m1] * d, m2]), np.array([s0, *[s1] * d, s2])


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
