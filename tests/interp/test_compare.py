import numpy as np
import pandas as pd
import pytest

from interp.analysis.compare import config_fields, group_mean, group_runs
from interp.analysis.transition import transition_report
from interp.io.rundir import load_run
from interp.viz.compare_plots import comparison_figures
from tests.interp.tiny_runs import logistic_metrics, tiny_run

# Two configs (K = 32, K = 64) x two seeds; the IC-accuracy curves are replaced by clean
# logistics with known midpoints: K=32 seeds at 300 and 340, K=64 seeds at 600 and 640.
MIDPOINTS = {(32, 0): 300, (32, 1): 340, (64, 0): 600, (64, 1): 640}


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    dirs = []
    for (K, seed), mid in MIDPOINTS.items():
        d = tiny_run(root / f"K{K}-s{seed}", K=K, seed=seed, steps=10)
        logistic_metrics(mid).to_csv(d / "metrics.csv", index=False)
        dirs.append(d)
    return dirs


def test_two_configs_two_seeds_make_two_groups_labelled_by_K(four_runs):
    runs = [load_run(d) for d in four_runs]
    groups = group_runs(runs)
    assert [g.label for g in groups] == ["K=32", "K=64"]
    assert [g.differing_fields for g in groups] == [{"task.K": 32}, {"task.K": 64}]
    assert [g.seeds for g in groups] == [[0, 1], [0, 1]]
    assert [g.names for g in groups] == [["K32-s0", "K32-s1"], ["K64-s0", "K64-s1"]]
    assert "train.seed" not in config_fields(runs[0])


def test_one_config_is_one_group(four_runs):
    groups = group_runs([load_run(d) for d in four_runs[:2]])
    assert len(groups) == 1 and groups[0].label == "one config"
    assert groups[0].differing_fields == {}


def test_two_differing_fields_both_named(tmp_path, four_runs):
    other = tiny_run(tmp_path / "K64-steps20", K=64, seed=0, steps=20)
    groups = group_runs([load_run(four_runs[0]), load_run(other)])
    assert [g.label for g in groups] == ["K=32, steps=10", "K=64, steps=20"]


def test_group_mean_averages_only_seeds_of_one_config(four_runs):
    groups = group_runs([load_run(d) for d in four_runs])
    expected = (logistic_metrics(300)["ic_acc"] + logistic_metrics(340)["ic_acc"]) / 2
    np.testing.assert_allclose(group_mean(groups[0])["ic_acc"], expected)
    figs = comparison_figures(groups)
    traces = {t.name: t for t in figs["training_dynamics"].data if t.name}
    assert set(traces) == {"K=32 (mean of 2 seeds)", "K=64 (mean of 2 seeds)"}
    # the IC-accuracy panel of K=64 is its own seeds' mean, not all four runs'
    ic = [t for t in figs["training_dynamics"].data if "ic_acc" in t.hovertemplate]
    k64 = next(t for t in ic if t.name.startswith("K=64"))
    mean64 = (logistic_metrics(600)["ic_acc"] + logistic_metrics(640)["ic_acc"]) / 2
    np.testing.assert_allclose(k64.y, mean64)
    # each config's mean transition, dashed in its colour: (300+340)/2 and (600+640)/2
    xs = sorted({round(s.x0) for s in figs["training_dynamics"].layout.shapes})
    assert xs == [pytest.approx(320, abs=3), pytest.approx(620, abs=3)]


def test_transition_report_summarises_each_config_separately(four_runs):
    report = transition_report(four_runs).set_index("run")
    assert report.loc["mean [K=32]", "step"] == pytest.approx(320, abs=3)
    assert report.loc["mean [K=64]", "step"] == pytest.approx(620, abs=3)
    assert report.loc["std [K=32]", "step"] == pytest.approx(np.std([300, 340], ddof=1), abs=3)
    assert "mean" not in report.index  # no mean across the two configs
    assert list(report["config"].iloc[:2]) == ["K=32", "K=32"]


def test_figures_command_draws_configs_side_by_side(tmp_path, four_runs):
    from interp.cli import main

    assert main(["figures", *map(str, four_runs), "--out", str(tmp_path), "--formats", "html"]) == 0
    data = pd.read_csv(tmp_path / "training_dynamics.csv")  # a column per drawn curve
    names = set(data.columns)
    assert {"K=32 (mean of 2 seeds)", "K=64 (mean of 2 seeds)"} <= names
    assert not any("faint" in str(n) for n in names)
