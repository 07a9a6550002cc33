"""The report command's input checks, its content, and the explorer's data (known answers)."""

import numpy as np
import pytest
import torch

from interp.cli import main
from interp.io import checkpoints
from interp.io.rundir import load_run
from interp.viz.explorer import (
    AttentionExplorer,
    ExplorerConfig,
    explorer_data,
    heatmap_figure,
    measures_figure,
    token_ticks,
)
from interp.viz.figures import run_context
from interp.viz.report import ReportConfig, ReportInputError, build_report, deviations
from tests.interp.tiny_runs import tiny_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("report") / "tiny", steps=20)


def test_token_ticks_name_roles_trained_and_novel_classes():
    ticks, hover = token_ticks([70, 3, 70], [5, 1, 5], 70, 5, K=64)
    assert ticks == ["x1 n1", "l1 y5", "x2 c3", "l2 y1", "x3 n1", "l3 y5", "q n1"]
    assert hover[2] == "x2: item of class 3, label 1"
    assert hover[-1] == "q: query of novel class n1 (id 70), target label 5"
    with pytest.raises(ValueError, match="same length"):
        token_ticks([1, 2], [1], 1, 1, K=64)


def test_explorer_patterns_are_uniform_when_queries_are_zero(tmp_path):
    """W_Q = 0 makes every score 0: query row q attends 1/(q+1) to each key k <= q."""
    d = tiny_run(tmp_path / "run", steps=10)
    run = load_run(d)
    model = run.load_model(10)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_()
    checkpoints.save_weights(d / "checkpoints", 10, model)
    data = explorer_data(run, ExplorerConfig(n_sequences=2, steps=(0, 10)))
    assert data["steps"] == [0, 10] and data["n_layers"] == 2
    assert [len(data["sets"][s]) for s in ("ic", "ic2", "iw")] == [2, 2, 2]
    n = 2 * run.task.N + 1
    for layer in range(2):
        z = data["sets"]["iw"][1]["patterns"][1][layer]
        for q in range(n):
            assert z[q][: q + 1] == pytest.approx([1 / (q + 1)] * (q + 1), abs=1e-3)
            assert z[q][q + 1 :] == [None] * (n - q - 1)
    # step 0 (random init) is not uniform: the steps really are different checkpoints
    z0 = np.array(data["sets"]["iw"][1]["patterns"][0][0][-1], dtype=float)
    assert np.abs(z0 - 1 / n).max() > 1e-3
    # the measures beside it are the run's metrics.csv
    assert data["measures"]["step"] == run.metrics["step"].tolist()
    np.testing.assert_allclose(data["measures"]["ila1"], run.metrics["ila1"])


def test_explorer_figures_and_widget_follow_the_choice(run_dir):
    data = explorer_data(load_run(run_dir), ExplorerConfig(n_sequences=2))
    fig = heatmap_figure(data, "ic2", 1, 0, 1)
    assert [list(r) for r in fig.data[0].z] == data["sets"]["ic2"][1]["patterns"][0][1]
    assert list(fig.data[0].x) == data["sets"]["ic2"][1]["ticks"]
    assert "layer 2, step 0, IC2 sequence 2" in fig.layout.title.text
    with pytest.raises(ValueError, match="set_name"):
        heatmap_figure(data, "ood")
    assert measures_figure(data, 10).layout.shapes[0].x0 == 10
    explorer = AttentionExplorer(None, data=data)
    last = data["sets"]["ic"][0]["patterns"][-1][0]
    assert [list(r) for r in explorer.heatmap.data[0].z] == last
    explorer.step.value = 0  # the slider moves: heatmap and cursor follow
    assert [list(r) for r in explorer.heatmap.data[0].z] == data["sets"]["ic"][0]["patterns"][0][0]
    assert explorer.measures.layout.shapes[0].x0 == 0
    explorer.layer.value = 1
    explorer.set_name.value = "iw"
    assert [list(r) for r in explorer.heatmap.data[0].z] == data["sets"]["iw"][0]["patterns"][0][1]


PLOTLY_MIME = "application/vnd.plotly.v1+json"


def stored_patterns(run, steps, set_name: str = "ic", sequence: int = 0) -> dict:
    """step -> [layer] attention pattern ``[query, key]`` of one evaluation sequence, recomputed
    from that step's saved weights by the hooked model (independently of the explorer)."""
    batch = run.eval_sets()[set_name][sequence : sequence + 1]
    out = {}
    for step in steps:
        model = run.load_model(step).eval()
        with torch.no_grad():
            _, cache = model.run_with_cache(batch.tokens, batch.positions)
        out[step] = [cache[f"blocks.{layer}.attn.hook_pattern"][0, 0].numpy() for layer in (0, 1)]
    return out


def _lower(z) -> np.ndarray:
    """The causal part (query >= key) of a heatmap's z (None above the diagonal)."""
    z = np.array([[np.nan if v is None else v for v in row] for row in z], dtype=float)
    return z[np.tril(np.ones(z.shape, dtype=bool))]


def test_the_slider_shows_the_checkpoint_it_names(run_dir):
    """Every step the explorer offers shows that checkpoint's own pattern (a slider whose index
    ran the wrong way would show another step's), in its figure and in the notebook widget."""
    run = load_run(run_dir)
    config = ExplorerConfig(n_sequences=1)
    data = explorer_data(run, config)
    stored = stored_patterns(run, data["steps"])
    assert len(data["steps"]) >= 3
    first, last = stored[data["steps"][0]][1], stored[data["steps"][-1]][1]
    assert np.abs(_lower(first) - _lower(last)).max() > 0.05  # the steps differ visibly
    tol = 1.01 * 0.5 * 10.0**-config.decimals  # the page rounds to `decimals`
    explorer = AttentionExplorer(None, data=data)
    for index, step in enumerate(data["steps"]):
        for layer in (0, 1):
            fig = heatmap_figure(data, "ic", 0, index, layer)
            assert f"layer {layer + 1}, step {step}," in fig.layout.title.text
            np.testing.assert_allclose(
                _lower(fig.data[0].z), stored[step][layer][np.tril_indices(len(first))], atol=tol
            )
        explorer.step.value = index
        np.testing.assert_allclose(
            _lower(explorer.heatmap.data[0].z),
            stored[step][0][np.tril_indices(len(first))],
            atol=tol,
        )
        # what the front end draws: each output widget holds one plotly bundle, this step's
        for out, title in ((explorer._heat_out, f"step {step},"), (explorer._meas_out, "cursor")):
            (output,) = out.outputs
            shown = output["data"][PLOTLY_MIME]
            assert title in shown["layout"]["title"]["text"]
        np.testing.assert_allclose(
            _lower(explorer._heat_out.outputs[0]["data"][PLOTLY_MIME]["data"][0]["z"]),
            stored[step][0][np.tril_indices(len(first))],
            atol=tol,
        )


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(n_sequences=0), "n_sequences"),
        (dict(sets=("ic", "ood")), "sets"),
        (dict(steps=()), "steps"),
        (dict(decimals=0), "decimals"),
    ],
)
def test_explorer_config_names_the_bad_field(kwargs, field):
    with pytest.raises(ValueError, match=f"ExplorerConfig.{field}="):
        ExplorerConfig(**kwargs)


def test_report_config_names_the_bad_field():
    with pytest.raises(ValueError, match="ReportConfig.forecast_fraction="):
        ReportConfig(forecast_fraction=1.5)


def test_deviations_name_optimiser_steps_and_preset(tmp_path):
    from interp.cli import build_configs
    from interp.experiments.standard import train

    task, model, cfg, _ = build_configs("tiny", {"steps": "10", "eval_every": "5"}, 0)
    train(task, model, cfg, tmp_path / "t", progress=False)
    devs = deviations(load_run(tmp_path / "t"))
    assert devs[0] == "adam lr 0.003 (author's code: SGD lr 0.01)"
    assert devs[1] == "10 training steps (the toolkit's default 1e5; the paper gives no length)"
    assert devs[2].startswith("settings of preset 'tiny' (steps set to 10): Tiny smoke-test")


def test_report_page_has_every_section_offline(run_dir, tmp_path):
    page = build_report([load_run(run_dir)], ReportConfig(fit=False))
    for name, heading in (
        ("config", "1. Config"),
        ("dynamics", "2. Training dynamics"),
        ("transition", "3. Plateau"),
        ("fit_forecast", "4. Dynamics-model fit"),
        ("explorer", "5. Att"),
    ):
        assert f'<h2 id="section-{name}">{heading}' in page
    assert "adam lr 0.003 (author's code: SGD lr 0.01)" in page
    from plotly.offline import get_plotlyjs

    assert page.count(get_plotlyjs()) == 1  # plotly.js inline, once
    ours = page.replace(get_plotlyjs(), "")
    for external in ("src=", "<link", "http://", "https://", "cdn"):
        assert external not in ours.lower()


def _err(capsys) -> str:
    return capsys.readouterr().err.strip()


def test_report_cli_refuses_bad_input_in_one_line(run_dir, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [  # a run that cannot be used exits 3, a bad argument 2, as from every command
        ([str(tmp_path / "nowhere")], "nowhere: is not a directory", 3),
        ([str(empty)], "empty: not a run directory (no config.json)", 3),
        ([str(run_dir), str(run_dir)], "--out is required", 2),
        ([str(run_dir), "--out", str(tmp_path / "no" / "r.html")], "does not exist", 2),
        ([str(run_dir), "--out", str(tmp_path)], "is a directory", 2),
    ]
    for args, message, code in cases:
        assert main(["report", *args]) == code
        err = _err(capsys)
        assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "no").exists()  # nothing created for a missing folder
    bare = tmp_path / "bare"
    tiny_run(bare, steps=10)
    for f in (bare / "checkpoints").glob("*.safetensors"):
        f.unlink()
    assert main(["report", str(bare)]) == 3
    assert "checkpoints: holds no weight checkpoints" in _err(capsys)
    assert not (bare / "report.html").exists()


def test_report_cli_writes_the_default_path(run_dir, capsys):
    assert main(["report", str(run_dir), "--no-fit", "--sequences", "1"]) == 0
    out = run_dir / "report.html"
    assert out.exists() and f"wrote {out}" in capsys.readouterr().out
    assert '<h2 id="section-explorer">5. Attention explorer' in out.read_text()


def test_report_input_error_is_a_value_error():
    assert issubclass(ReportInputError, ValueError)


def test_report_of_two_configs_compares_them(tmp_path):
    a = tiny_run(tmp_path / "K32", K=32, steps=10)
    b = tiny_run(tmp_path / "K64", K=64, steps=10)
    out = tmp_path / "both.html"
    assert main(["report", str(a), str(b), "--out", str(out), "--no-fit", "--sequences", "1"]) == 0
    page = out.read_text()
    assert "2 configs, differing in task.K" in page
    assert page.count('class="induction-cliff-explorer"') == 2  # one per config
    for label in ("K=32 (seed 0)", "K=64 (seed 0)", "mean [K=32]", "mean [K=64]"):
        assert label in page


def test_report_fit_section_wires_the_observed_cliff_into_fit_and_forecast(tmp_path, monkeypatch):
    """The fit section (fits stubbed: the slow test below runs them): on a clean IC-loss cliff at
    step 2000 the observed step handed to the fit and to the calibrated forecast (what ``fit
    --fraction 0.8`` says) is ~2000."""
    import pandas as pd
    import plotly.graph_objects as go

    import interp.viz.report as report

    d = tiny_run(tmp_path / "run", steps=10)
    steps = np.arange(0, 3001, 25)
    s = 1 / (1 + np.exp(-(steps - 2000) / 120))
    loss = np.log(8) * (1 - s) + 0.05
    pd.DataFrame(
        {"step": steps, "train_loss": loss, "ic_loss": loss, "ic_acc": 0.125 + 0.85 * s}
    ).to_csv(d / "metrics.csv", index=False)
    calls = []

    class Fitted:
        r2_, transition_step_, transition_step_stderr_ = 0.99, 1990.0, 12.0

    def fake_fit(run, **kw):
        calls.append(kw)
        return Fitted(), go.Figure()

    def fake_forecast(run, note, cutoff, fraction, observed):
        calls.append({"until": cutoff, "fraction": fraction, "observed_step": observed})
        return "<p>the calibrated forecast</p>"

    import interp.viz.fit_overlay

    monkeypatch.setattr(interp.viz.fit_overlay, "fit_overlay", fake_fit)
    monkeypatch.setattr(report, "_calibrated_forecast", fake_forecast)
    ctx = run_context([load_run(d)], {"report": ReportConfig(forecast_fraction=0.8)})
    section = report._fit_section(ctx)
    assert len(calls) == 2, section
    assert calls[0]["until"] is None and 0 < calls[1]["until"] < 2000
    assert calls[1]["fraction"] == 0.8
    for call in calls:
        assert call["observed_step"] == pytest.approx(2000, rel=0.05)
    assert "fitted transition step 1990" in section and "the calibrated forecast" in section


@pytest.mark.slow
def test_report_fit_section_finds_a_clean_cliff(tmp_path):
    """A clean IC-loss cliff at step 2000: the fit explains it and puts the jump there (minutes)."""
    import re

    import pandas as pd

    from interp.viz.report import _fit_section

    d = tiny_run(tmp_path / "run", steps=10)
    steps = np.arange(0, 3001, 25)
    s = 1 / (1 + np.exp(-(steps - 2000) / 120))
    loss = np.log(8) * (1 - s) + 0.05
    pd.DataFrame(
        {"step": steps, "train_loss": loss, "ic_loss": loss, "ic_acc": 0.125 + 0.85 * s}
    ).to_csv(d / "metrics.csv", index=False)
    ctx = run_context([load_run(d)], {"report": ReportConfig(forecast_fraction=0.8)})
    section = _fit_section(ctx)
    found = re.search(r"R<sup>2</sup> = ([0-9.]+), fitted transition step (\d+)", section)
    assert found, section
    assert float(found[1]) > 0.99
    assert int(found[2]) == pytest.approx(2000, rel=0.05)
    # the fit's figure, and the calibrated forecast from 80% of the plateau (on this L = 8, N = 4
    # curve the template sees no cliff ahead, and says so)
    assert section.count('class="report-figure"') >= 1
    assert "Forecast from 80% of the plateau (steps &le; " in section
    assert not (d / "fit.json").exists()  # the page's fit is not saved into the run


def _html_table_rows(html_table: str) -> list[dict[str, str]]:
    """The rows of a pandas ``to_html`` table as ``{header: cell text}``."""
    import re

    heads = re.findall(r"<th>(.*?)</th>", html_table)
    body = html_table.split("<tbody>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return [dict(zip(heads, re.findall(r"<td>(.*?)</td>", r, flags=re.S))) for r in rows]


def test_report_prints_the_plateau_length_from_the_first_step_to_the_10_percent_point(tmp_path):
    """IC accuracy a clean logistic from step 1000, midpoint 30000, scale 1500: the plateau lasts
    from step 1000 to the 10% point, 30000 - 1500 ln 9 = 26704, so the table prints 2.57e+04
    (and the transition step 3e+04)."""
    import pandas as pd

    from interp.analysis.transition import logistic
    from interp.viz.report import _transition_section

    d = tiny_run(tmp_path / "run", steps=10)
    steps = np.linspace(1000, 60000, 400)
    acc = logistic(steps, 0.125, 0.975, 30000, 1500)
    loss = np.log(8) * (1.1 - acc)
    pd.DataFrame({"step": steps, "train_loss": loss, "ic_loss": loss, "ic_acc": acc}).to_csv(
        d / "metrics.csv", index=False
    )
    section = _transition_section(run_context([load_run(d)], {}))
    row = next(r for r in _html_table_rows(section) if r["run"].endswith("run"))
    assert row["transitioned"] == "True"
    assert row["observed transition (IC-accuracy midpoint)"] == "3e+04"
    assert row["plateau_length"] == "2.57e+04"


def test_report_forecast_error_is_forecast_minus_observed(tmp_path, monkeypatch):
    """The report's calibrated-forecast paragraph (the forecaster stubbed to a known answer, the
    paragraph's own arithmetic not): a forecast at 2500 of a jump observed at 2000 is 25% late,
    printed ``+25.0%``; one at 1500 is ``-25.0%``."""
    import plotly.graph_objects as go

    import interp.viz.dynamics_plots
    import phenomenology.fit
    from interp.viz.report import _calibrated_forecast
    from phenomenology.forecast import Forecast

    d = tiny_run(tmp_path / "run", steps=10)
    run = load_run(d)
    for step, printed in ((2500.0, "+25.0%"), (1500.0, "-25.0%")):
        fc = Forecast(step=step, low=step - 100, high=step + 100, last_step=900.0)
        monkeypatch.setattr(phenomenology.fit, "calibrated_forecast", lambda *a, _f=fc, **k: _f)
        monkeypatch.setattr(
            interp.viz.dynamics_plots, "forecast_figure", lambda *a, **k: go.Figure()
        )
        text = _calibrated_forecast(run, "note", cutoff=900.0, fraction=0.8, observed=2000.0)
        assert f"IC-loss cliff 2000; relative error {printed}." in text, text


def test_report_uncalibrated_forecast_error_is_forecast_minus_observed(tmp_path, monkeypatch):
    """A fit.json fitted to IC accuracy takes the report's uncalibrated forecast (the model fitted
    to the plateau's first part; the fits stubbed to a known answer, the section's arithmetic
    not): a forecast 25% after the observed cliff prints ``+25.0%``, one 25% before ``-25.0%``.
    Cost: a 10-step tiny run, about 2 s."""
    import pandas as pd
    import plotly.graph_objects as go

    import interp.viz.fit_overlay
    import interp.viz.report as report
    from phenomenology.fit import observed_transition

    d = tiny_run(tmp_path / "run", steps=10)
    steps = np.arange(0, 3001, 25)
    s = 1 / (1 + np.exp(-(steps - 2000) / 120))
    loss = np.log(8) * (1 - s) + 0.05
    metrics = pd.DataFrame(
        {"step": steps, "train_loss": loss, "ic_loss": loss, "ic_acc": 0.125 + 0.85 * s}
    )
    metrics.to_csv(d / "metrics.csv", index=False)
    observed = observed_transition(metrics, column="ic_acc")["transition_step"]
    saved = {"model": "nested-logit", "target": "ic_acc", "column": "ic_acc", "aux": ()}
    saved |= {"options": None, "until": None, "observed": None}
    monkeypatch.setattr(interp.viz.fit_overlay, "saved_fit", lambda run: dict(saved))
    for factor, printed in ((1.25, "+25.0%"), (0.75, "-25.0%")):

        class Fitted:
            r2_, transition_step_stderr_ = 0.99, 12.0
            transition_step_ = factor * observed

        monkeypatch.setattr(
            interp.viz.fit_overlay, "fit_overlay", lambda run, **kw: (Fitted(), go.Figure())
        )
        ctx = run_context([load_run(d)], {"report": ReportConfig(forecast_fraction=0.8)})
        section = report._fit_section(ctx)
        assert "uncalibrated" in section and f"relative error {printed}." in section, section


def test_report_names_the_damaged_file_itself(run_dir, tmp_path, capsys):
    """An emptied metrics.csv is named as the damaged file (exit 3), not config.json."""
    import shutil
    from pathlib import Path

    run = Path(shutil.copytree(run_dir, tmp_path / "run"))
    (run / "metrics.csv").write_text("")
    assert main(["report", str(run)]) == 3
    err = _err(capsys)
    assert err.startswith(f"error: {run / 'metrics.csv'}") and "config.json" not in err, err
