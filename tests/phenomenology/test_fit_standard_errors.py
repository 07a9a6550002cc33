"""The standard errors a fit reports, against the ordinary-least-squares closed form: a model that
is linear in its parameters, fitted by the same code path as any dynamics model, must report
``sqrt(diag(s^2 (X'X)^-1))`` with ``s^2 = RSS / (n - p)`` (the residual variance as the fit
estimates it), exactly and not merely within a few standard errors of the truth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from phenomenology import DynamicsFit, register_model
from phenomenology.law_forms import FIELDS, LogLinearLaw
from phenomenology.models import unregister_model

STEPS = np.arange(0.0, 1025.0, 25.0)  # 41 points
X = STEPS / 1000.0


def _ols(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients and their standard errors, the textbook way."""
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    s2 = resid @ resid / (len(y) - design.shape[1])
    return coef, np.sqrt(np.diag(s2 * np.linalg.inv(design.T @ design)))


@pytest.fixture
def quadratic():
    """A curve model ``a + b x + c x^2`` (``x = step / 1000``), registered for the test."""
    register_model(
        "quadratic-ols-test",
        params=("a", "b", "c"),
        start={"a": 0.0, "b": 0.0, "c": 0.0},
        curve=lambda steps, p, task: {
            "loss": p["a"] + p["b"] * steps / 1000.0 + p["c"] * (steps / 1000.0) ** 2
        },
        predicts={"ic_loss": "loss"},
    )
    yield "quadratic-ols-test"
    unregister_model("quadratic-ols-test")


def test_a_linear_model_reports_the_ols_standard_errors(quadratic):
    rng = np.random.default_rng(3)
    y = 2.0 - 1.5 * X + 0.4 * X**2 + rng.normal(0.0, 0.05, X.size)
    fit = DynamicsFit(model=quadratic, task={}, n_starts=1, n_boot=0).fit(STEPS, y)
    design = np.column_stack([np.ones_like(X), X, X**2])
    coef, se = _ols(design, y)
    got = fit.params_
    assert [got["a"], got["b"], got["c"]] == pytest.approx(list(coef), rel=1e-6)
    assert fit.pinned_ == {}
    for name, want in zip(("a", "b", "c"), se, strict=True):
        assert fit.stderr_[name] == pytest.approx(want, rel=1e-3), name
    # the summary (what fit.json holds) carries the same errors
    assert fit.summary()["stderr"] == pytest.approx(fit.stderr_, rel=1e-12)


def test_the_errors_scale_with_the_noise_not_with_the_curves_scale(quadratic):
    # the residuals are divided by the curve's scale inside the fit: that must cancel out
    rng = np.random.default_rng(4)
    noise = rng.normal(0.0, 1.0, X.size)
    fits = []
    for k in (1.0, 10.0):
        y = k * (2.0 - 1.5 * X + 0.4 * X**2 + 0.05 * noise)
        fit = DynamicsFit(model=quadratic, task={}, n_starts=1, n_boot=0).fit(STEPS, y)
        fits.append(fit.stderr_["b"])
        _, se = _ols(np.column_stack([np.ones_like(X), X, X**2]), y)
        assert fit.stderr_["b"] == pytest.approx(se[1], rel=1e-3)
    assert fits[1] == pytest.approx(10.0 * fits[0], rel=1e-3)


def _law_rows() -> pd.DataFrame:
    """Runs at six learning rates and three context lengths, with known log-linear steps and a
    fixed, uneven scatter."""
    rows = []
    scatter = [0.11, -0.07, 0.02, -0.13, 0.05, 0.09, -0.02, -0.06, 0.12]
    i = 0
    for lr in (0.005, 0.01, 0.02, 0.03, 0.05, 0.1):
        for N in (4, 8, 16):
            log_t = 5.0 - 1.0 * math.log(lr) + 0.8 * math.log(N) + scatter[i % len(scatter)]
            i += 1
            base = {"K": 256, "L": 32, "N": N, "B": 1, "eps": 0.1, "p_C": 0.8, "lr": lr}
            rows.append(base | {"batch_size": 128, "transition_step": math.exp(log_t)})
    return pd.DataFrame(rows)


def test_the_transition_laws_errors_are_the_ols_closed_form():
    rows = _law_rows()
    assert set(FIELDS) <= set(rows.columns)
    law = LogLinearLaw("test", "a test law", ("log lr", "log N"))
    fitted = law.fit(rows)
    design = np.column_stack(
        [np.ones(len(rows)), np.log(rows["lr"].to_numpy()), np.log(rows["N"].to_numpy())]
    )
    coef, se = _ols(design, np.log(rows["transition_step"].to_numpy()))
    assert list(fitted.coefficients().values()) == pytest.approx(list(coef), rel=1e-9)
    got = fitted.stderr()
    for name, want in zip(("intercept", "log lr", "log N"), se, strict=True):
        assert got[name] == pytest.approx(want, rel=1e-6), name
    assert fitted.dof == len(rows) - 3
