"""The live forecast's thinning (:func:`phenomenology.live.thin`) given more points than its
limit: exactly the limit kept, evenly spread, the first and the newest among them; and each
forecaster of :func:`phenomenology.live.live_forecast` is handed those points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phenomenology import live, prior
from phenomenology.forecast import Forecast
from phenomenology.live import LIVE_MAX_POINTS, thin
from phenomenology.transition_law import Prediction


@pytest.mark.parametrize(("n", "limit"), [(81, 80), (200, 80), (1001, 80), (12, 5), (7, 2)])
def test_a_curve_over_the_limit_keeps_the_documented_points(n, limit):
    idx = thin(n, limit)
    assert len(idx) == limit
    assert idx[0] == 0 and idx[-1] == n - 1  # the first and the newest point
    assert np.all(np.diff(idx) > 0)
    # the documented points: evenly spread from the first to the newest, rounded
    want = [round(k * (n - 1) / (limit - 1)) for k in range(limit)]
    assert list(idx) == want


def test_a_curve_within_the_limit_is_kept_whole():
    assert list(thin(80)) == list(range(80))
    assert list(thin(3, 3)) == [0, 1, 2]


def test_the_default_limit_is_the_live_forecasts():
    idx = thin(500)
    assert len(idx) == LIVE_MAX_POINTS and idx[-1] == 499


N_ROWS = 300  # evaluations: more than the limit


def _rows(with_tila2: bool = False) -> list[dict]:
    """A flat IC loss (a plateau, no transition) at steps 0, 10, ..., and TILA2 if asked."""
    rows = []
    for i in range(N_ROWS):
        row = {"step": 10.0 * i, "ic_loss": 3.0 + 0.001 * math.sin(i)}
        if with_tila2:
            row["tila2"] = 0.05 + 1e-5 * i
        rows.append(row)
    return rows


def _want_steps() -> np.ndarray:
    return 10.0 * np.array([round(k * (N_ROWS - 1) / (LIVE_MAX_POINTS - 1)) for k in range(80)])


def test_the_template_forecast_is_fitted_to_the_thinned_curve(monkeypatch):
    seen = {}

    def fake(steps, y, **kw):
        seen["steps"] = np.asarray(steps, float)
        return Forecast(5000.0, 4000.0, 6000.0, float(np.asarray(steps)[-1]))

    monkeypatch.setattr(live, "forecast_curve", fake)
    out = live.live_forecast(_rows(), {"L": 32, "N": 8, "B": 2}, optimizer="adam")
    assert out["forecast_step"] == 5000.0
    assert len(seen["steps"]) == LIVE_MAX_POINTS
    assert seen["steps"][0] == 0.0 and seen["steps"][-1] == 10.0 * (N_ROWS - 1)  # the newest
    assert list(seen["steps"]) == list(_want_steps())


def test_the_progress_forecast_is_fitted_to_the_thinned_curve(monkeypatch):
    seen = {}

    def fake(steps, values, **kw):
        seen["steps"] = np.asarray(steps, float)
        return Forecast(5000.0, 4000.0, 6000.0, float(np.asarray(steps)[-1]))

    monkeypatch.setattr(live, "progress_forecast", fake)
    monkeypatch.setattr(live, "plateau_problem", lambda *a, **k: None)
    out = live.live_forecast(_rows(with_tila2=True), {"L": 32, "N": 8, "B": 2}, optimizer="sgd")
    assert out["forecast_step"] == 5000.0
    assert list(seen["steps"]) == list(_want_steps())


def test_the_curve_that_updates_the_prior_is_the_thinned_curve(monkeypatch):
    seen = {}

    def fake(part, task, *, extended):
        seen["steps"] = part["step"].to_numpy(float)
        return None, None

    monkeypatch.setattr(prior, "curve_step", fake)
    law = Prediction.interval(math.log(20000.0), 0.3)
    out = live.live_forecast(_rows(), {"L": 32, "N": 8, "B": 2}, prior=law, calibration={})
    assert math.isfinite(out["forecast_step"])
    assert list(seen["steps"]) == list(_want_steps())
