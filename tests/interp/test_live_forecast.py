"""The live transition forecast written by ``train``: its columns, the switch that
turns it off, and a resumed run writing exactly what an uninterrupted one does."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from interp.analysis.collapse import CollapseWatch
from interp.analysis.evaluation import EvaluateSets, PerClassIW
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import standard_callbacks, train
from interp.io.rundir import load_run
from interp.model.network import ModelConfig
from phenomenology.forecast import bank, template_loss
from phenomenology.live import FORECAST_COLUMNS, LiveForecast, live_every, live_forecast

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
CFG = TrainConfig(
    optimizer="adam",
    lr=3e-3,
    batch_size=32,
    steps=120,
    eval_every=10,
    checkpoint_every=60,
    n_log_checkpoints=2,
    seed=0,
)


FORECAST_TASK = {"L": TASK.L, "N": TASK.N, "B": TASK.B_eval_effective}


def plateau_loss(run, row) -> dict:
    """A callback between the evaluation and the live forecast: the IC loss replaced by the
    model's own plateau curve with its cliff at step 160 (a tiny run never reaches a plateau in
    120 steps, so the live forecast would have nothing to forecast and its checks nothing to
    check); the forecast of such curves is tested in tests/phenomenology/test_forecast.py."""
    bk = bank(**FORECAST_TASK)
    j = int(np.argmin(np.abs(bk.beta1 + 6.0)))
    loss = template_loss(
        [float(row["step"])],
        task=FORECAST_TASK,
        beta1_0=float(bk.beta1[j]),
        time_scale=160.0 / float(bk.t_cliff[j]),
    )
    return {"ic_loss": float(loss[0])}


CALLBACKS = [EvaluateSets(), plateau_loss, LiveForecast()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("live")
    kw = {"progress": False, "callbacks": CALLBACKS}
    full = train(TASK, MODEL, CFG, base / "full", **kw)
    train(TASK, MODEL, CFG, base / "part", stop_after=60, **kw)
    resumed = train(TASK, MODEL, CFG, base / "part", resume=True, **kw)
    return base, full, resumed


def test_the_standard_run_forecasts_live_unless_switched_off():
    on = [EvaluateSets, PerClassIW, LiveForecast, CollapseWatch]
    assert [type(c) for c in standard_callbacks(CFG)] == on
    off = dataclasses.replace(CFG, live_forecast=False)
    assert [type(c) for c in standard_callbacks(off)] == [EvaluateSets, PerClassIW, CollapseWatch]


def test_live_columns_are_written_and_empty_before_a_forecast_is_possible(runs):
    base, full, _ = runs
    m = load_run(base / "full").metrics
    assert list(m.columns[-3:]) == list(FORECAST_COLUMNS)
    assert m.loc[:6, list(FORECAST_COLUMNS)].isna().all().all()  # fewer than 8 rows
    filled = m.dropna(subset=["forecast_step"])
    assert len(filled) > 0  # the run forecasts at all (else the checks below check nothing)
    assert (filled["forecast_low"] <= filled["forecast_step"]).all()
    assert (filled["forecast_step"] <= filled["forecast_high"]).all()
    # each row's forecast is live_forecast of the rows so far, as the training loop calls it
    rows = full.to_dict("records")
    task = FORECAST_TASK
    every = live_every(CFG.steps, CFG.eval_every)
    for i, row in enumerate(rows):
        seen = {k: v for k, v in row.items() if k not in FORECAST_COLUMNS}
        want = live_forecast([*rows[:i], seen], task, every=every, optimizer=CFG.optimizer)
        got = [row[c] for c in FORECAST_COLUMNS]
        np.testing.assert_array_equal(got, [want[c] for c in FORECAST_COLUMNS])


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
    assert LiveForecast().progress({"ic_acc": 0.5}) == {}
    assert LiveForecast().progress(dict.fromkeys(FORECAST_COLUMNS, math.nan)) == {}
    row = {"forecast_step": 30200.0, "forecast_low": 29100.0, "forecast_high": 31300.0}
    assert LiveForecast().progress(row) == {"cliff ~": "30.2k ± 1.1k"}
    # the ± is half the interval, also when the interval is not centred on the forecast
    row = {"forecast_step": 850.0, "forecast_low": 500.0, "forecast_high": 1300.0}
    assert LiveForecast().progress(row) == {"cliff ~": "850 ± 400"}
    row = {"forecast_step": 12345.0, "forecast_low": 11000.0, "forecast_high": 15000.0}
    assert LiveForecast().progress(row) == {"cliff ~": "12.3k ± 2.0k"}
    row = {"forecast_step": math.inf, "forecast_low": 1.0, "forecast_high": 2.0}
    assert LiveForecast().progress(row) == {}


def test_the_progress_bar_says_whether_the_forecast_is_within_the_budget_and_its_auroc():
    """Budget 10,000: a forecast at 12,300 is not within it. With the law's prior, the bar adds
    the AUROC measured for the law at the latest fraction reached (10% at step 1,500, from
    phenomenology/early_warning.json); before 5% it has none, nor without the law."""
    from phenomenology.warning import MeasuredWarning

    law_at_10 = MeasuredWarning.load().auroc["law"][0.1][0]
    live = LiveForecast()
    live.budget, live.seen, live.with_law = 10_000, 1500.0, True
    row = {"forecast_step": 12345.0, "forecast_low": 11000.0, "forecast_high": 15000.0}
    assert live.progress(row) == {
        "cliff ~": "12.3k ± 2.0k",
        "in budget": f"no (AUROC {law_at_10:.2f})",
    }
    row = {"forecast_step": 8000.0, "forecast_low": 7000.0, "forecast_high": 9000.0}
    live.seen = 400.0
    assert live.progress(row)["in budget"] == "yes"
    live.seen, live.with_law = 1500.0, False
    assert live.progress(row)["in budget"] == "yes"
