"""A fitted parameter that ends at its bound is marked and gets no standard error."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from phenomenology.estimator import _at_bound
from phenomenology.fit import DynamicsFit
from phenomenology.models import register_model, unregister_model

STEPS = np.linspace(0.0, 1000.0, 60)


@pytest.fixture
def decay_model():
    register_model(
        "test-bounded-decay",
        params=("floor", "height", "tau"),
        bounds={"height": (0.0, 1.0), "tau": (1.0, 1e5)},
        start=lambda steps, y, task: {"floor": 0.0, "height": 0.5, "tau": 100.0},
        curve=lambda steps, p, task: {"loss": p["floor"] + p["height"] * np.exp(-steps / p["tau"])},
        predicts={"ic_loss": "loss"},
    )
    yield "test-bounded-decay"
    unregister_model("test-bounded-decay")


def test_a_parameter_pushed_to_its_bound_is_pinned(decay_model):
    rng = np.random.default_rng(0)
    y = 0.5 + 2.0 * np.exp(-STEPS / 200.0) + rng.normal(0, 0.01, STEPS.size)  # height 2 > bound 1
    est = DynamicsFit(decay_model, n_boot=0).fit(STEPS, y)
    assert est.params_["height"] == pytest.approx(1.0, abs=1e-6)
    assert est.pinned_ == {"height": "upper"}
    assert est.stderr_["height"] is None
    for name in ("floor", "tau"):  # the free ones keep a positive, finite error
        assert 0 < est.stderr_[name] < np.inf
    summary = est.summary()
    assert summary["pinned"] == {"height": "upper"} and summary["stderr"]["height"] is None


def test_a_fit_inside_its_bounds_pins_nothing(decay_model):
    rng = np.random.default_rng(1)
    y = 0.5 + 0.6 * np.exp(-STEPS / 200.0) + rng.normal(0, 0.01, STEPS.size)
    est = DynamicsFit(decay_model, n_boot=0).fit(STEPS, y)
    assert est.pinned_ == {}
    assert est.params_["height"] == pytest.approx(0.6, abs=0.05)
    assert all(0 < se < np.inf for se in est.stderr_.values())


def test_at_bound_reads_finite_bounds_only():
    lower = np.array([-np.inf, 0.0, -40.0])
    upper = np.array([np.inf, 1.0, 40.0])
    got = _at_bound(np.array([1e9, 1.0, 40.0 - 1e-8]), lower, upper)
    assert got.tolist() == [False, True, True]
    assert _at_bound(np.array([0.0, 0.5, 39.9]), lower, upper).tolist() == [False] * 3


def test_fit_prints_the_pinned_parameter_as_not_estimated(capsys):
    from interp.cli.commands.fit import _print_fit

    result = {
        "task": {"L": 32},
        "model": "m",
        "column": "ic_loss",
        "params": {"a": 1.0, "b": 40.0},
        "stderr": {"a": 0.1, "b": None},
        "pinned": {"b": "upper"},
        "r2": 0.9,
        "n_points_fitted": 10,
        "fitted_until": 100.0,
        "r2_all": 0.9,
        "forecast": "no",
        "observed": {"transitioned": False, "reason": "r", "method": "cliff"},
    }
    _print_fit(result, SimpleNamespace(source="x", task_note="y"))
    lines = capsys.readouterr().out.splitlines()
    b = next(line for line in lines if line.split()[0] == "b")
    assert b.split()[1:3] == ["40", "-"] and "upper bound: not estimated" in b
    a = next(line for line in lines if line.split()[0] == "a")
    assert "bound" not in a
