"""Transience: the fade of in-context accuracy read off a curve, Wurgaft's exponent in K, and the
forecasts registered for the long runs."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.catalog import law_axes
from experiments.catalog.transience import (
    AUTHOR_WD,
    KS,
    NAME,
    WEIGHT_DECAYS,
    _reverse,
    _wurgaft,
    fading,
    point_name,
)


def _curve(ic, iw):
    return pd.DataFrame({"step": [500 * i for i in range(len(ic))], "ic_acc": ic, "iw_acc": iw})


def test_a_fade_is_the_first_step_after_the_peak_at_half_its_excess_over_chance():
    # chance 1/32; peak 0.9 at step 1000: half its excess is 0.03125 + 0.434375 = 0.465625
    c = _curve(
        [0.03, 0.5, 0.9, 0.7, 0.5, 0.46, 0.3, 0.6], [0.03, 0.2, 0.4, 0.7, 0.8, 0.75, 0.9, 0.6]
    )
    f = fading(c, labels=32)
    assert f["peak_ic_acc"] == 0.9 and f["peak_ic_step"] == 1000.0
    assert f["faded"] and f["fade_step"] == 2500.0  # 0.46 <= 0.4656 (0.5 is above it)
    assert f["final_ic_acc"] == 0.6
    assert (f["peak_iw_acc"], f["peak_iw_step"], f["final_iw_acc"]) == (0.9, 3000.0, 0.6)
    assert not f["iw_faded"]  # 0.6 after its peak 0.9 is above 0.4656


def test_in_weight_accuracy_that_falls_after_the_in_context_jump_is_the_reverse_transience():
    # IW peaks at 0.7 (step 500), then falls to 0.2 <= 0.03125 + 0.334375 once IC has jumped
    c = _curve([0.03, 0.05, 0.95, 0.99], [0.03, 0.7, 0.6, 0.2])
    f = fading(c, labels=32)
    assert f["iw_faded"] and not f["faded"]
    rows = pd.DataFrame(
        [
            {**f, "transitioned": "True", "transition_step": 800.0},
            {**f, "transitioned": "True", "transition_step": 400.0},  # IW peaked after it
            {**f, "transitioned": "False", "transition_step": math.nan},
        ]
    )
    line = _reverse(rows)[0]
    assert "In-context accuracy faded in 0 of 3 runs" in line
    assert "faded after it, with in-context accuracy holding, in 1 of 3" in line


def test_a_curve_that_holds_its_peak_has_no_fade_and_a_dip_before_the_peak_is_not_one():
    c = _curve([0.03, 0.02, 0.6, 0.99, 0.97, 0.98], [0.05] * 6)
    f = fading(c, labels=32)
    assert not f["faded"] and math.isnan(f["fade_step"])
    assert f["peak_ic_step"] == 1500.0


def _faded(medians: dict) -> pd.DataFrame:
    rows = []
    for k, step in medians.items():
        for jitter in (0.9, 1.0, 1.1):
            rows.append({"K": k, "weight_decay": 0.0, "faded": True, "fade_step": step * jitter})
    return pd.DataFrame(rows)


def test_wurgafts_exponent_is_the_fade_steps_power_in_k():
    lines = "\n".join(_wurgaft(_faded({64: 8000.0, 256: 40000.0})))
    assert "K^1.16" in lines and "superlinear, as Wurgaft" in lines  # log 5 / log 4
    lines = "\n".join(_wurgaft(_faded({64: 8000.0, 256: 16000.0})))
    assert "K^0.50" in lines and "not superlinear" in lines
    lines = "\n".join(_wurgaft(_faded({64: 8000.0})))
    assert "cannot be tested" in lines and "K 64" in lines


def test_every_long_run_has_its_forecast_registered_the_law_only_where_it_has_data():
    reg = law_axes.read_registry()
    mine = reg[reg["experiment"] == NAME].set_index(["point", "hypothesis"])
    for k in KS:
        for wd in WEIGHT_DECAYS:
            law = mine.loc[(point_name(k, wd), "law")]
            if k == 64:  # below the law's K (128 to 1024): it says so and forecasts nothing
                assert "K=64 is outside the law's data" in law["says"] and math.isnan(law["step"])
            elif wd == AUTHOR_WD:
                assert law["says"] == "the law's forecast" and law["step"] > 0
            else:
                assert law["says"].startswith("cannot say: weight_decay=")
                assert math.isnan(law["step"])
    # no-effect is the law's step at the author's weight decay, at every weight decay
    own = mine.loc[(point_name(256, AUTHOR_WD), "law"), "step"]
    for wd in WEIGHT_DECAYS:
        assert mine.loc[(point_name(256, wd), "no-effect"), "step"] == own


def test_exposure_forecasts_the_step_growing_as_one_over_p_c():
    reg = law_axes.read_registry()
    mine = reg[(reg["experiment"] == "p-c-interior") & (reg["hypothesis"] == "exposure")]
    step = dict(zip(mine["point"], mine["step"], strict=True))
    assert step["centre-p_C0.2"] / step["centre-p_C0.8"] == pytest.approx(4.0, rel=1e-4)
    assert step["centre-p_C0.1"] / step["centre-p_C0.8"] == pytest.approx(8.0, rel=1e-4)
    law = reg[(reg["experiment"] == "p-c-interior") & (reg["hypothesis"] == "law")]
    law_step = dict(zip(law["point"], law["step"], strict=True))
    # the stored law's p_C coefficient is positive: it forecasts earlier steps towards the edge
    assert law_step["centre-p_C0.1"] < law_step["centre-p_C0.35"] < law_step["centre-p_C0.8"]
