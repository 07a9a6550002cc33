"""The parametric forms of a transition law and their fits: what every model of
:mod:`phenomenology.transition_law` predicts (:class:`Prediction`), the features a log-linear
model may use (:data:`TERMS`), the log-linear and gradient-flow forms (:class:`LogLinearLaw`,
:class:`FlowLaw`) with their least-squares fits (:class:`FittedLaw`), and the
nearest-configuration lookup (:class:`NearestConfiguration`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "FIELDS",
    "FittedLaw",
    "FittedNearest",
    "FlowLaw",
    "LogLinearLaw",
    "NearestConfiguration",
    "Prediction",
    "TERMS",
    "Z80",
    "config_key",
    "drive",
    "log_p_distinct",
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
    def interval(log_mean: float, half: float, log_sd: float | None = None) -> Prediction:
        """The prediction of a ``log T`` with mean ``log_mean``, 80% half-width ``half`` and
        predictive sd ``log_sd`` (default ``half / Z80``, a normal's). A mean beyond the floats'
        range (a fitted law far outside its data) keeps its ``log_mean`` and ``log_sd``, which
        :meth:`p_within` reads, and its steps are clipped to the largest and smallest positive
        floats."""
        return Prediction(
            _exp(log_mean),
            _exp(log_mean - half),
            _exp(log_mean + half),
            log_mean,
            half / Z80 if log_sd is None else log_sd,
        )

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


def _exp(x: float) -> float:
    """``exp(x)`` clipped to the positive floats (``x`` in ``[-708, 709]``)."""
    return math.exp(min(max(x, -708.0), 709.0))


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
    by nonlinear least squares on ``log T``; the interval from the fit's Jacobian).

    Attributes:
        loss: ``linear`` (least squares: the fit follows the mean of ``log T``) or a robust loss
            of :func:`scipy.optimize.least_squares` (``soft_l1``: residuals beyond ``f_scale``
            count about linearly, so the fit follows the median and a configuration's late
            seeds pull it less). A robust fit starts from the least-squares one.
        f_scale: the residual (in ``log T``) where a robust loss turns from square to linear.
    """

    loss: str = "linear"
    f_scale: float = 0.1
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
        tol = {"xtol": 1e-12, "ftol": 1e-12, "gtol": 1e-12, "max_nfev": 2000}
        sol = least_squares(residual, x0, jac=jacobian, bounds=(lower, upper), x_scale="jac", **tol)
        if self.loss != "linear":
            sol = least_squares(
                residual,
                sol.x,
                jac=jacobian,
                bounds=(lower, upper),
                x_scale="jac",
                loss=self.loss,
                f_scale=self.f_scale,
                **tol,
            )
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
        limit = [
            (t, c)
            for t, v, c in zip(self.model.terms, x[1:], self.coef[1:], strict=False)
            if not math.isfinite(v)
        ]
        if limit:  # the term's limit is -inf: its coefficient's sign says where log T goes
            up = [(t, c) for t, c in limit if c > 0]
            if up:
                t, c = up[0]
                return Prediction(
                    0.0,
                    0.0,
                    0.0,
                    -math.inf,
                    0.0,
                    f"{t} is at its limit and its "
                    f"coefficient is {c:+.3f}: the fitted law sends the step to 0 "
                    "there, which is no forecast",
                )
            return Prediction.never(
                f"{limit[0][0]} is at its limit: {self.model.label} predicts no transition"
            )
        mean_, grad = self.model.mean_and_gradient(self.coef, x[None, :], [config])
        mean, g = float(mean_[0]), grad[0]
        sd = self.sigma * math.sqrt(1.0 + float(g @ self.xtx_inv @ g))
        q = float(student.ppf(0.9, self.dof))
        return Prediction.interval(mean, q * sd)

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
    def from_dict(d: Mapping, model: LogLinearLaw) -> FittedLaw:
        """The fit stored by :meth:`to_dict`, of ``model`` (its terms checked against the
        stored ones)."""
        if (
            list(model.terms) != list(d["terms"])
            or model.offset != d["offset"]
            or list(model.extra) != list(d.get("extra", []))
        ):
            raise ValueError(f"the stored law {d['model']!r} has other terms than the code's")
        coef = np.array(d["coef"], float)
        cov = np.array(d["xtx_inv"], float)
        if coef.shape != (len(model.terms) + len(model.extra) + 1,) or cov.shape != (
            len(coef),
            len(coef),
        ):
            raise ValueError(f"the stored law {d['model']!r} has {len(coef)} coefficients")
        return FittedLaw(model, coef, cov, float(d["sigma"]), int(d["dof"]), int(d["n"]))


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
        return Prediction.interval(mean, q * sd)


def _transitioned(rows: pd.DataFrame) -> pd.Series:
    t = pd.to_numeric(rows["transition_step"], errors="coerce")
    return t.notna() & np.isfinite(t) & (t > 0)


def _configs(rows: pd.DataFrame) -> list[dict[str, float]]:
    return rows[list(FIELDS)].astype(float).to_dict("records")


def config_key(rows: pd.DataFrame) -> pd.Series:
    """One label per configuration (the grid's ``point``)."""
    return rows["point"].astype(str)
