"""The live transition forecast written by ``train`` (issue 14): its columns, the switch that
turns it off, and a resumed run writing exactly what an uninterrupted one does."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io.rundir import load_run
from interp.model.network import ModelConfig
from phenomenology.live import FORECAST_COLUMNS, LiveForecast

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
CFG = TrainConfig(optimizer="adam", lr=3e-3, batch_size=32, steps=120, eval_every=10,
                  checkpoint_every=60, n_log_checkpoints=2, seed=0)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("live")
    full = train(TASK, MODEL, CFG, base / "full", progress=False)
    train(TASK, MODEL, CFG, base / "part", progress=False, stop_after=60)
    resumed = train(TASK, MODEL, CFG, base / "part", resume=True, progress=False)
    return base, full, resumed


def test_live_columns_are_written_and_empty_before_a_forecast_is_possible(runs):
    base, full, _ = runs
    m = load_run(base / "full").metrics
    assert list(m.columns[-3:]) == list(FORECAST_COLUMNS)
    assert m.loc[:6, list(FORECAST_COLUMNS)].isna().all().all()  # fewer than 8 rows
    filled = m.dropna(subset=["forecast_step"])
    assert (filled["forecast_low"] <= filled["forecast_step"]).all()
    assert (filled["forecast_step"] <= filled["forecast_high"]).all()


def test_a_resumed_run_writes_the_same_forecasts(runs):
    _, full, resumed = runs
    pd.testing.assert_frame_equal(resumed, full)


def test_live_forecast_can_be_switched_off(tmp_path):
    cfg = dataclasses.replace(CFG, steps=20, live_forecast=False)
    df = train(TASK, MODEL, cfg, tmp_path / "off", progress=False)
    assert not set(FORECAST_COLUMNS) & set(df.columns)
    with pytest.raises(ValueError, match="TrainConfig.live_forecast='no' is invalid"):
        TrainConfig(live_forecast="no")


def test_the_progress_bar_text():
    assert LiveForecast.progress({"ic_acc": 0.5}) == {}
    assert LiveForecast.progress(dict.fromkeys(FORECAST_COLUMNS, math.nan)) == {}
    row = {"forecast_step": 30200.0, "forecast_low": 29100.0, "forecast_high": 31300.0}
    assert LiveForecast.progress(row) == {"cliff ~": "30.2k ± 1.1k"}
    assert np.isfinite(row["forecast_step"])
