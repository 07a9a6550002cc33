"""The progress forecaster (:mod:`phenomenology.progress`): the crossing step of an exponentially
growing attention excess, its calibration, its refusals, and how ``fit`` and the live forecast
choose it."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from phenomenology.forecast import CALIBRATIONS
from phenomenology.progress import (
    PROGRESS_CALIBRATIONS,
    THRESHOLD,
    progress_forecast,
    raw_progress_forecast,
)
from tests.phenomenology.test_fit_cli import _fit, _one_line_error

BASE, A, RATE = 0.0588, 1e-3, 3e-4  # tila2 = BASE (1 + A exp(RATE t))
CROSS = math.log(THRESHOLD / A) / RATE  # where the excess reaches THRESHOLD: 20715.3
# Seen up to 90% of the template's cliff at 20000 (the loss curve of the fit tests), where the
# excess is A exp(5.4) = 0.22, above MIN_EXCESS.
STEPS = CURVE = np.arange(0, 18001, 250.0)


def _tila2(steps=STEPS, rate=RATE):
    """BASE at step 0 (the untrained network's uniform attention), then an excess of exactly
    ``A exp(rate t)`` over it."""
    steps = np.asarray(steps)
    return np.where(steps == 0, BASE, BASE * (1 + A * np.exp(rate * steps)))


def test_the_raw_forecast_is_the_crossing_of_an_exact_exponential():
    raw = raw_progress_forecast(STEPS, _tila2())
    assert raw["raw_step"] == pytest.approx(CROSS, rel=1e-9)
    assert raw["rate"] == pytest.approx(RATE, rel=1e-9)
    assert raw["baseline"] == BASE
    # the window: the last 30% of the steps, 12750..18000 every 250 steps
    assert raw["n_fit"] == 22
    assert raw["excess_last"] == pytest.approx(A * math.exp(RATE * 18000), rel=1e-9)


def test_the_forecast_is_the_calibrated_crossing():
    cal = PROGRESS_CALIBRATIONS["sgd"]
    fc = progress_forecast(STEPS, _tila2())
    assert fc.ok and fc.detail["method"] == "progress"
    raw = fc.raw_step
    assert (fc.step, fc.low, fc.high) == pytest.approx(
        (cal["k"] * raw, cal["k_low"] * raw, cal["k_high"] * raw), rel=1e-12
    )
    # a calibration given explicitly replaces the optimiser's
    fc2 = progress_forecast(STEPS, _tila2(), calibration={"k": 2, "k_low": 1.5, "k_high": 3})
    assert (fc2.step, fc2.low, fc2.high) == pytest.approx((2 * raw, 1.5 * raw, 3 * raw))


@pytest.mark.parametrize(
    ("values", "optimizer", "reason"),
    [
        (_tila2(rate=-3e-4), None, "not growing"),  # the excess shrinks
        # seen only to step 12000: the excess is 0.037, below the calibrated range
        (np.where(STEPS <= 12000, _tila2(), np.nan), None, "only 4% above its start"),
        (np.full(STEPS.size, BASE), None, "above its first value at 0 points"),
        (_tila2(), "adam", "calibrated for ['sgd'] only"),
        # the attention has jumped (0.06 -> 0.7 in the last points): the transition is seen
        (np.r_[_tila2()[:-6], np.full(6, 0.7)], None, "already seen"),
    ],
)
def test_what_cannot_be_forecast_says_why(values, optimizer, reason):
    fc = progress_forecast(STEPS, values, optimizer=optimizer)
    assert not fc.ok and fc.step is None
    assert fc.reason.startswith("cannot forecast: ") and reason in fc.reason, fc.reason


def _plateau_curve(folder, columns=("ic_loss", "tila2")):
    """``folder/c.csv``: IC loss on a plateau (the nested-logit template, its cliff at 20000) and
    TILA2."""
    from phenomenology.forecast import bank, template_loss

    task = {"L": 32, "N": 8, "B": 2}
    bk = bank(**task)
    j = int(np.argmin(np.abs(bk.beta1 + 6.0)))
    loss = template_loss(
        CURVE, task=task, beta1_0=float(bk.beta1[j]), time_scale=20000.0 / bk.t_cliff[j]
    )
    df = pd.DataFrame({"step": CURVE, "ic_loss": loss, "tila2": _tila2(CURVE)})
    df = df[["step", *columns]]
    folder.mkdir(exist_ok=True)
    path = folder / "c.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_picks_the_progress_forecast_where_it_can(tmp_path, capsys):
    csv = _plateau_curve(tmp_path)
    k = PROGRESS_CALIBRATIONS["sgd"]["k"]
    fig = tmp_path / "forecast.html"
    rc, out, err = _fit(
        capsys, csv, "--set", "B=2", "--n-boot", "0", "--until", "18000", "--figure", fig
    )
    assert rc == 0, err
    got = json.loads(csv.with_name("c.forecast.json").read_text())
    assert got["forecast_from"] == "progress"
    assert got["forecast_transition_step"] == pytest.approx(k * CROSS, rel=1e-6)
    assert "progress forecast" in out
    # the figure has the progress panel: the excess, its fitted growth and the threshold
    html = fig.read_text()
    assert "fitted exponential growth" in html and "threshold 0.5" in html
    # --method template: the template forecast of the same loss curve, near the template's cliff
    rc, out, err = _fit(capsys, csv, "--set", "B=2", "--n-boot", "0", "--method", "template")
    assert rc == 0, err
    got = json.loads(csv.with_name("c.fit.json").read_text())
    assert got["forecast_from"] == "template"
    # the template calibration (forecast = k * raw) of SGD, read from where it is defined
    assert got["forecast_transition_step"] == pytest.approx(
        CALIBRATIONS["sgd"]["k"] * 20000, rel=0.1
    )
    # (auto on a curve without tila2 is the template: test_fit_cli's calibration test)


def test_fit_method_progress_refuses_what_it_cannot_use(tmp_path, capsys):
    bare = _plateau_curve(tmp_path, columns=("ic_loss",))
    rc, _, err = _fit(capsys, bare, "--method", "progress")
    _one_line_error(rc, err, str(bare), "'tila2'", "--progress-column")
    assert not bare.with_name("c.fit.json").exists()
    both = _plateau_curve(tmp_path / "both")
    rc, _, err = _fit(capsys, both, "--method", "progress", "--optimizer", "adam")
    _one_line_error(rc, err, "calibrated for ['sgd'] only", "adam")
    rc, _, err = _fit(capsys, both, "--method", "progress", "--progress-column", "nope")
    _one_line_error(rc, err, "'nope'", "does not exist")


def test_the_live_forecast_reads_the_progress_measure_on_sgd_runs():
    from phenomenology.forecast import bank, template_loss
    from phenomenology.live import live_forecast

    task = {"L": 32, "N": 8, "B": 2}
    bk = bank(**task)
    j = int(np.argmin(np.abs(bk.beta1 + 6.0)))
    loss = template_loss(
        CURVE, task=task, beta1_0=float(bk.beta1[j]), time_scale=20000.0 / bk.t_cliff[j]
    )
    rows = [{"step": s, "ic_loss": v, "tila2": t} for s, v, t in zip(CURVE, loss, _tila2(CURVE))]
    sgd = live_forecast(rows, task, optimizer="sgd")
    assert sgd["forecast_step"] == pytest.approx(PROGRESS_CALIBRATIONS["sgd"]["k"] * CROSS)
    # Adam has no progress calibration: the template forecast, as for rows without tila2
    adam = live_forecast(rows, task, optimizer="adam")
    bare = live_forecast(
        [{k: v for k, v in r.items() if k != "tila2"} for r in rows], task, optimizer="adam"
    )
    assert adam == bare and math.isfinite(adam["forecast_step"])
    assert adam["forecast_step"] != pytest.approx(sgd["forecast_step"], rel=0.01)
