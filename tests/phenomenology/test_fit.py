"""The nested-logit fit recovers what generated a curve, and works on run directories."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from phenomenology.fit import NestedLogitFit, fit_run, forecast_transition
from phenomenology.landscape import detect_cliff, gradient_flow

TASK = {"L": 32, "N": 8, "B": 2}
TIME_SCALE = 100.0  # steps per unit of model time
START = {"beta1": -6.0, "alpha": 0.0, "xi": 0.5}
STEPS = np.arange(0.0, 60001.0, 300.0)


@pytest.fixture(scope="module")
def truth():
    return gradient_flow(START, **TASK, t_eval=STEPS / TIME_SCALE)


@pytest.fixture(scope="module")
def noisy(truth):
    rng = np.random.default_rng(0)
    noise = lambda: rng.normal(0.0, 0.02, STEPS.size)  # noqa: E731
    return pd.DataFrame(
        {
            "step": STEPS,
            "ic_loss": truth["loss"] + noise(),
            "ic_acc": truth["acc"] + noise(),
            "ila1": 0.1 + 0.8 * truth["s1"] + noise(),
            "tila2": truth["p"] + noise(),
            "cla": truth["cla"] + noise(),
        }
    )


@pytest.fixture(scope="module")
def true_transition():
    t = np.geomspace(1e-2, 1e4, 20000)
    traj = gradient_flow(START, **TASK, t_eval=np.r_[0.0, t])
    return detect_cliff(t, traj["loss"].to_numpy()[1:]).transition * TIME_SCALE


def test_fit_recovers_time_scale_and_start(noisy, true_transition):
    est = NestedLogitFit(**TASK).fit(noisy["step"], noisy["ic_loss"])
    assert est.time_scale_ == pytest.approx(TIME_SCALE, rel=0.03)
    assert est.start_["beta1"] == pytest.approx(START["beta1"], rel=0.03)
    assert est.start_["xi"] == pytest.approx(START["xi"], abs=0.1)
    assert est.start_["alpha"] == 0.0  # fixed by default
    assert est.score(noisy["step"], noisy["ic_loss"]) > 0.99
    assert est.r2_ > 0.99
    assert est.transition_step_ == pytest.approx(true_transition, rel=0.02)
    # Uncertainties: finite, positive, and the truth within 4 standard errors.
    for name, value in (("time_scale", TIME_SCALE), ("beta1_0", START["beta1"])):
        se = est.stderr_[name]
        assert 0 < se < np.inf
        assert abs(est.params_[name] - value) < 4 * se
    assert 0 < est.transition_step_stderr_ < 0.05 * est.transition_step_
    assert est.floor_ == pytest.approx(0.0, abs=0.02)


def test_fit_accuracy_target(noisy):
    est = NestedLogitFit(**TASK, target="ic_acc").fit(noisy["step"], noisy["ic_acc"])
    # The accuracy moves less in the first phase than the loss: the time scale is looser.
    assert est.time_scale_ == pytest.approx(TIME_SCALE, rel=0.1)
    assert est.score(noisy["step"], noisy) > 0.99
    assert "floor" not in est.params_


def test_joint_fit_with_attention_curves(noisy):
    est = NestedLogitFit(**TASK, aux=("ila1", "tila2", "cla")).fit(noisy["step"], noisy)
    assert est.time_scale_ == pytest.approx(TIME_SCALE, rel=0.03)
    assert est.start_["beta1"] == pytest.approx(START["beta1"], rel=0.03)
    a, b = est.aux_maps_["ila1"]
    assert a == pytest.approx(0.1, abs=0.02) and b == pytest.approx(0.8, rel=0.05)
    curves = est.predict_curves(noisy["step"])
    for col in ("step", "t", "beta1", "alpha", "xi", "s1", "p", "loss", "acc", "cla", "ila1"):
        assert col in curves.columns


def test_estimator_api():
    est = NestedLogitFit(**TASK, free_floor=False)
    assert est.get_params()["free_floor"] is False
    est.set_params(target="ic_acc")
    assert clone(est).target == "ic_acc"
    with pytest.raises(NotFittedError):
        est.predict(STEPS)
    with pytest.raises(ValueError, match="target"):
        NestedLogitFit(**TASK, target="iw_loss").fit(STEPS, np.zeros_like(STEPS))
    with pytest.raises(ValueError, match="L must"):
        NestedLogitFit(L=2, N=8, B=2).fit(STEPS, np.zeros_like(STEPS))
    with pytest.raises(ValueError, match="maps"):
        NestedLogitFit(**TASK, maps={"cla": "cubic"}).fit(STEPS, np.zeros_like(STEPS))
    with pytest.raises(ValueError, match="DataFrame"):
        NestedLogitFit(**TASK, aux=("cla",)).fit(STEPS, np.zeros_like(STEPS))


def _write_run(path, metrics):
    path.mkdir()
    config = {
        "format_version": 1,
        "task": {"L": 32, "N": 8, "B": 2, "B_eval": None, "D": 63, "K": 512},
        "model": {},
        "train": {},
    }
    (path / "config.json").write_text(json.dumps(config))
    metrics.to_csv(path / "metrics.csv", index=False)


def test_fit_run_writes_fit_json(tmp_path, noisy, true_transition):
    run = tmp_path / "run"
    _write_run(run, noisy.assign(step=noisy["step"].astype(int)))
    out = fit_run(run)
    saved = json.loads((run / "fit.json").read_text())
    assert saved == out
    assert saved["r2"] > 0.99 and saved["r2_all"] > 0.99
    assert saved["transition_step"] == pytest.approx(true_transition, rel=0.02)
    for key in ("time_scale", "beta1_0", "xi_0", "floor"):
        assert key in saved["params"] and key in saved["stderr"]
    assert saved["observed"]["transition_step"] == pytest.approx(true_transition, rel=0.05)


def test_forecast_from_the_plateau(tmp_path, truth, true_transition):
    rng = np.random.default_rng(1)
    noise = lambda: rng.normal(0.0, 0.005, STEPS.size)  # noqa: E731
    metrics = pd.DataFrame(
        {"step": STEPS, "ic_loss": truth["loss"] + noise(), "cla": truth["cla"] + noise()}
    )
    run = tmp_path / "run"
    _write_run(run, metrics)
    out = forecast_transition(run, 0.8, aux=("cla",))
    assert out["aux"] == ["cla"]
    assert out["cutoff_step"] < out["observed"]["onset_step"]
    assert out["n_points_fitted"] < 0.5 * len(metrics)
    assert out["actual_step"] == pytest.approx(true_transition, rel=0.05)
    # On the model's own curves, the forecast from 80% of the plateau lands within 10%.
    assert abs(out["relative_error"]) < 0.1
    assert 0 < out["forecast_stderr"] < np.inf


def test_forecast_from_a_dataframe_needs_the_task(noisy):
    with pytest.raises(ValueError, match="L, N and B"):
        forecast_transition(noisy, 0.8)
    with pytest.raises(ValueError, match="fraction_of_plateau"):
        forecast_transition(noisy, 1.5, **TASK)


def test_the_loss_floor_is_bounded_at_zero(truth):
    """A curve that ends below the model's zero (a shift of -0.15, as noisy real IC losses pull a
    free floor negative) gets floor 0, never a negative cross-entropy; a positive floor is kept."""
    below = NestedLogitFit(**TASK).fit(STEPS, truth["loss"] - 0.15 * (truth["loss"] < 1.0))
    assert 0.0 <= below.floor_ < 1e-9  # at the bound (the unbounded fit goes negative)
    above = NestedLogitFit(**TASK).fit(STEPS, 0.3 + (1 - 0.3 / np.log(32)) * truth["loss"])
    assert above.floor_ == pytest.approx(0.3, abs=0.01)
