"""The measured collapse risk applies only at the configuration it was measured at: the
``paper-fig3`` task, network and optimiser settings, at the row's learning rate. A configuration
that differs in one setting alone (the batch size, the weight decay, the momentum, ...) gets no
measured rate, while ``paper-fig3`` itself does."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from interp.analysis.collapse import _measured_here, measured_risk, measured_within
from interp.cli import main
from interp.train.overrides import build_configs
from tests.interp.test_forecast_command import write_law

# Runs of paper-fig3's scalar form at lr 0.03: 2 of 8 died, the others transitioned by 12,000.
ROWS = pd.DataFrame(
    {
        "hidden_bias": ["scalar"] * 8,
        "lr": [0.03] * 8,
        "seed": list(range(8)),
        "fate": ["dead", "dead"] + ["transitioned"] * 6,
        "fate_step": [8000.0, 9000.0] + [11000.0 + 100 * i for i in range(6)],
        "steps_done": [100000] * 8,
    }
)


def _configs(**overrides):
    sets = {k: str(v) for k, v in {"lr": 0.03, **overrides}.items()}
    return build_configs("paper-fig3", sets, None)[:3]


def test_paper_fig3_itself_gets_its_measured_rate():
    task, model, train = _configs()
    assert _measured_here(task, model, train)
    risk, where = measured_risk(ROWS, task, model, train)
    assert risk is not None and (risk["n"], risk["dead"]) == (8, 2)
    assert where == "hidden_bias=scalar, SGD lr 0.03"
    within = measured_within(ROWS, task, model, train, 100000)
    assert within is not None and (within["n"], within["transitioned"]) == (8, 6)


@pytest.mark.parametrize(
    "change",
    [
        {"batch_size": 64},
        {"batch_size": 256},
        {"weight_decay": 0.0},
        {"weight_decay": 1e-5},
        {"momentum": 0.9},
        {"momentum": 0.5},
        {"weight_decay_form": "coupled"},
        {"optimizer": "adam"},
        {"K": 512},
        {"eps": 0.2},
        {"d_mlp": 64},
        {"lr": 0.01},  # measured runs at another learning rate do not apply either
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_one_setting_off_paper_fig3_gets_no_measured_rate(change):
    task, model, train = _configs(**change)
    risk, _ = measured_risk(ROWS, task, model, train)
    assert risk is None
    assert measured_within(ROWS, task, model, train, 100000) is None
    if "lr" not in change:
        assert not _measured_here(task, model, train)


def test_the_evaluation_set_size_and_the_hidden_bias_form_do_not_matter():
    # n_eval changes no training; the form is matched row by row
    task, model, train = _configs(n_eval=512)
    assert _measured_here(task, model, train)
    assert measured_risk(ROWS, task, model, train)[0] is not None
    task, model, train = _configs(hidden_bias="per_unit")
    assert _measured_here(task, model, train)
    assert measured_risk(ROWS, task, model, train)[0] is None  # no per-unit rows


def test_forecast_at_another_batch_size_says_the_risk_is_unmeasured(tmp_path, capsys):
    # a law whose data span batch sizes 64 to 128, so that the forecast itself is given
    law = write_law(tmp_path / "law.json", batch_size=[64, 128])
    stored = json.loads(law.read_text())
    del stored["fixed"]["train.batch_size"]
    law.write_text(json.dumps(stored))
    rates = tmp_path / "rates.csv"
    ROWS.to_csv(rates, index=False)
    args = ["forecast", "--preset", "paper-fig3", "--law", str(law), "--rates", str(rates)]
    assert main([*args, "--set", "lr=0.03"]) == 0
    out = capsys.readouterr().out
    assert "collapse risk (hidden_bias=scalar, SGD lr 0.03): 2 of 8 runs died" in out
    assert main([*args, "--set", "lr=0.03", "--set", "batch_size=64"]) == 0
    out = capsys.readouterr().out
    assert "collapse risk (hidden_bias=scalar, SGD lr 0.03): unmeasured" in out
    assert "runs died" not in out and "unknown, the collapse risk being unmeasured" in out
