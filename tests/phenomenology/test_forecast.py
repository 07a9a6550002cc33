"""The calibrated transition forecast (:mod:`phenomenology.forecast`): known answers on synthetic
curves, the cases with nothing to forecast, the live columns and the forecast figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from phenomenology.forecast import (
    CALIBRATION,
    CALIBRATIONS,
    bank,
    continuations,
    forecast_curve,
    raw_forecast,
    template_loss,
)
from phenomenology.live import FORECAST_COLUMNS, live_every, live_forecast, progress_text

TASK = {"L": 32, "N": 8, "B": 1}
IDENTITY = {"k": 1.0, "k_low": 0.9, "k_high": 1.1}


def _synthetic(beta1_0=-6.0, true_step=3000.0, noise=0.01, seed=0, n=120):
    """A model curve with a known transition: the bank's trajectory from ``beta1_0``, in steps."""
    bk = bank(**TASK)
    j = int(np.argmin(np.abs(bk.beta1 - beta1_0)))
    time_scale = true_step / bk.t_cliff[j]
    true = bk.t_cliff[j] * time_scale
    steps = np.linspace(0, 2 * true, n)
    y = template_loss(steps, task=TASK, beta1_0=beta1_0, time_scale=time_scale)
    y = y + np.random.default_rng(seed).normal(0, noise, n)
    return steps, y, true


@pytest.mark.parametrize("beta1_0, true_step", [(-6.0, 3000.0), (-8.0, 30000.0)])
def test_raw_forecast_finds_the_known_transition_of_a_model_curve(beta1_0, true_step):
    steps, y, true = _synthetic(beta1_0, true_step)
    seen = steps < 0.8 * true
    raw = raw_forecast(steps[seen], y[seen], task=TASK)
    assert raw["raw_step"] == pytest.approx(true, rel=0.05)
    # The calibration multiplies it: the identity calibration gives it back, the default one
    # moves it later by its factor k, with the interval around it.
    fc = forecast_curve(steps[seen], y[seen], task=TASK, calibration=IDENTITY)
    assert fc.step == pytest.approx(raw["raw_step"]) and fc.low < true < fc.high
    fc = forecast_curve(steps[seen], y[seen], task=TASK)
    assert fc.step == pytest.approx(CALIBRATION["k"] * raw["raw_step"])
    assert fc.low < fc.step < fc.high


def test_nothing_to_forecast_is_said_not_guessed():
    steps, y, true = _synthetic()
    few = forecast_curve(steps[:5], y[:5], task=TASK)
    assert not few.ok and few.reason.startswith("cannot forecast: 5 points")
    line = np.linspace(3.4, 0.1, 60)  # a steady decline: no plateau
    fc = forecast_curve(np.arange(60) * 10.0, line, task=TASK)
    assert not fc.ok and "no plateau" in fc.reason
    done = forecast_curve(steps, y, task=TASK)  # the whole curve: the jump is already seen
    assert not done.ok and "already seen" in done.reason
    flat = forecast_curve(np.arange(60) * 10.0, 3.0 + 0.01 * np.sin(np.arange(60)), task=TASK)
    assert not flat.ok and "no transition within 100 times" in flat.reason


def test_a_task_whose_model_has_no_cliff_is_said_not_a_crash():
    # L = N / B: every label is in the context; the model's origin is a critical point and no
    # start of the bank reaches a cliff (README, Fig A.5), so there is nothing to match.
    assert len(bank(L=8, N=8, B=1).t_cliff) == 0
    steps = np.arange(60) * 100.0
    fc = forecast_curve(steps, 2.0 + 0.01 * np.cos(steps), task={"L": 8, "N": 8, "B": 1})
    assert not fc.ok and "no transition on this task (L=8, N=8, B=1)" in fc.reason


def test_live_columns_empty_before_and_after_filled_on_the_plateau_deterministic():
    steps, y, true = _synthetic(n=60)
    rows = [{"step": float(s), "ic_loss": float(v)} for s, v in zip(steps, y, strict=True)]
    seen = []
    for i in range(len(rows)):
        rows[i].update(live_forecast(rows[: i + 1], TASK, every=3))
        seen.append([rows[i][c] for c in FORECAST_COLUMNS])
    seen = np.array(seen)
    assert np.all(np.isnan(seen[:7]))  # fewer than MIN_POINTS rows
    plateau = steps < 0.8 * true
    assert np.isfinite(seen[plateau][-5:]).all()
    assert np.isnan(seen[-5:]).all()  # the jump is seen: no forecast
    # A function of the rows so far: recomputed from the stored rows (a resumed run), the same.
    for i in (10, 25, 40):
        again = live_forecast(rows[: i + 1], TASK, every=3)
        np.testing.assert_array_equal([again[c] for c in FORECAST_COLUMNS], seen[i])
    # Rows between fits carry the last fit.
    fits = [i for i in range(len(rows)) if i % 3 == 0 and np.isfinite(seen[i, 0])]
    assert np.array_equal(seen[fits[0] + 1], seen[fits[0]])
    # An Adam run's live forecast takes the Adam calibration: the same raw step, another factor.
    i = fits[-1]
    base = {k: v for k, v in rows[i].items() if k not in FORECAST_COLUMNS}
    adam = live_forecast([*rows[:i], base], TASK, every=3, optimizer="adam")
    assert adam["forecast_step"] / seen[i, 0] == pytest.approx(
        CALIBRATIONS["adam"]["k"] / CALIBRATIONS["sgd"]["k"]
    )


def test_live_every_and_progress_text():
    assert live_every(3500, 50) == 3  # 71 evaluations -> about 25 fits
    assert live_every(100, 50) == 1
    row = {"forecast_step": 30200.0, "forecast_low": 29100.0, "forecast_high": 31300.0}
    assert progress_text(row) == "30.2k ± 1.1k"
    assert progress_text(dict.fromkeys(FORECAST_COLUMNS, math.nan)) is None


def test_continuations_join_the_curve_and_drop_at_their_transition():
    steps, y, true = _synthetic()
    seen = steps < 0.8 * true
    fc = forecast_curve(steps[seen], y[seen], task=TASK)
    grid = np.linspace(fc.last_step, 3 * fc.high, 2000)
    targets, fan = continuations(fc, grid, task=TASK, n=5)
    assert np.allclose(targets, np.linspace(fc.low, fc.high, 5))
    # Each continuation falls steepest (per log-step) at its own transition step.
    for T, curve in zip(targets, fan, strict=True):
        slope = -np.gradient(curve, np.log(grid))
        assert grid[np.argmax(slope)] == pytest.approx(T, rel=0.03)


def test_the_forecast_figure_draws_the_seen_curve_fan_interval_and_the_rest(tmp_path):
    from interp.viz.dynamics_plots import forecast_figure

    steps, y, true = _synthetic()
    curve = pd.DataFrame({"step": steps, "ic_loss": y})
    fig = forecast_figure(curve, task=TASK, until=0.8 * true, observed_step=true)
    names = [t.name for t in fig.data]
    assert names.count("forecast continuations") == 25
    assert "IC loss: the run went on" in " ".join(str(n) for n in names)
    out = tmp_path / "f.html"
    fig.write_html(out)
    assert out.stat().st_size > 10_000
    with pytest.raises(ValueError, match="--figure: nothing to draw, cannot forecast"):
        forecast_figure(curve, task=TASK, until=steps[4], observed_step=true)


def test_sharpened_cla_is_the_argmax_of_noisy_logits():
    """The Gumbel-max identity behind the CLA map: the argmax of logits ``z + s g`` (Gumbel ``g``)
    lands on a context label as often as the soft CLA at temperature ``s`` says."""
    from phenomenology.fit import sharpened_cla

    L, n, z, s = 32, 8, 0.76, 0.22
    soft = n * math.exp(z) / (n * math.exp(z) + L - n)  # the model's soft CLA, ~0.42
    rng = np.random.default_rng(0)
    logits = np.r_[np.full(n, z), np.zeros(L - n)][None, :] + s * rng.gumbel(size=(200_000, L))
    argmax_cla = float(np.mean(np.argmax(logits, axis=1) < n))
    assert soft == pytest.approx(0.42, abs=0.01) and argmax_cla == pytest.approx(0.91, abs=0.01)
    assert float(sharpened_cla(np.array([soft]), 1 / s, L, n)[0]) == pytest.approx(
        argmax_cla, abs=0.005
    )
    assert float(sharpened_cla(np.array([soft]), 1.0, L, n)[0]) == pytest.approx(soft)
