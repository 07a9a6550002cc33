"""``induction-cliff fit PATH``: run directories and plain CSV curves, a model from a plugin, and
every user error as one line and a non-zero exit."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "extra_model.py"
STEPS = np.arange(0, 60001, 300)
TRUTH = {"height": 2.0, "t_mid": 30000.0, "width": 1500.0}


def _step_loss(rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    z = (STEPS - TRUTH["t_mid"]) / TRUTH["width"]
    return TRUTH["height"] / (1 + np.exp(z)) + rng.normal(0.0, 0.01, STEPS.size)


def _write_run(path: Path, metrics: pd.DataFrame, task=None) -> Path:
    path.mkdir()
    task = task or {"L": 32, "N": 8, "B": 2, "B_eval": None, "D": 63, "K": 512}
    config = {"format_version": 1, "task": task, "model": {}, "train": {}}
    (path / "config.json").write_text(json.dumps(config))
    metrics.to_csv(path / "metrics.csv", index=False)
    return path


# A curve that falls (not flat, so each refusal below is the one its case is about).
FALLING = [2.0 - 0.05 * i for i in range(20)]


def _fit(capsys, *argv):
    rc = main(["fit", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(rc, err, *needles):
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_fit_a_run_with_a_model_from_a_plugin(tmp_path, capsys):
    """The registry's "done when": a model from one file outside the package, fitted with
    ``fit RUN --model NAME --plugin FILE``, named in ``fit.json``."""
    run = _write_run(tmp_path / "run", pd.DataFrame({"step": STEPS, "ic_loss": _step_loss()}))
    rc, out, err = _fit(
        capsys, run, "--model", "logistic-step", "--plugin", FIXTURE, "--n-boot", "20"
    )
    assert rc == 0, err
    saved = json.loads((run / "fit.json").read_text())
    assert saved["model"] == "logistic-step" and saved["run_dir"] == str(run)
    for name, value in TRUTH.items():
        assert saved["params"][name] == pytest.approx(value, rel=0.03)
        assert saved["stderr"][name] > 0
    assert saved["forecast"] == "ok" and saved["r2"] > 0.99
    low, high = saved["forecast_interval"]
    assert low < saved["forecast_transition_step"] < high
    assert saved["forecast_transition_step"] == pytest.approx(30150, rel=0.01)
    assert saved["observed"]["method"] == "cliff" and saved["observed"]["transitioned"]
    assert saved["observed"]["transition_step"] == pytest.approx(30150, rel=0.02)
    assert saved["task"] == {"L": 32, "N": 8, "B": 2}  # from config.json
    assert saved["fitted_until"] == 60000 and saved["interval_method"].startswith("moving-block")
    # a fit to the whole curve: its transition is the fitted transition, never a forecast
    assert "t_mid" in out and "fitted transition step 30" in out and "not a forecast" in out
    assert "forecast" not in out.replace("not a forecast", "") and "from " in out


def test_fit_a_plain_csv_with_the_paper_task_by_default(tmp_path, capsys):
    """A curve from another codebase: a CSV with ``step`` and ``loss`` columns, the nested-logit
    model's own curve (known start and time scale); the task defaults are said."""
    from phenomenology.landscape import gradient_flow

    steps = np.arange(0.0, 30001.0, 250.0)
    truth = gradient_flow(
        {"beta1": -6.0, "alpha": 0.0, "xi": 0.5}, L=32, N=8, B=2, t_eval=steps / 50.0
    )
    rng = np.random.default_rng(3)
    csv = tmp_path / "curve.csv"
    pd.DataFrame({"step": steps, "loss": truth["loss"] + rng.normal(0, 0.01, steps.size)}).to_csv(
        csv, index=False
    )
    # A short seed grid (a model option from the command line) keeps the test fast.
    rc, out, err = _fit(
        capsys,
        csv,
        "--column",
        "loss",
        "--target",
        "ic_loss",
        "--n-boot",
        "10",
        "--option",
        "beta1_grid=-7,-6,-5",
    )
    assert rc == 0, err
    saved = json.loads((tmp_path / "curve.fit.json").read_text())
    assert saved["model"] == "nested-logit" and saved["column"] == "loss"
    assert saved["options"] == {"beta1_grid": [-7, -6, -5]}
    assert saved["task"] == {"L": 32, "N": 8, "B": 2}
    assert "L, N, B: the paper's defaults" in out
    assert saved["params"]["time_scale"] == pytest.approx(50.0, rel=0.05)
    assert saved["params"]["beta1_0"] == pytest.approx(-6.0, rel=0.05)
    assert set(saved) >= {
        "forecast_transition_step",
        "forecast_interval",
        "r2",
        "params",
        "fitted_until",
        "stderr",
        "target",
        "aux",
        "until_step",
        "observed",
    }


def test_until_fits_only_the_steps_seen_and_set_changes_the_task(tmp_path, capsys):
    csv = tmp_path / "c.csv"
    pd.DataFrame({"step": STEPS, "ic_loss": _step_loss()}).to_csv(csv, index=False)
    out_json = tmp_path / "out.json"
    rc, out, err = _fit(
        capsys,
        csv,
        "--model",
        "logistic-step",
        "--plugin",
        FIXTURE,
        "--until",
        "26000",
        "--set",
        "L=64",
        "--json",
        out_json,
    )
    assert rc == 0, err
    saved = json.loads(out_json.read_text())
    assert saved["fitted_until"] == 25800 and saved["until_step"] == 26000
    assert saved["n_points_fitted"] == 87
    # A noisy plateau is a plateau: seeing the start of the drop, the forecast is made.
    assert saved["forecast"] == "ok"
    assert saved["forecast_transition_step"] == pytest.approx(30150, rel=0.1)
    # its error is the forecast minus the cliff observed on the whole curve, in steps and relative
    observed = saved["observed"]["transition_step"]
    assert observed == pytest.approx(30150, rel=0.02)
    error = saved["forecast_transition_step"] - observed
    assert error != 0 and saved["forecast_error"] == pytest.approx(error)
    assert saved["forecast_relative_error"] == pytest.approx(error / observed)
    assert saved["task"] == {"L": 64.0, "N": 8, "B": 2}
    assert "N, B: the paper's defaults; L from --set" in out
    assert not (tmp_path / "c.fit.json").exists()  # --json replaced the default path


def test_a_curve_with_no_plateau_cannot_be_forecast(tmp_path, capsys):
    """A steady decline: the fit is reported, the forecast says why there is none."""
    csv = tmp_path / "line.csv"
    pd.DataFrame({"step": STEPS, "ic_loss": 3.0 - STEPS / 30000.0}).to_csv(csv, index=False)
    rc, out, err = _fit(
        capsys, csv, "--model", "logistic-step", "--plugin", FIXTURE, "--n-boot", "5"
    )
    assert rc == 0, err
    saved = json.loads((tmp_path / "line.fit.json").read_text())
    assert saved["forecast"].startswith("cannot forecast: no plateau")
    assert saved["forecast_transition_step"] is None and saved["forecast_interval"] is None
    assert "cannot forecast: no plateau" in out


@pytest.mark.parametrize(
    ("frame", "args", "needles"),
    [
        ({"iteration": [1, 2, 3], "ic_loss": [1, 2, 3]}, [], ["no 'step' column", "c.csv"]),
        ({"step": range(20), "loss": [1.0] * 20}, [], ["column 'ic_loss' does not exist"]),
        ({"step": range(5), "ic_loss": [1.0] * 5}, [], ["5 points", "at least 8"]),
        (
            {"step": range(20), "ic_loss": FALLING},
            ["--until", "9", "--fraction", "0.5"],
            ["--until or --fraction"],
        ),
        (
            {"step": range(20), "ic_loss": FALLING},
            ["--model", "nope"],
            ["model='nope' is invalid: registered models are", "nested-logit"],
        ),
        ({"step": range(20), "ic_loss": FALLING}, ["--set", "K=3"], ["--set K"]),
        ({"step": range(20), "ic_loss": FALLING}, ["--set", "N=x"], ["--set N"]),
        ({"step": range(20), "ic_loss": FALLING}, ["--fraction", "2"], ["--fraction"]),
        ({"step": range(20), "ic_loss": FALLING}, ["--until", "3"], ["4 points with step"]),
        ({"step": range(20), "ic_loss": FALLING}, ["--column", "step2"], ["'step2'"]),
        ({"step": range(20), "ic_loss": FALLING}, ["--option", "flor=1"], ["bad options"]),
        (
            {"step": range(20), "ic_acc": [1.0] * 20},
            ["--column", "ic_acc", "--fraction", "0.8"],
            ["--fraction needs a curve whose transition is seen"],
        ),
    ],
)
def test_each_user_error_is_one_line(tmp_path, capsys, frame, args, needles):
    csv = tmp_path / "c.csv"
    pd.DataFrame(frame).to_csv(csv, index=False)
    rc, _, err = _fit(capsys, csv, *args)
    _one_line_error(rc, err, *needles)
    assert not (tmp_path / "c.fit.json").exists()
    assert not (tmp_path / "c.forecast.json").exists()


def test_path_and_plugin_errors_are_one_line(tmp_path, capsys):
    rc, _, err = _fit(capsys, tmp_path / "missing.csv")
    _one_line_error(rc, err, "missing.csv", "no such run directory or CSV")
    csv = tmp_path / "c.csv"
    pd.DataFrame({"step": range(20), "ic_loss": FALLING}).to_csv(csv, index=False)
    rc, _, err = _fit(capsys, csv, "--plugin", tmp_path / "nothere.py")
    _one_line_error(rc, err, "--plugin", "no such file")
    rc, _, err = _fit(capsys, csv, "--plugin", "no_such_module_xyz")
    _one_line_error(rc, err, "--plugin", "no_such_module_xyz")
    run = _write_run(tmp_path / "run", pd.DataFrame({"step": range(20), "ic_loss": FALLING}))
    rc, _, err = _fit(capsys, run, "--set", "L=16")
    _one_line_error(rc, err, "--set L", "config.json")
    assert not (run / "fit.json").exists()


def test_the_fit_overlay_figure_refits_the_model_named_in_fit_json(tmp_path, capsys):
    from interp.io.rundir import load_run
    from interp.viz.figures import run_context
    from interp.viz.fit_overlay import fit_overlay, saved_fit
    from interp.viz.report import ReportConfig, _fit_section

    metrics = pd.DataFrame({"step": STEPS, "ic_loss": _step_loss()})
    run = _write_run(tmp_path / "run", metrics)
    rc, _, err = _fit(
        capsys,
        run,
        "--model",
        "logistic-step",
        "--plugin",
        FIXTURE,
        "--until",
        "40000",
        "--n-boot",
        "0",
        "--json",
        run / "fit.json",  # a forecast drawn in the overlay (its default file: forecast.json)
    )
    assert rc == 0, err
    saved = saved_fit(load_run(run))
    assert saved["model"] == "logistic-step" and saved["until"] == 40000
    observed = saved.pop("observed")
    _, fig = fit_overlay(load_run(run), **saved, observed_step=observed)
    assert [t.name for t in fig.data] == ["IC loss (run)", "IC loss (fit)"]
    assert fig.layout.title.text.startswith("logistic-step: run")
    fitted = fig.data[1]
    assert np.max(np.abs(np.interp(STEPS, fitted.x, fitted.y) - metrics["ic_loss"])) < 0.1
    # the report draws the same model (it refitted nested-logit whatever fit.json named)
    section = _fit_section(run_context([load_run(run)], {"report": ReportConfig()}))
    assert "logistic-step: run" in section and "Nested-logit fit" not in section


def test_the_contributing_guide_example_runs_as_a_plugin(tmp_path, capsys):
    """docs/contributing.md's worked example is the fixture's code, and it works as a plugin."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "contributing.md").read_text()
    section = doc.split("## Add a dynamics model", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.strip() in FIXTURE.read_text()
    plugin = tmp_path / "doc_model.py"
    plugin.write_text(code)
    run = _write_run(tmp_path / "run", pd.DataFrame({"step": STEPS, "ic_loss": _step_loss(1)}))
    rc, _, err = _fit(capsys, run, "--model", "logistic-step", "--plugin", plugin, "--n-boot", "0")
    assert rc == 0, err
    saved = json.loads((run / "fit.json").read_text())
    assert saved["model"] == "logistic-step"
    assert saved["params"]["t_mid"] == pytest.approx(TRUTH["t_mid"], rel=0.03)


def test_plateau_problem_tells_a_noisy_plateau_from_a_steady_trend():
    from phenomenology.fit import plateau_problem

    rng = np.random.default_rng(5)
    flat = 2.0 + rng.normal(0.0, 0.02, STEPS.size)  # noise spans its whole range
    assert plateau_problem(STEPS, flat, direction="falling") is None
    line = 3.0 - STEPS / 30000.0
    assert plateau_problem(STEPS, line, direction="falling").startswith("no plateau")
    noisy_line = line + rng.normal(0.0, 0.01, STEPS.size)  # noise far below the trend
    assert plateau_problem(STEPS, noisy_line, direction="falling") is not None
    assert plateau_problem(STEPS, _step_loss(), direction="falling") is None


def test_the_optimizer_picks_the_forecasts_calibration(tmp_path, capsys):
    from phenomenology.forecast import CALIBRATIONS, bank, template_loss

    task = {"L": 32, "N": 8, "B": 2}
    bk = bank(**task)
    j = int(np.argmin(np.abs(bk.beta1 + 6.0)))
    time_scale = 20000.0 / bk.t_cliff[j]  # the model's cliff at step 20000
    steps = np.arange(0, 40001, 250)
    loss = template_loss(steps, task=task, beta1_0=float(bk.beta1[j]), time_scale=time_scale)
    csv = tmp_path / "c.csv"
    pd.DataFrame({"step": steps, "ic_loss": loss}).to_csv(csv, index=False)
    got = {}
    for optimizer in (None, "adam"):
        out_json = tmp_path / f"{optimizer}.json"
        extra = ["--optimizer", optimizer] if optimizer else []
        rc, out, err = _fit(
            capsys, csv, "--until", "18000", "--n-boot", "0", "--json", out_json, *extra
        )
        assert rc == 0, err
        got[optimizer] = json.loads(out_json.read_text())
    sgd, adam = got[None], got["adam"]
    assert sgd["forecast_calibration"] == "sgd" and adam["forecast_calibration"] == "adam"
    assert sgd["forecast_from"] == adam["forecast_from"] == "template"  # no tila2 column
    # the same raw forecast, times each optimiser's own factor
    ratio = adam["forecast_transition_step"] / sgd["forecast_transition_step"]
    assert ratio == pytest.approx(CALIBRATIONS["adam"]["k"] / CALIBRATIONS["sgd"]["k"], rel=1e-9)
    assert sgd["forecast_transition_step"] == pytest.approx(
        CALIBRATIONS["sgd"]["k"] * 20000, rel=0.1
    )
    # a run directory's optimiser comes from its config: --optimizer is refused there
    run = _write_run(tmp_path / "run", pd.DataFrame({"step": steps, "ic_loss": loss}))
    rc, _, err = _fit(capsys, run, "--optimizer", "adam")
    _one_line_error(rc, err, "--optimizer", "run directory")


def test_usage_errors_are_one_line_too(capsys):
    # argparse's own errors (a bad choice, an unknown flag) name the command and the argument
    for argv in (["fit", "x.csv", "--optimizer", "bogus"], ["sweep", "--backend", "nope"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        _, err = capsys.readouterr()
        _one_line_error(1, err, f"induction-cliff {argv[0]}", argv[-1])


# A curve the model cannot describe is refused up front, never fitted for ever or overflowed.
FLAT_STEPS = np.arange(0, 1000, 10)


@pytest.mark.parametrize(
    "values, words, code",
    [
        (
            np.full(FLAT_STEPS.size, 1.5),
            "column 'ic_loss' does not change (every value is 1.5)",
            2,
        ),
        (
            1.5 + 1e-9 * np.sin(FLAT_STEPS),
            "column 'ic_loss' does not change (it moves by 2e-09 around 1.5, less than 1e-06",
            2,
        ),
        (
            -1 - FLAT_STEPS / 1000,
            "column 'ic_loss' is mostly below 0 (median -1.495); a loss is >= 0",
            2,
        ),
        (
            np.full(FLAT_STEPS.size, 1e308),
            "line 2 (step 0): column 'ic_loss' is 1e+308, beyond +-1e+06",
            3,
        ),
    ],
    ids=["flat", "flat-to-1e-9", "negative", "1e308"],
)
def test_a_flat_negative_or_absurd_curve_is_refused_before_fitting(
    tmp_path, capsys, values, words, code
):
    csv = tmp_path / "c.csv"
    pd.DataFrame({"step": FLAT_STEPS, "ic_loss": values}).to_csv(csv, index=False)
    rc, out, err = _fit(capsys, csv, "--n-boot", "0")
    assert rc == code
    _one_line_error(rc, err, f"{csv}: {words}")
    assert "forecast" not in out and not (tmp_path / "c.fit.json").exists()
    assert not (tmp_path / "c.forecast.json").exists()


def test_a_gradient_flow_past_its_budget_did_not_converge():
    from phenomenology.landscape import FlowDidNotConverge, gradient_flow

    start = {"beta1": -4.0, "alpha": 0.0, "xi": 0.0}
    assert len(gradient_flow(start, L=32, N=8, B=2, t_max=1e3, n_points=5)) == 5
    with pytest.raises(FlowDidNotConverge, match="within 10 gradient evaluations"):
        gradient_flow(start, L=32, N=8, B=2, t_max=1e3, n_points=5, max_evals=10)


def test_a_fit_whose_flows_never_finish_stops_and_says_did_not_converge(monkeypatch):
    # The negative curve on which the fit used to integrate for ever (check_curve refuses it
    # before; the estimator itself must still stop): a budget of 2,000 evaluations a flow.
    from phenomenology import landscape
    from phenomenology.estimator import FitDidNotConverge, NestedLogitFit

    monkeypatch.setattr(landscape, "MAX_FLOW_EVALS", 2000)
    with pytest.raises(FitDidNotConverge, match="did not converge"):
        NestedLogitFit(n_boot=0).fit(FLAT_STEPS, -1 - FLAT_STEPS / 1000)
