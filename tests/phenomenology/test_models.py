"""The dynamics-model registry: models from outside the package, any number of parameters, and
the one estimator that fits them all (known answers: curves made by a model with known
parameters)."""

import math
from pathlib import Path

import numpy as np
import pytest

from interp.io.plugins import load_plugins
from phenomenology import DynamicsFit, model_names, register_model
from phenomenology.landscape import flow
from phenomenology.models import get_model, unregister_model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "extra_model.py"
STEPS = np.arange(0.0, 60001.0, 300.0)
TRUTH = {"height": 2.0, "t_mid": 30000.0, "width": 1500.0}


@pytest.fixture(scope="module")
def extra():
    (module,) = load_plugins([str(FIXTURE)])
    return module


@pytest.fixture(scope="module")
def step_curve(extra):
    rng = np.random.default_rng(0)
    clean = extra.logistic_step(STEPS, TRUTH, {})["loss"]
    return clean + rng.normal(0.0, 0.01, STEPS.size)


def test_model_from_a_file_outside_the_package_is_registered(extra):
    assert "logistic-step" in model_names() and "nested-logit" in model_names()
    assert get_model("logistic-step").predicts == {"ic_loss": "loss"}
    assert load_plugins([str(FIXTURE)])[0] is extra  # loading twice imports once


def test_list_models_lists_every_registered_model_plugins_included(extra, capsys):
    from interp.cli import main

    assert main(["--plugin", str(FIXTURE), "list", "models"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == model_names() and "logistic-step" in listed


def test_fit_recovers_the_parameters_of_a_registered_curve_model(step_curve):
    est = DynamicsFit("logistic-step", target="ic_loss").fit(STEPS, step_curve)
    for name, value in TRUTH.items():
        assert est.params_[name] == pytest.approx(value, rel=0.03)
        assert 0 < est.stderr_[name] < 0.05 * value
    assert est.r2_ > 0.99
    # Steepest drop per log-step: t g(t) peaks where 2 sigma - 1 = width / t, about
    # t_mid + 0.1 width for this curve.
    assert est.transition_step_ == pytest.approx(TRUTH["t_mid"] + 0.1 * TRUTH["width"], rel=0.01)
    low, high = est.transition_interval_
    assert low < est.transition_step_ < high and high - low < 0.1 * TRUTH["t_mid"]
    assert "block bootstrap" in est.interval_method_
    curves = est.predict_curves(STEPS)
    assert {"step", "loss", "ic_loss"} <= set(curves.columns)
    summary = est.summary()
    assert (
        summary["model"] == "logistic-step" and summary["params"]["t_mid"] == est.params_["t_mid"]
    )


def test_flow_integrates_a_loss_of_any_number_of_parameters():
    """Gradient flow of 0.5 (a^2 + 4 b^2): a = a0 e^-t, b = b0 e^-4t (two parameters, not the
    nested-logit's three)."""
    t = np.linspace(0.0, 2.0, 21)
    traj = flow(
        lambda p, task: 0.5 * (p["a"] ** 2 + 4 * p["b"] ** 2),
        {"a": 1.0, "b": -2.0},
        t_eval=t,
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_allclose(traj["a"], np.exp(-t), rtol=1e-5)
    np.testing.assert_allclose(traj["b"], -2.0 * np.exp(-4 * t), rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(
        traj["loss"], 0.5 * (np.exp(-2 * t) + 16 * np.exp(-8 * t)), rtol=1e-4
    )


def test_loss_model_recovers_time_scale_and_start():
    """A one-parameter loss model: loss = u^2 / 2 flows as u0 e^(-step / time_scale)."""
    register_model(
        "decay-test",
        params=("u",),
        bounds={"u": (0.0, 10.0)},
        start=[{"u": 1.0}, {"u": 3.0}],
        loss=lambda p, task: 0.5 * p["u"] ** 2,
        predicts={"ic_loss": "loss"},
        replace=True,
    )
    try:
        steps = np.linspace(0.0, 5000.0, 60)
        y = 0.5 * 2.0**2 * np.exp(-2 * steps / 1000.0)
        est = DynamicsFit("decay-test", n_boot=0).fit(steps, y)
        assert est.params_["time_scale"] == pytest.approx(1000.0, rel=0.01)
        assert est.params_["u_0"] == pytest.approx(2.0, rel=0.01)
        assert math.isinf(est.transition_step_)  # a smooth decay is no transition
    finally:
        unregister_model("decay-test")


def test_registry_errors_name_the_problem(extra):
    with pytest.raises(ValueError, match="already registered"):
        register_model(
            "logistic-step",
            params=("a",),
            start={"a": 1},
            curve=lambda s, p, t: {},
            predicts={"ic_loss": "loss"},
        )
    with pytest.raises(ValueError, match="exactly one of curve= and loss="):
        register_model("x", params=("a",), start={"a": 1}, predicts={"ic_loss": "loss"})
    with pytest.raises(ValueError, match="bounds"):
        register_model(
            "x",
            params=("a",),
            bounds={"b": (0, 1)},
            start={"a": 1},
            curve=lambda s, p, t: {},
            predicts={"ic_loss": "loss"},
        )
    with pytest.raises(
        ValueError, match=r"model='nope' is invalid: registered models are .*logistic-step"
    ):
        DynamicsFit("nope").fit(STEPS, np.zeros_like(STEPS))
    with pytest.raises(ValueError, match="predicts"):
        DynamicsFit("logistic-step", target="ic_acc").fit(STEPS, np.zeros_like(STEPS))
    with pytest.raises(ValueError, match="bad options"):
        DynamicsFit("nested-logit", task={"L": 32, "N": 8, "B": 2}, options={"flor": 1}).fit(
            STEPS, np.zeros_like(STEPS)
        )


def test_nested_logit_is_one_registered_model():
    from phenomenology.fit import NestedLogitFit, NestedLogitModel

    assert get_model("nested-logit") is NestedLogitModel
    assert issubclass(NestedLogitFit, DynamicsFit)
    est = NestedLogitFit(L=32, N=8, B=2, free_floor=False)
    model = est._build()
    assert model.param_names() == ("log_time_scale", "beta1_0", "xi_0")  # no floor when fixed


def test_the_built_in_model_is_registered_whichever_module_is_imported_first():
    """``fit --model`` and ``list models`` look the registry up before anything imports the
    fitters: the nested-logit model must be there all the same (a fresh process)."""
    import subprocess
    import sys

    code = "from phenomenology.models import model_names; print(model_names())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "nested-logit" in out.stdout
