"""The collapse rule (a dead classifier judged from its last hidden layer's firing units) and
``train`` reporting it, stopping on request."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from interp.analysis.collapse import THRESHOLD, collapse_step, span_steps
from interp.cli import main
from interp.config.train_config import TrainConfig

# The tiny preset under plain SGD at lr 3: the last hidden layer stops firing by step 25 (0 of its
# units on the IC set) and stays silent; the span at lr 3 is 225 / 3 = 75 steps.
DYING = [
    "train",
    "--preset",
    "tiny",
    "--quiet",
    "--set",
    "optimizer=sgd",
    "--set",
    "lr=3",
    "--set",
    "steps=300",
    "--set",
    "eval_every=25",
    "--set",
    "live_forecast=false",
]


def test_the_span_scales_as_one_over_the_sgd_learning_rate():
    # 1.5 times the longest recovered silence, 14500 steps at lr 0.03 (435 lr x steps)
    assert span_steps("sgd", 0.03) == 21750 and span_steps("sgd", 0.01) == 65250
    assert span_steps("sgd", 3.0) == 218


def test_a_dip_shorter_than_the_span_is_not_a_death_a_stretch_as_long_is():
    steps = [0, 250, 500, 750, 1000, 1250]
    dip = [0.5, 0.01, 0.012, 0.3, 0.01, 0.01]  # silent 250-500, firing at 750, silent again
    assert collapse_step(steps, dip, span=500) is None
    assert collapse_step(steps, dip, span=250) == (250, 500)
    assert collapse_step(steps, [0.5, 0.0, 0.0, 0.0, 0.0, 0.0], span=500) == (250, 750)
    # At the threshold a layer counts as firing; a missing value (NaN) too.
    assert collapse_step(steps, [THRESHOLD] * 6, span=0) is None
    assert collapse_step(steps, [0.0, math.nan, 0.0, 0.0, 0.5, 0.5], span=500) is None


def test_train_reports_the_death_with_its_step(tmp_path, capsys):
    out = tmp_path / "dies"
    assert main([*DYING, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("collapsed")]
    assert lines == [
        f"collapsed at step 250 ({out}): hidden layer 3 below 2% of its units firing at every "
        "evaluation since step 25 (218 steps; rule in interp.analysis.collapse)"
    ]
    m = pd.read_csv(out / "metrics.csv")
    assert m["step"].iloc[-1] == 300  # not asked to stop: trained to the end
    assert (m.loc[m["step"] >= 25, "active_h3"] < THRESHOLD).all()
    assert json.loads((out / "config.json").read_text())["train"]["stop_on_collapse"] is False


def test_stop_on_collapse_stops_at_the_judged_step(tmp_path, capsys):
    out = tmp_path / "stops"
    assert main([*DYING, "--out", str(out), "--set", "stop_on_collapse=true"]) == 0
    err = capsys.readouterr().err
    assert "collapsed at step 250" in err and "stopping (stop_on_collapse)" in err
    assert pd.read_csv(out / "metrics.csv")["step"].iloc[-1] == 250
    assert json.loads((out / "config.json").read_text())["train"]["stop_on_collapse"] is True


def test_a_run_that_keeps_firing_reports_nothing(tmp_path, capsys):
    assert main(["train", "--preset", "tiny", "--quiet", "--out", str(tmp_path / "ok")]) == 0
    assert "collapsed" not in capsys.readouterr().err


def test_stop_on_collapse_must_be_true_or_false(tmp_path, capsys):
    code = main([*DYING, "--out", str(tmp_path / "x"), "--set", "stop_on_collapse=maybe"])
    err = capsys.readouterr().err
    assert code != 0 and "stop_on_collapse" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match=r"TrainConfig\.stop_on_collapse='yes' is invalid"):
        TrainConfig(stop_on_collapse="yes")
