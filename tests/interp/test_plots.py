"""Figure functions on small fake runs: traces, titles, axis labels; no browser needed."""

import numpy as np
import pandas as pd
import pytest

from interp.viz import dynamics_plots as pplots
from interp.viz import plots, sweep_plots

METRIC_COLUMNS = (
    "train_loss ic_acc ic_loss ic2_acc ic2_loss iw_acc iw_loss "
    "ila1 tila2 tla2 cla prev_token_score induction_score"
).split()


def fake_metrics(seed: int, n: int = 21, jump: float = 1000.0) -> pd.DataFrame:
    """A run that jumps at ``jump``: every metrics.csv column, sigmoid-shaped."""
    rng = np.random.default_rng(seed)
    step = np.arange(n) * 100
    s = 1.0 / (1.0 + np.exp(-(step - jump) / 100.0))
    data = {"step": step}
    for i, c in enumerate(METRIC_COLUMNS):
        data[c] = 0.1 + 0.8 * s + 0.01 * rng.standard_normal(n) + 0.001 * i
    return pd.DataFrame(data)


def test_token_labels():
    assert plots.token_labels(3) == ["x1", "l1", "x2", "l2", "x3", "l3", "xq"]
    assert plots.token_labels(0) == ["xq"]
    with pytest.raises(ValueError, match="n_pairs"):
        plots.token_labels(-1)


def test_token_hover_names_roles_classes_and_labels():
    text = plots.token_hover([600, 7, 600], [3, 7, 3], query_class=600, target=3)
    assert len(text) == 7
    assert text[0].startswith("x1") and "class 600" in text[0] and "label 3" in text[0]
    assert text[3].startswith("l2") and "label 7" in text[3]
    assert text[-1].startswith("xq") and "class 600" in text[-1] and "target label 3" in text[-1]
    with pytest.raises(ValueError, match="same length"):
        plots.token_hover([1, 2], [1], 1)


def test_training_dynamics_seeds_faint_mean_bold():
    runs = [fake_metrics(s, jump=1000 + 100 * s) for s in range(3)]
    note = "Adam lr 1e-3 (author's code: SGD 0.01)"
    fig = plots.plot_training_dynamics(runs, [1000, 1100, 1200], note=note, chance=1 / 32)
    # 4 columns (train loss; IC, IC2, IW acc) x (3 faint + 1 mean), then the chance line
    assert len(fig.data) == 17
    *means, chance = [t for t in fig.data if t.showlegend is not False]
    assert [t.name for t in means] == ["train loss", "IC", "IC2", "IW"]
    assert all(t.line.width > 2 for t in means)
    faint = [t for t in fig.data if t.showlegend is False]
    assert len(faint) == 12 and all(t.opacity < 0.5 for t in faint)
    ic_mean = next(t for t in means if t.name == "IC")
    expected = pd.concat(runs).groupby("step")["ic_acc"].mean()
    np.testing.assert_allclose(ic_mean.y, expected.to_numpy())
    assert note in fig.layout.title.text and "Training dynamics" in fig.layout.title.text
    assert fig.layout.xaxis.title.text == "training step"
    assert fig.layout.yaxis.title.text == "loss"
    assert fig.layout.yaxis2.title.text == "accuracy"
    # 3 transitions x 2 panels, one legend entry; plus the chance line
    vlines = [s for s in fig.layout.shapes if s.x0 == s.x1 and s.x0 in (1000, 1100, 1200)]
    assert len(vlines) == 6
    assert sum(bool(s.showlegend) for s in fig.layout.shapes) == 1
    # chance is a legend entry on the accuracy panel across all steps, not a text label that
    # would sit on the x axis and its tick labels
    assert chance.name == "chance (1/32)" and chance.xaxis == "x2"
    assert list(chance.x) == [0, 2000] and list(chance.y) == [1 / 32, 1 / 32]
    assert not [a for a in fig.layout.annotations if "chance" in (a.text or "")]


def test_training_dynamics_single_run_and_mapping():
    fig = plots.plot_training_dynamics(fake_metrics(0))
    assert len(fig.data) == 4 and len(fig.layout.shapes) == 0
    assert "<br>" not in fig.layout.title.text  # no note, nothing under the title
    fig = plots.plot_training_dynamics({"a": fake_metrics(0), "b": fake_metrics(1)})
    assert any("(a)" in t.name for t in fig.data)
    with pytest.raises(ValueError, match="step"):
        plots.plot_training_dynamics(pd.DataFrame({"ic_acc": [0.1]}))
    with pytest.raises(ValueError, match="empty"):
        plots.plot_training_dynamics([])


def test_mean_over_runs_with_different_steps():
    a = pd.DataFrame({"step": [0, 100, 200], "ic_acc": [0.0, 0.2, 0.4]})
    b = pd.DataFrame({"step": [0, 200], "ic_acc": [1.0, 1.0]})
    fig = plots.plot_training_dynamics([a, b], loss_columns=(), acc_columns=("ic_acc",))
    mean = fig.data[-1]
    np.testing.assert_allclose(mean.x, [0, 100, 200])
    np.testing.assert_allclose(mean.y, [0.5, 0.2, 0.7])


def test_run_comparison_one_colour_per_run():
    runs = {"plain": fake_metrics(0), "clamp_prev_token": fake_metrics(1, jump=500)}
    fig = plots.plot_run_comparison(runs, transition_steps={"plain": 1000, "clamp_prev_token": 500})
    assert [t.name for t in fig.data] == ["plain", "plain", "clamp_prev_token", "clamp_prev_token"]
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
    assert [a.text for a in fig.layout.annotations] == ["IC accuracy", "IW accuracy"]
    assert sorted({s.x0 for s in fig.layout.shapes}) == [500, 1000]
    assert fig.layout.xaxis.title.text == "training step"


def test_progress_measures_panels_share_x_and_mark_transition():
    fig = plots.plot_progress_measures(fake_metrics(0), transition_step=1000, note="n")
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:3] == ["attention (IC set)", "accuracy (IC set)", "head scores"]
    assert [t.name for t in fig.data] == [
        "ILA1",
        "TILA2",
        "TLA2",
        "CLA",
        "IC",
        "prev-token score",
        "induction score",
    ]
    assert fig.layout.xaxis3.title.text == "training step"
    assert [fig.layout[f"yaxis{i}"].title.text for i in ("", 2, 3)] == [
        "attention share",
        "accuracy",
        "score",
    ]
    assert fig.layout.xaxis.matches == "x3"  # one shared step axis
    assert len([s for s in fig.layout.shapes if s.x0 == 1000]) == 3
    assert "Progress measures<br><sup>n</sup>" == fig.layout.title.text


def test_progress_measures_draw_a_repeated_curve_under_its_own_entry():
    # B = 1: the induction score is TILA2 (only the query row has an induction target); it is
    # drawn all the same (else its legend entry would name nothing), its entry saying so
    runs = [fake_metrics(s) for s in range(2)]
    for m in runs:
        m["induction_score"] = m["tila2"] + 1e-9
    fig = plots.plot_progress_measures(runs)
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend[-2:] == ["prev-token score", "induction score (= TILA2)"]
    titles = [a.text for a in fig.layout.annotations]
    assert titles[2] == "head scores"
    assert fig.layout.yaxis3.title.text == "score"
    # on one panel, the second of two equal curves is dashed so that both stay visible
    m = fake_metrics(0)
    m["tla2"] = m["ila1"]
    fig = plots.plot_progress_measures(m)
    dashes = {t.name: t.line.dash for t in fig.data}
    assert dashes["ILA1"] == "solid" and dashes["TLA2 (= ILA1)"] == "dash"
    # equal in one run only: both drawn under their own names
    runs[1]["induction_score"] = runs[1]["tila2"] + 0.01
    fig = plots.plot_progress_measures(runs)
    assert "induction score" in [t.name for t in fig.data]


def test_progress_measures_skip_missing_columns():
    m = fake_metrics(0)[["step", "ila1", "tila2", "ic_acc"]]
    fig = plots.plot_progress_measures(m)
    assert [a.text for a in fig.layout.annotations] == ["attention (IC set)", "accuracy (IC set)"]
    assert len(fig.data) == 3
    with pytest.raises(ValueError, match="none of the progress-measure columns"):
        plots.plot_progress_measures(m[["step"]])


def fake_patterns(n_step: int = 3, n_pairs: int = 2, seed: int = 0) -> np.ndarray:
    n = 2 * n_pairs + 1
    p = np.tril(np.random.default_rng(seed).random((n_step, 2, n, n))) + np.eye(n)
    return p / p.sum(-1, keepdims=True)


def test_attention_maps_slider_switches_checkpoints():
    patterns = fake_patterns(3)
    labels = plots.token_labels(2)
    hover = plots.token_hover([10, 11], [0, 1], 10, 0)
    fig = plots.plot_attention_maps(patterns, [0, 50, 100], labels, hover=hover, note="demo")
    assert len(fig.data) == 6  # 3 checkpoints x 2 layers
    assert [t.name for t in fig.data[:2]] == ["layer 1, step 0", "layer 2, step 0"]
    # the last checkpoint is shown first
    assert [bool(t.visible) for t in fig.data] == [False] * 4 + [True] * 2
    (slider,) = fig.layout.sliders
    assert [s.label for s in slider.steps] == ["0", "50", "100"]
    assert slider.steps[1].args[0]["visible"] == [False, False, True, True, False, False]
    # the token descriptions are the categories (hover shows them), the short roles the ticks
    assert list(fig.data[0].x) == hover and list(fig.data[0].y) == hover
    assert list(fig.layout.xaxis.tickvals) == hover and list(fig.layout.xaxis.ticktext) == labels
    assert list(fig.layout.yaxis.ticktext) == labels
    assert fig.layout.xaxis.title.text == "key" and fig.layout.yaxis.title.text == "query"
    assert fig.layout.yaxis.autorange == "reversed"
    assert [a.text for a in fig.layout.annotations] == ["layer 1", "layer 2"]
    assert "demo" in fig.layout.title.text
    # causal mask blank, the rest the data; hover names query and key tokens
    z = np.asarray(fig.data[2].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isfinite(np.tril(z)).all()
    # rounded to 4 decimals (hover shows 3), which keeps saved notebooks and HTML small
    np.testing.assert_allclose(np.tril(np.nan_to_num(z)), patterns[1, 0], rtol=0, atol=5e-5)
    np.testing.assert_array_equal(np.nan_to_num(z), np.round(np.nan_to_num(z), 4))
    assert "query %{y}<br>key %{x}" in fig.data[0].hovertemplate
    assert fig.data[0].customdata is None  # no per-cell copy of the descriptions


def test_attention_maps_validate_shapes():
    labels = plots.token_labels(2)
    with pytest.raises((ValueError, TypeError)):  # TypeError: jaxtyping, when it checks
        plots.plot_attention_maps(np.zeros((2, 5, 5)), [0, 1], labels)
    with pytest.raises(ValueError, match="steps"):
        plots.plot_attention_maps(fake_patterns(3), [0, 1], labels)
    with pytest.raises(ValueError, match="token labels"):
        plots.plot_attention_maps(fake_patterns(3), [0, 1, 2], plots.token_labels(3))
    with pytest.raises(ValueError, match="hover"):
        plots.plot_attention_maps(fake_patterns(3), [0, 1, 2], labels, hover=["a"])
    with pytest.raises(ValueError, match="distinct"):
        plots.plot_attention_maps(fake_patterns(3), [0, 1, 2], labels, hover=["a"] * 5)
    fig = plots.plot_attention_maps(fake_patterns(1), [7], labels)
    assert not fig.layout.sliders


def test_attention_snapshots_grid():
    labels = plots.token_labels(2)
    fig = plots.plot_attention_snapshots(fake_patterns(3), [0, 50, 100], labels)
    assert len(fig.data) == 6
    # each checkpoint heads its column; each panel names its layer in its masked corner
    titles = [a.text for a in fig.layout.annotations if a.yref == "paper"]
    assert titles == ["step 0", "step 50", "step 100"]
    corners = [(a.text, a.xref, a.x, a.y) for a in fig.layout.annotations if a.yref != "paper"]
    assert [c[:2] for c in corners] == [
        ("layer 1", "x domain"),
        ("layer 1", "x2 domain"),
        ("layer 1", "x3 domain"),
        ("layer 2", "x4 domain"),
        ("layer 2", "x5 domain"),
        ("layer 2", "x6 domain"),
    ]
    assert all(x > 0.9 and y > 0.9 for *_, x, y in corners)  # top right: above the diagonal
    assert sum(bool(t.showscale) for t in fig.data) == 1  # one shared colour bar
    assert fig.layout.xaxis4.title.text == "key" and fig.layout.yaxis4.title.text == "query"
    # every token labelled on the outer axes (plotly would thin crowded labels out)
    assert fig.layout.xaxis4.tickmode == "array" and list(fig.layout.xaxis4.tickvals) == labels
    assert fig.layout.xaxis4.showticklabels and not fig.layout.xaxis1.showticklabels
    assert list(fig.layout.yaxis4.tickvals) == labels and fig.layout.yaxis4.showticklabels
    with pytest.raises(ValueError, match="captions"):
        plots.plot_attention_snapshots(fake_patterns(2), [0, 50], labels, captions=["x"])


def test_the_snapshot_captions_belong_to_their_whole_checkpoint():
    """Across, a checkpoint's IC accuracy heads its column, above both layers; with ``tall`` (a
    checkpoint per row) every panel of the row carries it."""
    labels = plots.token_labels(2)
    captions = ["IC acc 0.10", "IC acc 0.55", "IC acc 0.97"]
    fig = plots.plot_attention_snapshots(fake_patterns(3), [0, 50, 100], labels, captions=captions)
    notes = [a for a in fig.layout.annotations if "IC acc" in a.text]
    assert [a.text for a in notes] == [f"step {s}<br>{c}" for s, c in zip((0, 50, 100), captions)]
    assert all(a.yref == "paper" for a in notes)
    top = max(fig.layout[f"yaxis{i}"].domain[1] for i in range(1, 7))
    for col, note in enumerate(notes, start=1):
        x0, x1 = fig.layout[f"xaxis{col}"].domain
        assert note.x == pytest.approx((x0 + x1) / 2) and note.y >= top - 1e-9
    tall = plots.plot_attention_snapshots(
        fake_patterns(2), [0, 50], labels, captions=captions[:2], tall=True
    )
    assert [a.text for a in tall.layout.annotations if a.yref == "paper"] == [
        "step 0<br>IC acc 0.10",
        "step 0<br>IC acc 0.10",
        "step 50<br>IC acc 0.55",
        "step 50<br>IC acc 0.55",
    ]
    assert tall.layout.yaxis3.title.text == "query" and not tall.layout.yaxis4.title.text


def test_phase_diagram_averages_seeds():
    rows = [
        {"K": K, "B": B, "seed": s, "ic_acc": K / 1000 + B / 10 + s / 100, "iw_acc": 1 - K / 1000}
        for K in (128, 512)
        for B in (1, 2, 4)
        for s in (0, 1)
    ]
    fig = sweep_plots.plot_phase_diagram(pd.DataFrame(rows), "K", "B", note="toy")
    assert len(fig.data) == 2
    ic = fig.data[0]
    assert list(ic.x) == ["128", "512"] and list(ic.y) == ["1", "2", "4"]
    assert ic.z[1][0] == pytest.approx(0.128 + 0.2 + 0.005)  # B=2, K=128, mean of seeds
    assert fig.layout.xaxis.title.text == "K" and fig.layout.yaxis.title.text == "B"
    assert [a.text for a in fig.layout.annotations] == ["final IC accuracy", "final IW accuracy"]
    assert "toy" in fig.layout.title.text
    with pytest.raises(ValueError, match="lacks columns"):
        sweep_plots.plot_phase_diagram(pd.DataFrame(rows), "K", "eps")


def test_landscape_with_trajectory():
    xs, ys = np.linspace(0, 1, 4), np.linspace(0, 2, 3)
    Z = np.arange(12.0).reshape(3, 4)
    traj = pd.DataFrame({"alpha": [0.0, 0.5, 1.0], "xi": [0.0, 1.0, 2.0]})
    fig = pplots.plot_landscape(xs, ys, Z, traj, fixed={"beta1": 0.0}, note="L=32")
    assert [t.name for t in fig.data] == ["loss", "trajectory", "start", "end"]
    assert fig.data[0].type == "contour"
    np.testing.assert_allclose(fig.data[1].x, traj["alpha"])
    assert list(fig.data[3].y) == [2.0]
    assert "α" in fig.layout.xaxis.title.text and "ξ" in fig.layout.yaxis.title.text
    assert "beta1 = 0" in fig.layout.title.text and "L=32" in fig.layout.title.text
    assert len(pplots.plot_landscape(xs, ys, Z).data) == 1
    with pytest.raises(ValueError, match="Z must be"):
        pplots.plot_landscape(xs, ys, Z.T)
    with pytest.raises(ValueError, match="trajectory lacks"):
        pplots.plot_landscape(xs, ys, Z, traj, x="beta1")


def test_fit_overlay():
    m = fake_metrics(0)
    pred = pd.DataFrame({"step": np.linspace(0, 2000, 50)})
    for c in ("ic_loss", "ic_acc", "ila1", "t"):
        pred[c] = np.linspace(0, 1, 50)
    fig = pplots.plot_fit_overlay(
        m, pred, fitted_step=1100, observed_step=1000, cutoff_step=800, note="Adam"
    )
    assert [t.name for t in fig.data] == [
        "IC loss (run)",
        "IC loss (fit)",
        "IC (run)",
        "IC (fit)",
        "ILA1 (run)",
        "ILA1 (fit)",
    ]
    assert [t.mode for t in fig.data[:2]] == ["markers", "lines"]
    assert [a.text for a in fig.layout.annotations][:2] == ["loss", "accuracy / attention"]
    assert fig.layout.xaxis.title.text == "training step"
    assert list(fig.layout.xaxis.range) == list(fig.layout.xaxis2.range) == [0, 2000]
    legend_shapes = [s.name for s in fig.layout.shapes if s.showlegend]
    # a fit that saw steps <= 800 forecasts; the step seen on the data is the observed transition
    assert legend_shapes == [
        "observed transition (step 1000)",
        "forecast (fit on steps <= 800) (step 1100)",
        "not seen by the fit",
    ]
    lines = {s.name: s for s in fig.layout.shapes if s.showlegend and "step 1" in s.name}
    colors = {s.line.color for s in lines.values()}
    assert len(colors) == 2  # told apart by colour, not only by dash
    # a label on the outer side of each line: the earlier to the left, the later to the right
    observed, fitted = fig.layout.annotations[2:]
    assert (observed.text, observed.x, observed.xanchor) == ("1000", 1000, "right")
    assert (fitted.text, fitted.x, fitted.xanchor) == ("1100", 1100, "left")
    assert "Adam" in fig.layout.title.text
    # a fit to the whole curve is the fitted transition, never a forecast
    fig = pplots.plot_fit_overlay(m, pred, fitted_step=1100, observed_step=1000)
    names = [s.name for s in fig.layout.shapes if s.showlegend]
    assert names == ["observed transition (step 1000)", "fitted transition (step 1100)"]
    fig = pplots.plot_fit_overlay(m, pred, columns=["ila1"])
    assert len(fig.data) == 2 and not fig.layout.shapes
    with pytest.raises(ValueError, match="share none"):
        pplots.plot_fit_overlay(m, pred[["step", "t"]])
    with pytest.raises(ValueError, match="not in both"):
        pplots.plot_fit_overlay(m, pred, columns=["cla"])


def test_summarize_runs_feeds_the_phase_diagram(tmp_path):
    import json

    from interp.config.train_config import TrainConfig
    from interp.data.task import TaskConfig
    from interp.io.rundir import configs_dict
    from interp.model.network import ModelConfig
    from interp.viz.figures import summarize_runs

    dirs = []
    for K in (16, 64):
        for B in (1, 2):
            d = tmp_path / f"K{K}-B{B}"
            d.mkdir()
            task = TaskConfig(D=15, K=K, L=8, N=4, N_max=4, B=B)
            config = configs_dict(
                task, ModelConfig.from_task(task), TrainConfig(seed=0, optimizer="adam")
            )
            (d / "config.json").write_text(json.dumps(config))
            m = fake_metrics(0).assign(ic_acc=np.linspace(0, K / 100 + B / 10, 21))
            m.to_csv(d / "metrics.csv", index=False)
            dirs.append(d)
    summary = summarize_runs(dirs)
    assert list(summary[["K", "B"]].itertuples(index=False, name=None)) == [
        (16, 1),
        (16, 2),
        (64, 1),
        (64, 2),
    ]
    assert summary["step"].tolist() == [2000] * 4
    np.testing.assert_allclose(summary["ic_acc"], [0.26, 0.36, 0.74, 0.84])
    fig = sweep_plots.plot_phase_diagram(summary, "K", "B")
    assert fig.data[0].z[1][1] == pytest.approx(0.84)


def test_checkpoint_selection():
    from interp.viz.figures import key_checkpoints, select_checkpoints

    steps = [0, 1, 5, 24, 50, 100, 121, 200, 300, 400, 500, 600]
    assert select_checkpoints(steps[:5], 8) == steps[:5]
    chosen = select_checkpoints(steps, 6, transition_step=350)
    assert len(chosen) == 6 and chosen[0] == 0 and chosen[-1] == 600
    assert {300, 400} <= set(chosen)  # either side of the transition
    assert key_checkpoints(steps, 350) == [0, 300, 400, 600]
    assert key_checkpoints(steps) == [0, 50, 200, 600]  # by index: 0, 1/3, 2/3, 1


def test_key_checkpoints_by_accuracy_start_plateau_jump_end():
    from interp.viz.figures import key_checkpoints

    # plateau at 0.1 up to step 300, jump to 0.9 between 300 and 400, dense checkpoints in it
    metrics = pd.DataFrame(
        {
            "step": [0, 100, 200, 300, 340, 350, 360, 400, 500],
            "ic_acc": [0.0, 0.1, 0.1, 0.1, 0.3, 0.5, 0.6, 0.9, 1.0],
        }
    )
    steps = [0, 100, 200, 300, 340, 350, 360, 400, 500]
    # start; last plateau checkpoint (share <= 0.1); the jump's middle (share 0.5); end.
    # 340 and 360 look like 350 and are not chosen.
    assert key_checkpoints(steps, 352, metrics=metrics) == [0, 300, 350, 500]
    # accuracy between evaluations is interpolated: checkpoint 325 has IC acc 0.2
    assert key_checkpoints([0, 200, 325, 500], 352, metrics=metrics) == [0, 200, 325, 500]
    # no rise: the plain rule
    flat = metrics.assign(ic_acc=0.1)
    assert key_checkpoints(steps, 352, metrics=flat) == [0, 350, 360, 500]
    # no accuracy recorded: the plain rule
    empty = metrics.assign(ic_acc=float("nan"))
    assert key_checkpoints(steps, 352, metrics=empty) == [0, 350, 360, 500]


def test_the_explorer_measures_each_have_their_own_colour():
    """IC and IW accuracy and every progress measure drawn beside the attention map: no two share a
    colour (IW and the previous-token score did)."""
    from interp.viz.explorer import measure_columns

    columns = measure_columns()
    colors = [plots.METRIC_COLORS[c] for c in columns]
    assert len(set(colors)) == len(columns), dict(zip(columns, colors, strict=True))


def test_an_explorer_measure_equal_to_an_earlier_one_is_dashed_and_named_so():
    """At B = 1 the induction score equals TILA2: beside the attention map both curves stay
    visible (the later one dashed) and its legend says which curve it repeats."""
    import pandas as pd

    from interp.viz.explorer import _measure_styles, measures_figure

    steps = np.arange(0, 1000, 100.0)
    rising = 1 / (1 + np.exp(-(steps - 500) / 50))
    metrics = pd.DataFrame(
        {"step": steps, "tila2": rising, "induction_score": rising, "ila1": 1 - rising}
    )
    styles = _measure_styles(metrics, ["tila2", "induction_score", "ila1"])
    assert styles["dashes"] == {"tila2": "solid", "induction_score": "dash", "ila1": "solid"}
    twin = plots.METRIC_LABELS["tila2"]
    assert (
        styles["labels"]["induction_score"]
        == f"{plots.METRIC_LABELS['induction_score']} (= {twin})"
    )
    assert styles["labels"]["ila1"] == plots.METRIC_LABELS["ila1"]
    data = {"measures": metrics.to_dict("list"), **styles}
    fig = measures_figure(data)
    assert [t.line.dash for t in fig.data] == ["solid", "dash", "solid"]
