"""A law of the transition step across configurations, four baselines, and their held-out scores.

Every model here predicts ``log T``, the logarithm of a run's transition step (its IC-loss cliff),
from the run's configuration alone, before anything is trained, with an 80% predictive interval:

- :data:`LAW`, the toolkit's law (:class:`CorrectedLaw`): the third law below plus a
  Gaussian-process correction of its error across configurations, which takes out the third
  law's local bias near the data and fades, with a growing variance, away from them. It was
  chosen after five of the nine points declared to test the third law were read;
  :data:`interp.experiments.catalog.transition_law.LATER` holds the points declared after it;
- :data:`FLOW_LAW`, the third law (:class:`FlowLaw`): plain SGD's steps are a gradient-flow time
  ``tau`` over the learning rate, stretched by a finite-step factor ``1 + kappa lr tau``; ``tau``
  is a power of ``P = L! / ((L - n)! L^n)`` (``n = N / B``), of ``1 - 1/n`` (the error of
  copying a random label of the context) and of ``N``, ``L``, ``K``, ``eps`` and ``p_C``.
  ``-log P`` is the total correlation of a bursty context's ``n`` labels, which the task draws
  pairwise distinct (``P`` is the chance that ``n`` labels drawn independently would be: the
  birthday problem); it grows as ``n^2 / 2L`` for ``n`` much below ``L`` and steepens towards
  ``n = L``. The form was chosen, after the second law failed on points declared after it,
  because it fitted. At a term's limit (``p_C = 0``; ``n > L``, which the task refuses) the sign
  of its fitted coefficient decides: no transition, or a step sent to 0 (no forecast);
- :data:`THRESHOLD_LAW`, the second law: ``T`` grows as a power of the distractor classes of a
  context, ``n - 1``, times a threshold factor ``(1 - n/L)^g`` that vanishes at ``L = n``
  (where the nested-logit model has no transition; docs/science.md section 4), powers of ``L``,
  ``K``, ``eps`` and ``p_C``, and a power law in the learning rate and ``N`` whose ``N``
  exponent moves with the learning rate. Points declared after it contradicted it where the
  classes near ``L`` (``L16-N14`` did not transition in 32k steps);
- :data:`DRIVE_LAW`, the first law: a power law in the learning rate, ``N``, ``K``, ``eps`` and
  ``p_C``, times a power of the nested-logit model's initial drive ``1/n - 1/L``, which carries
  ``L`` and ``B``. Points declared after it contradicted its ``1/L`` term;
- :data:`FREE_POWER_LAW`: a free power law in ``K``, ``B``, ``N`` and the learning rate;
- :data:`TOKENS_FORM`: induction heads form after about ``T sqrt(B C)`` training tokens (Aoyama et
  al. 2025: ``B`` the batch size, ``C`` the context length), so ``steps ∝ 1 / sqrt(B C)``;
- :data:`N2_FORM`: the emergence time grows as the square of the context length (Musat et al.
  2025), ``steps ∝ N^2``;
- :class:`NearestConfiguration`: the mean ``log T`` of the nearest configuration of the data.

The two published forms state no dependence on the learning rate, which the data vary; they are
given plain SGD's time scale, ``steps ∝ 1 / lr`` (gradient flow's time is ``steps x lr``), and a
free constant, and are otherwise as published. Each log-linear model is fitted by least squares
on the runs that transitioned (one row per run, so a configuration counts by its seeds); its 80%
interval is the Student-t predictive interval of the fit (for :class:`FlowLaw`, through the
Jacobian of the fit, to first order). Runs that did not transition within
their budget are not fitted (their step is censored); :func:`leave_one_out` scores every model on
configurations held out one at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "DRIVE_LAW",
    "FIELDS",
    "CorrectedLaw",
    "FLOW_LAW",
    "FREE_POWER_LAW",
    "FlowLaw",
    "LAW",
    "LogLinearLaw",
    "MODELS",
    "N2_FORM",
    "NearestConfiguration",
    "Prediction",
    "THRESHOLD_LAW",
    "TOKENS_FORM",
    "drive",
    "floor",
    "forecast_later",
    "leave_one_out",
    "power_exponent",
    "term_fields",
]

Z80 = 1.2815515655446004
"""The standard normal's 90% quantile: an 80% two-sided interval is ``mean ± Z80 sd``."""

FIELDS = ("K", "L", "N", "B", "eps", "p_C", "lr", "batch_size")
"""The configuration fields the models read (a row of the grid, or a run's configs)."""


def drive(L: float, N: float, B: float) -> float:
    """The nested-logit model's initial pull on the match, ``1/n - 1/L`` with ``n = N / B`` (the
    distinct labels of a context); 0 or less: the model has no transition."""
    return 1.0 / (N / B) - 1.0 / L


@dataclass(frozen=True)
class Prediction:
    """A predicted transition step: the median ``step`` (``exp`` of the predicted mean of ``log
    T``), its 80% interval, and the predictive ``log_sd`` (``inf`` steps: no transition at all)."""

    step: float
    low: float
    high: float
    log_mean: float
    log_sd: float
    reason: str = ""

    @property
    def transitions(self) -> bool:
        """A transition at a finite, positive step (``inf``: none; ``0``: the law's limit sends
        the step to zero, where it says nothing usable)."""
        return 0.0 < self.step < math.inf

    def p_within(self, budget: float, seen: float = 0.0) -> float:
        """The probability of a transition by step ``budget``, given none by step ``seen``."""
        from scipy.stats import norm

        if self.step == 0.0:  # the law's limit: a transition at once
            return 1.0
        if not self.transitions:
            return 0.0
        if budget <= seen:
            return 0.0
        sd = max(self.log_sd, 1e-9)
        p_budget = norm.cdf((math.log(budget) - self.log_mean) / sd)
        p_seen = norm.cdf((math.log(seen) - self.log_mean) / sd) if seen > 0 else 0.0
        rest = 1.0 - p_seen
        return float((p_budget - p_seen) / rest) if rest > 1e-300 else 1.0

    @staticmethod
    def never(reason: str) -> Prediction:
        return Prediction(math.inf, math.inf, math.inf, math.inf, 0.0, reason)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "low": self.low,
            "high": self.high,
            "log_mean": self.log_mean,
            "log_sd": self.log_sd,
            "reason": self.reason,
        }


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def log_p_distinct(n: float, L: float) -> float:
    """``log(L! / ((L - n)! L^n))``: the chance that ``n`` labels drawn independently from ``L``
    are pairwise distinct (the birthday problem), and minus the total correlation of ``n`` labels
    drawn distinct, as the task draws a bursty context's; ``-inf`` for ``n > L``."""
    if n > L:
        return -math.inf
    return math.lgamma(L + 1.0) - math.lgamma(L - n + 1.0) - n * math.log(L)


TERMS: dict[str, Callable[[Mapping[str, float]], float]] = {
    "log lr": lambda c: _log(c["lr"]),
    "log N": lambda c: _log(c["N"]),
    "log B": lambda c: _log(c["B"]),
    "log K": lambda c: _log(c["K"]),
    "log eps": lambda c: _log(c["eps"]),
    "log p_C": lambda c: _log(c["p_C"]),
    "log drive": lambda c: _log(drive(c["L"], c["N"], c["B"])),
    "log (n-1)": lambda c: _log(c["N"] / c["B"] - 1.0),
    "log (1-n/L)": lambda c: _log(1.0 - c["N"] / c["B"] / c["L"]),
    "log L": lambda c: _log(c["L"]),
    "log lr x log N": lambda c: _log(c["lr"]) * _log(c["N"]),
    "log P(distinct labels)": lambda c: log_p_distinct(c["N"] / c["B"], c["L"]),
    "log (1-1/n)": lambda c: _log(1.0 - c["B"] / c["N"]),
}
"""The features a log-linear model may use, by name (``-inf``: the feature's limit, where the
model predicts no transition)."""

TERM_FIELDS: dict[str, tuple[str, ...]] = {
    "log drive": ("L", "N", "B"),
    "log (n-1)": ("N", "B"),
    "log (1-n/L)": ("L", "N", "B"),
    "log lr x log N": ("lr", "N"),
    "log P(distinct labels)": ("L", "N", "B"),
    "log (1-1/n)": ("N", "B"),
}
"""The configuration fields of each term of :data:`TERMS` that is not one field's logarithm."""


def term_fields(term: str) -> tuple[str, ...]:
    """The configuration fields a term of :data:`TERMS` reads (``log K``: ``("K",)``)."""
    return TERM_FIELDS.get(term, (term.removeprefix("log "),))


OFFSETS: dict[str, Callable[[Mapping[str, float]], float]] = {
    "none": lambda c: 0.0,
    "tokens": lambda c: -_log(c["lr"]) - 0.5 * _log(c["batch_size"] * (2 * c["N"] + 1)),
    "N2": lambda c: -_log(c["lr"]) + 2.0 * _log(c["N"]),
}
"""Fixed parts of a model's ``log T`` (slope 1, not fitted): the published forms' exponents, with
SGD's ``1 / lr`` time scale (context length ``C = 2N + 1`` tokens, ``B`` the batch size)."""


@dataclass(frozen=True)
class LogLinearLaw:
    """``log T = offset(config) + c0 + sum_i c_i term_i(config)``, fitted by least squares.

    Attributes:
        name: the model's short name (``law``, ``free``, ...).
        label: what the page calls it.
        terms: names in :data:`TERMS`.
        offset: a name in :data:`OFFSETS`.
    """

    name: str
    label: str
    terms: tuple[str, ...]
    offset: str = "none"

    extra: tuple[str, ...] = field(default=(), init=False)
    """Parameters beyond the terms' coefficients (:class:`FlowLaw`'s ``log kappa``)."""

    def design(self, configs: Sequence[Mapping[str, float]]) -> np.ndarray:
        cols = [np.ones(len(configs))]
        cols += [np.array([TERMS[t](c) for c in configs], float) for t in self.terms]
        return np.column_stack(cols)

    def mean_and_gradient(
        self, coef: np.ndarray, X: np.ndarray, configs: Sequence[Mapping[str, float]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The predicted ``log T`` of each row of the design ``X`` and its gradient in the
        parameters (here ``X`` itself)."""
        offset = np.array([OFFSETS[self.offset](c) for c in configs])
        return X @ coef + offset, X

    def fit(self, rows: pd.DataFrame) -> FittedLaw:
        """Fit on the rows that transitioned (``transition_step`` finite)."""
        X, y, configs = self._data(rows)
        offset = np.array([OFFSETS[self.offset](c) for c in configs])
        coef, *_ = np.linalg.lstsq(X, y - offset, rcond=None)
        return self._fitted(coef, X, y, configs)

    def _data(self, rows: pd.DataFrame):
        ok = rows[_transitioned(rows)]
        configs = _configs(ok)
        y = np.log(ok["transition_step"].to_numpy(float))
        X = self.design(configs)
        finite = np.isfinite(X).all(axis=1)  # a run that transitioned where the model says none
        # contradicts it; it cannot be fitted (its error: infinite)
        return X[finite], y[finite], [c for c, f in zip(configs, finite, strict=True) if f]

    def _fitted(self, coef: np.ndarray, X: np.ndarray, y: np.ndarray, configs) -> FittedLaw:
        mean, J = self.mean_and_gradient(coef, X, configs)
        resid = y - mean
        dof = len(y) - np.linalg.matrix_rank(J)
        if dof < 1:
            raise ValueError(f"{self.label}: {len(y)} runs cannot fit {J.shape[1]} coefficients")
        sigma = float(math.sqrt(resid @ resid / dof))
        return FittedLaw(self, coef, np.linalg.pinv(J.T @ J), sigma, int(dof), len(y))


@dataclass(frozen=True)
class FlowLaw(LogLinearLaw):
    """``T = tau / lr x (1 + kappa lr tau)``, ``log tau = c0 + sum_i c_i term_i(config)``: plain
    SGD's steps are gradient flow's time ``tau`` over the learning rate, stretched at a large
    ``lr x tau`` by a finite-step factor whose size ``kappa`` is fitted (with the coefficients,
    by nonlinear least squares on ``log T``; the interval from the fit's Jacobian)."""

    extra: tuple[str, ...] = field(default=("log kappa",), init=False)

    def mean_and_gradient(self, coef, X, configs):
        lr = np.array([float(c["lr"]) for c in configs])
        log_tau = X @ coef[:-1]
        s = np.exp(coef[-1] + np.log(lr) + log_tau)  # kappa lr tau
        share = s / (1.0 + s)
        mean = log_tau - np.log(lr) + np.log1p(s)
        return mean, np.column_stack([X * (1.0 + share)[:, None], share])

    def fit(self, rows: pd.DataFrame) -> FittedLaw:
        from scipy.optimize import least_squares

        X, y, configs = self._data(rows)
        lr = np.array([float(c["lr"]) for c in configs])
        start, *_ = np.linalg.lstsq(X, y + np.log(lr), rcond=None)  # gradient flow alone

        def residual(p):
            return self.mean_and_gradient(p, X, configs)[0] - y

        def jacobian(p):
            return self.mean_and_gradient(p, X, configs)[1]

        lower = np.full(len(start) + 1, -np.inf)
        upper = np.full(len(start) + 1, np.inf)
        lower[-1], upper[-1] = KAPPA_RANGE  # kappa -> 0 is gradient flow itself: bounded
        x0 = np.append(start, -6.0)
        sol = least_squares(residual, x0, jac=jacobian, bounds=(lower, upper), x_scale="jac",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=2000)  # fmt: skip
        return self._fitted(sol.x, X, y, configs)


KAPPA_RANGE = (-20.0, 2.0)
"""Bounds of :class:`FlowLaw`'s ``log kappa`` (``exp(-20)``: no finite-step stretch)."""


@dataclass(frozen=True)
class FittedLaw:
    """A fitted :class:`LogLinearLaw` (or :class:`FlowLaw`): its parameters, ``(J'J)^-1`` (``J``
    the Jacobian of the predicted ``log T`` in the parameters; for a log-linear law, the design),
    residual sd and degrees of freedom (what its predictive interval needs)."""

    model: LogLinearLaw
    coef: np.ndarray
    xtx_inv: np.ndarray
    sigma: float
    dof: int
    n: int

    @property
    def name(self) -> str:
        return self.model.name

    def _names(self) -> tuple[str, ...]:
        return ("intercept", *self.model.terms, *self.model.extra)

    def coefficients(self) -> dict[str, float]:
        return dict(zip(self._names(), map(float, self.coef), strict=True))

    def stderr(self) -> dict[str, float]:
        se = self.sigma * np.sqrt(np.diag(self.xtx_inv))
        return dict(zip(self._names(), map(float, se), strict=True))

    def predict(self, config: Mapping[str, float]) -> Prediction:
        from scipy.stats import t as student

        x = self.model.design([config])[0]
        limit = [(t, c) for t, v, c in zip(self.model.terms, x[1:], self.coef[1:], strict=False)
                 if not math.isfinite(v)]  # fmt: skip
        if limit:  # the term's limit is -inf: its coefficient's sign says where log T goes
            up = [(t, c) for t, c in limit if c > 0]
            if up:
                t, c = up[0]
                return Prediction(0.0, 0.0, 0.0, -math.inf, 0.0, f"{t} is at its limit and its "
                                  f"coefficient is {c:+.3f}: the fitted law sends the step to 0 "
                                  "there, which is no forecast")  # fmt: skip
            return Prediction.never(f"{limit[0][0]} is at its limit: {self.model.label} predicts "
                                    "no transition")  # fmt: skip
        mean_, grad = self.model.mean_and_gradient(self.coef, x[None, :], [config])
        mean, g = float(mean_[0]), grad[0]
        sd = self.sigma * math.sqrt(1.0 + float(g @ self.xtx_inv @ g))
        q = float(student.ppf(0.9, self.dof))
        return Prediction(math.exp(mean), math.exp(mean - q * sd), math.exp(mean + q * sd),
                          mean, sd * q / Z80)  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "model": self.model.name,
            "terms": list(self.model.terms),
            "offset": self.model.offset,
            "extra": list(self.model.extra),
            "coef": [float(c) for c in self.coef],
            "xtx_inv": [[float(v) for v in r] for r in self.xtx_inv],
            "sigma": self.sigma,
            "dof": self.dof,
            "n": self.n,
        }

    @staticmethod
    def from_dict(d: Mapping) -> FittedLaw:
        model = next(m for m in MODELS if m.name == d["model"])
        if (list(model.terms) != list(d["terms"]) or model.offset != d["offset"]
                or list(model.extra) != list(d.get("extra", []))):  # fmt: skip
            raise ValueError(f"the stored law {d['model']!r} has other terms than the code's")
        coef = np.array(d["coef"], float)
        cov = np.array(d["xtx_inv"], float)
        if coef.shape != (len(model.terms) + len(model.extra) + 1,) or cov.shape != (
            len(coef), len(coef)
        ):
            raise ValueError(f"the stored law {d['model']!r} has {len(coef)} coefficients")
        return FittedLaw(model, coef, cov, float(d["sigma"]), int(d["dof"]), int(d["n"]))


FLOW_LAW = FlowLaw(
    name="flow",
    label="the third law (gradient-flow time x label correlation)",
    terms=("log P(distinct labels)", "log (1-1/n)", "log N", "log L", "log K", "log eps",
           "log p_C"),
)  # fmt: skip
THRESHOLD_LAW = LogLinearLaw(
    name="threshold",
    label="the second law (distractor classes x threshold at n = L)",
    terms=("log lr", "log N", "log lr x log N", "log K", "log eps", "log p_C", "log (n-1)",
           "log (1-n/L)", "log L"),
)  # fmt: skip
DRIVE_LAW = LogLinearLaw(
    name="drive",
    label="the first law (power law x drive 1/n - 1/L)",
    terms=("log lr", "log N", "log K", "log eps", "log p_C", "log drive"),
)
FREE_POWER_LAW = LogLinearLaw(
    name="free", label="free power law in K, B, N, lr", terms=("log lr", "log N", "log B", "log K")
)
TOKENS_FORM = LogLinearLaw(name="tokens", label="sqrt(B C) tokens form", terms=(), offset="tokens")
N2_FORM = LogLinearLaw(name="n2", label="N^2-in-steps form", terms=(), offset="N2")


@dataclass(frozen=True)
class NearestConfiguration:
    """The mean ``log T`` of the nearest configuration (Euclidean distance over the log fields,
    each scaled by its spread in the data); 80% interval from the pooled spread of the seeds."""

    name: str = "nearest"
    label: str = "nearest-configuration lookup"
    fields: tuple[str, ...] = ("lr", "N", "B", "K", "eps", "p_C", "L")

    def fit(self, rows: pd.DataFrame) -> FittedNearest:
        ok = rows[_transitioned(rows)].assign(y=lambda r: np.log(r["transition_step"]))
        groups = ok.groupby(list(self.fields), sort=True)["y"]
        table = groups.agg(["mean", "count", "var"]).reset_index()
        dev = ok["y"] - groups.transform("mean")
        dof = int(len(ok) - len(table))
        pooled = float(math.sqrt((dev**2).sum() / dof)) if dof > 0 else math.nan
        feats = np.log(table[list(self.fields)].to_numpy(float))
        scale = feats.std(axis=0)
        scale[scale == 0] = 1.0
        return FittedNearest(self, table, feats, scale, pooled, dof)


@dataclass(frozen=True)
class FittedNearest:
    model: NearestConfiguration
    table: pd.DataFrame
    feats: np.ndarray
    scale: np.ndarray
    sigma: float
    dof: int
    name: str = field(default="nearest")

    def predict(self, config: Mapping[str, float]) -> Prediction:
        from scipy.stats import t as student

        x = np.log(np.array([max(float(config[f]), 1e-300) for f in self.model.fields]))
        d = np.sqrt((((self.feats - x) / self.scale) ** 2).sum(axis=1))
        i = int(np.argmin(d))
        mean, n = float(self.table["mean"].iloc[i]), int(self.table["count"].iloc[i])
        sd = self.sigma * math.sqrt(1.0 + 1.0 / n)
        q = float(student.ppf(0.9, max(self.dof, 1)))
        return Prediction(math.exp(mean), math.exp(mean - q * sd), math.exp(mean + q * sd),
                          mean, sd * q / Z80)  # fmt: skip


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
        machine). The likelihood has local optima, with length scales at their bounds: other
        rounding (another BLAS, another order of the same operations) can land a fit in another
        one, which moved one held-out forecast of the committed data by 2.4%."""
        from scipy.optimize import minimize

        n, d = X.shape
        if theta is None:
            lo = [math.log(GP_BOUNDS[0][0]), *[math.log(GP_BOUNDS[1][0])] * d,
                  math.log(GP_BOUNDS[2][0])]  # fmt: skip
            hi = [math.log(GP_BOUNDS[0][1]), *[math.log(GP_BOUNDS[1][1])] * d,
                  math.log(GP_BOUNDS[2][1])]  # fmt: skip
            start = np.array([math.log(0.01), *[0.0] * d, math.log(0.01)])
            sol = minimize(cls._neg_log_likelihood, start, args=(X, y), jac=True,
                           method="L-BFGS-B", bounds=list(zip(lo, hi, strict=True)))  # fmt: skip
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
    a white-noise term), fitted to each configuration's mean residual of the base law. Near the
    data the correction takes out the base law's local bias; far from it, it returns to 0 and its
    uncertainty grows, so the interval widens where the data say least. A run's 80% interval
    adds the seeds' pooled scatter about their configuration's mean to the process's predictive
    variance (normal). Where the base law predicts no transition, or a step of 0, so does this.

    Attributes:
        name, label: as :class:`LogLinearLaw`'s.
        base: the parametric law.
    """

    name: str
    label: str
    base: LogLinearLaw

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
        mean, _ = self.base.mean_and_gradient(fitted.coef, design[finite],
                                              [c for c, f in zip(configs, finite) if f])  # fmt: skip
        resid = pd.Series(np.log(ok["transition_step"].to_numpy(float))[finite] - mean)
        key = config_key(ok)[finite].to_numpy()
        by = resid.groupby(key, sort=True)
        y_ = by.mean().to_numpy()
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
    and mean residuals ``y``, the fields' centring and scaling, the process's log
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
        return Prediction(math.exp(mean), math.exp(mean - Z80 * sd), math.exp(mean + Z80 * sd),
                          mean, sd)  # fmt: skip

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
    def from_dict(d: Mapping) -> FittedCorrected:
        model = next(m for m in MODELS if m.name == d["model"])
        base = FittedLaw.from_dict(d["base"])
        if base.model is not model.base:
            raise ValueError(f"the stored law {d['model']!r} has another base than the code's")
        X, y = np.array(d["X"], float), np.array(d["y"], float)
        center, scale = np.array(d["center"], float), np.array(d["scale"], float)
        theta = np.array(d["theta"], float)
        if X.ndim != 2 or X.shape != (len(y), len(GP_FIELDS)) or theta.shape != (
            len(GP_FIELDS) + 2,
        ):
            raise ValueError(f"the stored law {d['model']!r} has a correction of another shape")
        gp = GaussianProcess.fit((X - center) / scale, y, theta=theta)
        return FittedCorrected(model, base, X, y, center, scale, theta, float(d["seed_var"]),
                               int(d["dof"]), gp)  # fmt: skip


def fitted_from_dict(d: Mapping):
    """A stored fit of any model of :data:`MODELS`, by its ``model`` name."""
    model = next(m for m in MODELS if m.name == d["model"])
    return (FittedCorrected if isinstance(model, CorrectedLaw) else FittedLaw).from_dict(d)


LAW = CorrectedLaw(
    name="law", label="the law (the third law + a Gaussian-process correction)", base=FLOW_LAW
)


MODELS = (LAW, FLOW_LAW, THRESHOLD_LAW, DRIVE_LAW, FREE_POWER_LAW, TOKENS_FORM, N2_FORM)
"""The log-linear models, the law first."""


def all_models() -> list:
    return [LAW, FLOW_LAW, THRESHOLD_LAW, DRIVE_LAW, NearestConfiguration(), TOKENS_FORM,
            N2_FORM, FREE_POWER_LAW]  # fmt: skip


def _transitioned(rows: pd.DataFrame) -> pd.Series:
    t = pd.to_numeric(rows["transition_step"], errors="coerce")
    return t.notna() & np.isfinite(t) & (t > 0)


def _configs(rows: pd.DataFrame) -> list[dict[str, float]]:
    return rows[list(FIELDS)].astype(float).to_dict("records")


def config_key(rows: pd.DataFrame) -> pd.Series:
    """One label per configuration (the grid's ``point``)."""
    return rows["point"].astype(str)


def leave_one_out(rows: pd.DataFrame, models: Sequence | None = None) -> pd.DataFrame:
    """Every model fitted without one configuration and scored on that configuration's runs.

    Returns:
        One row per (model, held-out run): ``model, point, seed, observed, predicted, low, high,
        abs_log_error, covered`` (observed: the run's transition step; runs that did not
        transition are left out; a prediction of no transition counts as an infinite error).
    """
    models = all_models() if models is None else list(models)
    key = config_key(rows)
    out = []
    held = rows[_transitioned(rows)]
    for point in dict.fromkeys(config_key(held)):
        train = rows[key != point]
        test = held[config_key(held) == point]
        for m in models:
            fitted = m.fit(train)
            out += [_scored(m, fitted, r, float(r["transition_step"])) for _, r in test.iterrows()]
    return pd.DataFrame(out)


def _scored(model, fitted, r: pd.Series, observed: float, budget: float | None = None) -> dict:
    """One held-out run's row: the fitted model's forecast of its configuration against its
    ``observed`` step (NaN: it did not transition, and has no error; a forecast of no
    transition of a run that did is an infinite error), and with a ``budget`` the forecast's
    probability of a transition within it (``p_within``)."""
    p = fitted.predict({f: float(r[f]) for f in FIELDS})
    within = {} if budget is None else {"budget": budget, "p_within": p.p_within(budget)}
    if math.isnan(observed):
        err = math.nan
    else:
        err = abs(math.log(p.step / observed)) if p.transitions else math.inf
    return {"model": model.name, "point": str(r["point"]), "seed": int(r["seed"]),
            "observed": observed, "predicted": p.step, "low": p.low, "high": p.high,
            "abs_log_error": err, "covered": bool(p.low <= observed <= p.high), **within}  # fmt: skip


def forecast_later(
    rows: pd.DataFrame, later: Sequence[str], models: Sequence | None = None
) -> pd.DataFrame:
    """Every model fitted once on the configurations not in ``later`` and scored on the runs of
    those in ``later`` (points declared after the models were: a forecast made before they were
    trained). Columns as :func:`leave_one_out`'s, plus ``transitioned``, ``budget`` and
    ``p_within`` (the probability of a transition within the budget); a run that did not
    transition has no error (NaN)."""
    models = all_models() if models is None else list(models)
    key = config_key(rows)
    test = rows[key.isin(list(later))]
    jumped = _transitioned(test)
    out = []
    for m in models:
        fitted = m.fit(rows[~key.isin(list(later))])
        for i, r in test.iterrows():
            observed = float(r["transition_step"]) if jumped[i] else math.nan
            row = _scored(m, fitted, r, observed, budget=float(r["budget"]))
            out.append({**row, "transitioned": bool(jumped[i])})
    return pd.DataFrame(out)


def floor(rows: pd.DataFrame) -> pd.DataFrame:
    """The seed-scatter floor of each configuration with two or more transitioned seeds:
    ``0.6745 x sd(log T)`` over its seeds, the median ``|log error|`` of a predictor exact in the
    configuration's mean when the seeds scatter log-normally (columns ``point, n, sd_log,
    floor``)."""
    ok = rows[_transitioned(rows)].assign(y=lambda r: np.log(r["transition_step"]))
    g = ok.groupby(config_key(ok), sort=False)["y"]
    t = pd.DataFrame({"n": g.count(), "sd_log": g.std(ddof=1)}).reset_index(names="point")
    t = t[t["n"] >= 2].copy()
    t["floor"] = 0.6745 * t["sd_log"]
    return t


def power_exponent(
    rows: pd.DataFrame, term: str = "log N", model: LogLinearLaw = FREE_POWER_LAW,
    n_boot: int = 1000, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """A model's exponent of one field with its 95% interval: the least-squares one (``t`` of the
    fit) and a bootstrap over configurations (whole configurations resampled with their seeds)."""
    from scipy.stats import t as student

    fitted = model.fit(rows)
    est, se = fitted.coefficients()[term], fitted.stderr()[term]
    q = float(student.ppf(0.975, fitted.dof))
    ok = rows[_transitioned(rows)]
    points = list(dict.fromkeys(config_key(ok)))
    groups = {p: ok[config_key(ok) == p] for p in points}
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        pick = rng.choice(len(points), size=len(points), replace=True)
        sample = pd.concat([groups[points[i]] for i in pick], ignore_index=True)
        try:
            boot.append(model.fit(sample).coefficients()[term])
        except ValueError:
            continue
    lo, hi = np.percentile(boot, [2.5, 97.5]) if boot else (math.nan, math.nan)
    return {"estimate": est, "ols_low": est - q * se, "ols_high": est + q * se,
            "boot_low": float(lo), "boot_high": float(hi), "n_boot": len(boot)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the stored law: forecasting a configuration before training

LAW_FILE = __import__("pathlib").Path(__file__).with_name("transition_law.json")
"""The law fitted on the transition-law experiment's data (docs/results/transition-law.md),
packaged with the toolkit; ``induction-cliff reproduce transition-law --tier full`` writes it as
``transition-law-law.json`` beside the page."""

WARNED = {"hidden_bias"}
"""Fixed fields of the data that a forecast does not refuse but names: the author's scalar
hidden biases train as the per-unit ones where they train at all, but collapse on some seeds
under plain SGD (docs/results/hidden-bias.md)."""


@dataclass(frozen=True)
class StoredLaw:
    """The fitted law with the range of the data it was fitted on.

    Attributes:
        fitted: the law.
        ranges: field -> ``[min, max]`` over the runs of the data.
        fixed: ``section.field`` -> the value every run of the data had (as text).
        calibration: the combination's calibration (:func:`phenomenology.prior.calibrate`).
        source: where its data are.
        observed: the data's configurations (``{field: value, ..., "runs", "transitioned",
            "budget", "median_step"}``), so that a forecast of one can say what its runs did.
    """

    fitted: FittedLaw
    ranges: Mapping[str, Sequence[float]]
    fixed: Mapping[str, str]
    calibration: Mapping[str, list]
    source: str = ""
    observed: Sequence[Mapping] = ()

    @staticmethod
    def load(path=None) -> StoredLaw:
        import json
        from pathlib import Path

        path = Path(path) if path is not None else LAW_FILE
        if not path.exists():
            raise ValueError(f"{path} is missing: `induction-cliff reproduce transition-law "
                             "--tier full` writes it")  # fmt: skip
        try:
            d = json.loads(path.read_text())
            for rec in d.get("observed", ()):
                _check_observed(rec)
            return StoredLaw(fitted_from_dict(d["law"]), d["ranges"], d["fixed"],
                             d.get("calibration", {}), d.get("data", ""),
                             tuple(d.get("observed", ())))  # fmt: skip
        except (KeyError, TypeError, ValueError, StopIteration) as err:
            raise ValueError(f"{path} is not a stored transition law ({err})") from None

    def problems(self, config: Mapping[str, float], settings: Mapping[str, str]) -> tuple:
        """``(refusals, notes)``: one line per field outside the data (a value beyond its range,
        or a fixed field set otherwise), and one per field in :data:`WARNED` set otherwise."""
        refusals, notes = [], []
        for f, (lo, hi) in self.ranges.items():
            v = float(config[f])
            if not lo <= v <= hi:
                refusals.append(f"{f}={v:g} is outside the law's data ({lo:g} to {hi:g})")
        for key, value in self.fixed.items():
            have = settings.get(key)
            if have is None or str(have) == str(value):
                continue
            field_name = key.split(".", 1)[-1]
            line = f"{field_name}={have} is not the law's ({value})"
            (notes if field_name in WARNED else refusals).append(line)
        return refusals, notes

    def forecast(self, config: Mapping[str, float]) -> Prediction:
        return self.fitted.predict(config)

    def observed_at(self, config: Mapping[str, float]) -> Mapping | None:
        """The data's record of ``config`` (every field of :data:`FIELDS` equal to within float
        rounding), or None when the data never trained it."""
        for rec in self.observed:
            if all(math.isclose(float(rec[f]), float(config[f]), rel_tol=1e-9) for f in FIELDS):
                return rec
        return None


def _check_observed(rec) -> None:
    """Refuse a damaged record of :func:`observed_configurations` by its first bad field."""
    keys = (*FIELDS, "runs", "transitioned", "budget", "median_step")
    missing = [k for k in keys if k not in rec]
    if missing:
        raise ValueError(f"an observed configuration lacks {missing[0]}")

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for k in keys[:-1]:
        if not number(rec[k]):
            raise ValueError(f"an observed configuration's {k}={rec[k]!r} is not a number")
    step = rec["median_step"]
    if rec["transitioned"] and not number(step):
        raise ValueError(
            f"an observed configuration's median_step={step!r} is not a number, but "
            f"{rec['transitioned']} of its runs transitioned"
        )


def observed_configurations(rows: pd.DataFrame) -> list[dict]:
    """One record per configuration of a grid's rows: its fields, runs, how many transitioned
    within their budget, the budget and the median transition step of those that did (None)."""
    out = []
    ok = _transitioned(rows)
    for _, g in rows.groupby(config_key(rows), sort=False):
        done = g[ok.loc[g.index]]
        out.append({
            **{f: float(g[f].iloc[0]) for f in FIELDS}, "runs": int(len(g)),
            "transitioned": int(len(done)), "budget": int(g["budget"].max()),
            "median_step": float(done["transition_step"].median()) if len(done) else None,
        })  # fmt: skip
    return out


FIXED_FIELDS = {
    "task": ("D", "N_max", "alpha", "p_B", "novel_pool", "B_eval", "task"),
    "model": ("n_layers", "n_heads", "d_head", "d_mlp", "n_mlp_layers", "positional",
              "positional_config", "attn_scale", "attn_init_std", "qk_bias", "readout_init",
              "hidden_bias"),
    "train": ("optimizer", "weight_decay", "weight_decay_form", "momentum", "batch_size",
              "intervention"),
}  # fmt: skip
"""The fields a grid holds fixed that can change a transition time (``section.field``); a forecast
of a configuration that sets one otherwise is outside the data."""


def law_inputs(task, model, train) -> tuple[dict[str, float], dict[str, str]]:
    """A run's configs as the law reads them: ``(fields, settings)``, the fields of
    :data:`phenomenology.transition_law.FIELDS` and the :data:`FIXED_FIELDS` as text."""
    sections = {"task": task, "model": model, "train": train}
    values = {**{f: getattr(task, f) for f in FIELDS if hasattr(task, f)},
              "lr": train.lr, "batch_size": train.batch_size}  # fmt: skip
    fields = {f: float(values[f]) for f in FIELDS}
    settings = {f"{s}.{f}": str(getattr(sections[s], f))
                for s, names in FIXED_FIELDS.items() for f in names}  # fmt: skip
    return fields, settings


_STORED: dict = {}


def law_prior(task, model, train, path=None) -> tuple[Prediction | None, Mapping, str]:
    """The stored law's forecast of a run's configuration, as the prior of the partial-curve
    forecasters: ``(prediction, calibration, why)``; prediction None (and ``why`` says why) when
    there is no stored law, the optimiser is not plain SGD, or the configuration is outside the
    law's data (then the curve forecasters work alone, as before)."""
    key = str(path)
    if key not in _STORED:
        try:
            _STORED[key] = StoredLaw.load(path)
        except ValueError as err:
            _STORED[key] = str(err)
    law = _STORED[key]
    if isinstance(law, str):
        return None, {}, law
    if model is None or not all(hasattr(model, f) for f in FIXED_FIELDS["model"]):
        return None, {}, "not the toolkit's network"
    fields, settings = law_inputs(task, model, train)
    refusals, _ = law.problems(fields, settings)
    if refusals:
        return None, {}, refusals[0]
    p = law.forecast(fields)
    if p.step == 0.0:
        return None, {}, p.reason
    return p, law.calibration, ""
