"""The README's fit examples, then its figures example, in order on one run: a forecast from part
of the plateau goes to its own file, and the figures still draw the fit to the whole curve that
``fit`` printed."""

from __future__ import annotations

import json
import re

import pytest

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.experiments.standard import train
from interp.train.presets import get_preset

FITTED_LINE = re.compile(r"fitted transition step (\d+) \(the model fitted to the whole curve")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The ``tiny`` preset with a plateau and a jump (test_readme's stand-in for runs/demo)."""
    out = tmp_path_factory.mktemp("readme") / "runs" / "demo"
    preset = get_preset("tiny")
    cfg = TrainConfig(**{**preset.train.__dict__, "steps": 600, "eval_every": 25})
    from interp.model.network import ModelConfig

    train(preset.task, ModelConfig.from_task(preset.task, **preset.model), cfg, out, progress=False)
    return out


def test_a_forecast_keeps_the_whole_curve_fit_that_figures_draws(run_dir, tmp_path, capsys):
    # scripts/demo.sh: the whole curve
    assert main(["fit", str(run_dir), "--n-boot", "0"]) == 0
    fitted = int(FITTED_LINE.search(capsys.readouterr().out).group(1))
    whole = (run_dir / "fit.json").read_bytes()
    # README: a forecast from 80% of the plateau, into its own file
    assert main(["fit", str(run_dir), "--fraction", "0.8", "--n-boot", "0"]) == 0
    assert f"wrote {run_dir / 'forecast.json'}" in capsys.readouterr().out
    assert (run_dir / "fit.json").read_bytes() == whole
    forecast = json.loads((run_dir / "forecast.json").read_text())
    assert forecast["until_step"] is not None  # the part of the plateau it saw
    # README: the figures draw the whole-curve fit, labelled as such, at the step fit printed
    out = tmp_path / "paper-figures"
    assert main(["figures", str(run_dir), "--out", str(out), "--formats", "html"]) == 0
    (overlay,) = out.glob("fit_overlay_*.html")
    html = overlay.read_text()
    assert f"fitted transition (step {fitted})" in html
    assert "forecast (fit on steps" not in html
