"""Sweeps: grid expansion and names, validation before any work, resumption, failures, the
process and Ray backends, the summary and the phase-diagram figure."""

import dataclasses
import importlib.util
import json
import os
import time

import numpy as np
import pandas as pd
import pytest

from interp.cli import main
from interp.experiments import sweep
from interp.experiments.standard import train
from interp.experiments.sweep import SweepDirectoryError, SweepSpec, run_sweep
from interp.train.presets import get_preset
from interp.train.training import TrainingDiverged
from interp.viz import export
from interp.viz.sweep_plots import plot_sweep, plot_sweep_curves
from tests.interp.tiny_runs import FAST_SWEEP as FAST
from tests.waits import HANG_S, descendants, next_serial, stop_started

SUMMARY_COLUMNS = [
    "point",
    "K",
    "seed",
    "steps",
    "steps_done",
    "ic_acc",
    "ic2_acc",
    "iw_acc",
    "transition_step",
    "transition_width",
    "plateau_level",
    "plateau_measured",
    "plateau_length",
    "transition_reason",
    "status",
    "error",
]


def spec(grid=None, seeds=(0,), **overrides):
    return SweepSpec(
        preset="tiny",
        grid={"K": (16, 32)} if grid is None else grid,
        overrides={**FAST, **overrides},
        seeds=seeds,
    )


def silent(line: str) -> None:
    """A sweep's progress log that prints nothing."""


def test_grid_expansion_names_and_references():
    s = SweepSpec(preset="tiny", grid={"K": (16, 32), "B": (1, 2)}, seeds=(0, 1))
    points = s.points()
    assert [p.name for p in points] == [
        f"K={K}_B={B}_seed={seed}" for K in (16, 32) for B in (1, 2) for seed in (0, 1)
    ]
    p = points[5]  # K=32, B=1, seed 1
    assert (p.task.K, p.task.B, p.train.seed, p.values) == (32, 1, 1, {"K": 32, "B": 1})
    assert p.model.L == p.task.L == 8 and p.task.D == 15  # the rest from the preset
    # values given as strings (the command line) give the same, typed, points
    same = SweepSpec(preset="tiny", grid={"K": ["16", "32"], "B": ["1", "2"]}, seeds=(0, 1))
    assert [q.name for q in same.points()] == [q.name for q in points]
    assert same.points()[5].values == {"K": 32, "B": 1}
    # a value naming another field refers to it: L = N versus L = 8 (K=64 is a multiple of both)
    ln = SweepSpec(preset="tiny", grid={"N": (2, 4), "L": ("N", 8)}).points()
    assert [q.name for q in ln] == [
        "N=2_L=N_seed=0",
        "N=2_L=8_seed=0",
        "N=4_L=N_seed=0",
        "N=4_L=8_seed=0",
    ]
    assert [(q.task.N, q.task.L) for q in ln] == [(2, 2), (2, 8), (4, 4), (4, 8)]
    # B = 0 means no bursty sequences (the tiny preset has p_C = 0.5): p_B = p_C = 0 there
    b0, b1 = SweepSpec(preset="tiny", grid={"B": (0, 1)}).points()
    assert (b0.task.p_B, b0.task.p_C) == (0.0, 0.0) and (b1.task.p_B, b1.task.p_C) == (1.0, 0.5)
    # floats are named compactly
    assert SweepSpec(preset="tiny", grid={"lr": (1e-3,)}).points()[0].name == "lr=0.001_seed=0"


def test_from_preset_replaces_axes_in_place_and_set_fixes_one():
    s = SweepSpec.from_preset("fig2-kb-quick")
    assert s.grid == {"K": (128, 256, 512, 2048), "B": (0, 1, 2, 4)} and s.seeds == (0,)
    assert len(s.points()) == 16
    s = SweepSpec.from_preset("fig2-kb-quick", grid={"B": ["0", "1"], "eps": ["0.1", "0.5"]})
    assert list(s.grid) == ["K", "B", "eps"] and s.grid["B"] == ("0", "1")
    s = SweepSpec.from_preset("fig2-kb-quick", overrides={"K": "256"}, seeds=(1, 2))
    assert s.grid == {"B": (0, 1, 2, 4)} and s.seeds == (1, 2)
    # a plain training preset: its one config over several seeds
    s = SweepSpec.from_preset("paper-fig1d", seeds=sweep.parse_seeds("0-2,5"))
    assert [p.name for p in s.points()] == ["seed=0", "seed=1", "seed=2", "seed=5"]


def test_quanta_preset_points_evaluate_every_class_and_learn_iw():
    points = SweepSpec.from_preset("quanta-alpha").points()
    assert sorted({p.task.alpha for p in points}) == [0.5, 1.0, 1.5] and len(points) == 9
    for p in points:
        assert p.train.per_class_iw == 8 and p.task.K == 512
        assert p.task.p_B < 1 and p.task.B > 0  # non-bursty sequences (IW) and bursty (ICL)
        assert p.train.steps * p.train.batch_size * (1 - p.task.p_B) > 3e5  # IW sequences seen


def test_parse_grid_and_seeds():
    assert sweep.parse_grid(["K=128, 256", "L=N,32"]) == {"K": ["128", "256"], "L": ["N", "32"]}
    assert sweep.parse_seeds("0-2,7") == (0, 1, 2, 7)
    with pytest.raises(ValueError, match="--grid 'K' is invalid"):
        sweep.parse_grid(["K"])
    with pytest.raises(ValueError, match="--seeds '3-1' is invalid"):
        sweep.parse_seeds("3-1")


def test_invalid_points_are_named_before_any_training(tmp_path):
    out = tmp_path / "sweep"
    bad = spec(grid={"K": (16, 20), "B": (1, 3)})
    with pytest.raises(ValueError) as err:
        run_sweep(bad, out, backend="serial", figures=False, log=silent)
    message = str(err.value)
    assert "3 invalid point(s), nothing was trained" in message
    assert "point K=16, B=3, seed=0: TaskConfig.B=3 is invalid: allowed values for N=4" in message
    assert "[1, 2]" in message
    assert (
        "point K=20, B=1, seed=0: TaskConfig.K=20 is invalid: must be a multiple of L=8" in message
    )
    assert not out.exists()
    with pytest.raises(ValueError, match="grid field 'Kay' is unknown: allowed fields are"):
        SweepSpec(preset="tiny", grid={"Kay": (1,)})
    with pytest.raises(ValueError, match="cannot hold 'seed'"):
        SweepSpec(preset="tiny", grid={"seed": (1, 2)})
    with pytest.raises(ValueError, match="backend='dask' is invalid"):
        run_sweep(spec(), out, backend="dask")


def test_serial_sweep_writes_runs_summary_and_figure(tmp_path):
    out = tmp_path / "sweep"
    lines = []
    summary = run_sweep(spec(), out, backend="serial", formats=("html",), log=lines.append)
    assert (out / "sweep.json").exists()
    for name in ("K=16_seed=0", "K=32_seed=0"):
        metrics = pd.read_csv(out / name / "metrics.csv")
        assert metrics["step"].tolist() == [0, 10, 20, 30, 40]
        assert json.loads((out / name / "config.json").read_text())["train"]["num_threads"] == 1
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert summary["point"].tolist() == ["K=16_seed=0", "K=32_seed=0"]
    assert summary["K"].tolist() == [16, 32] and summary["status"].tolist() == ["done", "done"]
    assert summary["steps_done"].tolist() == [40, 40]
    last = pd.read_csv(out / "K=32_seed=0" / "metrics.csv").iloc[-1]
    assert summary["iw_acc"].iloc[1] == pytest.approx(last["iw_acc"])
    # no transition in 40 steps: NaN and the reason
    assert summary["transition_step"].isna().all() and (summary["transition_reason"] != "").all()
    on_disk = pd.read_csv(out / "summary.csv")
    assert list(on_disk.columns) == SUMMARY_COLUMNS and len(on_disk) == 2
    over = pd.read_csv(out / "summary_over_seeds.csv")
    assert over["K"].tolist() == [16, 32] and over["n_seeds"].tolist() == [1, 1]
    assert over["ic_acc_mean"].tolist() == pytest.approx(summary["ic_acc"].tolist())
    # the 1-D figure: IC / IC2 / IW against K, its data beside it
    data = pd.read_csv(out / "figures" / "phase_diagram.csv")
    assert (out / "figures" / "phase_diagram.html").exists()
    # tidy: a row per K (the first column), a column per curve
    assert data.iloc[:, 0].tolist() == [16, 32]
    assert data["IC"].tolist() == pytest.approx(summary["ic_acc"].tolist())
    assert "0 finished (skipped), 0 to resume, 2 to train" in lines[0]
    # a second run skips both points and rewrites nothing of theirs
    mtimes = [(out / n / "metrics.csv").stat().st_mtime_ns for n in summary["point"]]
    lines.clear()
    again = run_sweep(spec(), out, backend="serial", figures=False, log=lines.append)
    assert "2 finished (skipped), 0 to resume, 0 to train" in lines[0]
    assert [(out / n / "metrics.csv").stat().st_mtime_ns for n in summary["point"]] == mtimes
    pd.testing.assert_frame_equal(again, summary)


def test_partial_point_resumes_bit_exactly_and_finished_point_is_skipped(tmp_path):
    out = tmp_path / "sweep"
    s = spec()
    partial, finished = s.points()
    one_thread = lambda p: dataclasses.replace(p.train, num_threads=1)  # noqa: E731
    train(
        partial.task,
        partial.model,
        one_thread(partial),
        out / partial.name,
        progress=False,
        stop_after=23,
    )
    train(finished.task, finished.model, one_thread(finished), out / finished.name, progress=False)
    mtime = (out / finished.name / "metrics.csv").stat().st_mtime_ns
    lines = []
    summary = run_sweep(s, out, backend="serial", figures=False, log=lines.append)
    assert "1 finished (skipped), 1 to resume, 0 to train" in lines[0]
    assert "K=16_seed=0: resumed, done at step 40" in lines[1]
    assert (out / finished.name / "metrics.csv").stat().st_mtime_ns == mtime  # not retrained
    status = json.loads((out / "status.json").read_text())
    assert (
        status[partial.name]["action"] == "resumed" and status[finished.name]["action"] == "skipped"
    )
    assert summary["status"].tolist() == ["done", "done"]
    uninterrupted = train(
        partial.task, partial.model, one_thread(partial), tmp_path / "ref", progress=False
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(out / partial.name / "metrics.csv"),
        pd.read_csv(tmp_path / "ref" / "metrics.csv"),
    )
    assert len(uninterrupted) == 5


def test_partial_point_with_per_class_iw_resumes_to_the_same_file(tmp_path):
    """per_class_iw.csv, like metrics.csv, is written from the resume state: a point stopped
    between evaluations and finished by the sweep has the file of an uninterrupted run."""
    out = tmp_path / "sweep"
    s = spec(grid={"K": (16,)}, per_class_iw="4")
    (point,) = s.points()
    one_thread = dataclasses.replace(point.train, num_threads=1)
    assert one_thread.per_class_iw == 4
    train(point.task, point.model, one_thread, out / point.name, progress=False, stop_after=23)
    run_sweep(s, out, backend="serial", figures=False, log=silent)
    train(point.task, point.model, one_thread, tmp_path / "ref", progress=False)
    for name in ("per_class_iw.csv", "metrics.csv"):
        assert (out / point.name / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
    assert list(pd.read_csv(out / point.name / "per_class_iw.csv").columns) == [
        "step",
        *(f"c{k}" for k in range(16)),
    ]


def test_interrupted_sweep_resumes(tmp_path, monkeypatch):
    """Ctrl-C in the middle of a point: train() saves the state, the sweep writes its summary and
    raises KeyboardInterrupt; the same call again finishes it, equal to an uninterrupted sweep."""
    import interp.experiments.standard

    real_train = interp.experiments.standard.train

    def interrupted_train(*args, **kwargs):
        real_train(*args, **{**kwargs, "stop_after": 15})
        raise KeyboardInterrupt  # as train() does after saving its state

    monkeypatch.setattr(interp.experiments.standard, "train", interrupted_train)
    out = tmp_path / "sweep"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec(), out, backend="serial", figures=False, log=silent)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["status"].tolist() == ["interrupted", "pending"]
    assert summary["steps_done"].tolist() == [10, 0]  # the last evaluation before step 15
    monkeypatch.setattr(interp.experiments.standard, "train", real_train)
    resumed = run_sweep(spec(), out, backend="serial", figures=False, log=silent)
    reference = run_sweep(spec(), tmp_path / "ref", backend="serial", figures=False, log=silent)
    assert resumed["status"].tolist() == ["done", "done"]
    cols = ["ic_acc", "ic2_acc", "iw_acc", "steps_done"]
    pd.testing.assert_frame_equal(resumed[cols], reference[cols])


def test_failed_point_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    import interp.experiments.standard

    real_train = interp.experiments.standard.train

    def diverging(task, *args, **kwargs):
        if task.K == 16:
            raise TrainingDiverged("training loss became nan at step 7; stopped.")
        return real_train(task, *args, **kwargs)

    monkeypatch.setattr(interp.experiments.standard, "train", diverging)
    summary = run_sweep(spec(), tmp_path / "s", backend="serial", figures=False, log=silent)
    assert summary["status"].tolist() == ["failed", "done"]
    assert (
        summary["error"].iloc[0] == "TrainingDiverged: training loss became nan at step 7; stopped."
    )
    assert summary["steps_done"].tolist() == [0, 40]


def test_a_different_sweep_in_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "sweep"
    run_sweep(spec(grid={"K": (16,)}), out, backend="serial", figures=False, log=silent)
    with pytest.raises(SweepDirectoryError, match="holds a different sweep.*--overwrite"):
        run_sweep(spec(grid={"K": (32,)}), out, backend="serial", log=silent)
    with pytest.raises(SweepDirectoryError, match=r"point K=16_seed=0 differs \(train.lr"):
        run_sweep(spec(grid={"K": (16,)}, lr="0.01"), out, backend="serial", log=silent)
    # more steps extend the same sweep (as --resume extends a run)
    longer = run_sweep(
        spec(grid={"K": (16,)}, steps="50"), out, backend="serial", figures=False, log=silent
    )
    assert longer["steps_done"].tolist() == [50]
    fresh = run_sweep(
        spec(grid={"K": (32,)}), out, backend="serial", overwrite=True, figures=False, log=silent
    )
    assert fresh["point"].tolist() == ["K=32_seed=0"] and not (out / "K=16_seed=0").exists()


def test_process_backend_runs_two_points_like_the_serial_one(tmp_path):
    lines = []
    pooled = run_sweep(
        spec(), tmp_path / "pool", backend="process", workers=2, figures=False, log=lines.append
    )
    assert "on 2 worker process(es) x 1 thread(s)" in lines[0]
    serial = run_sweep(spec(), tmp_path / "serial", backend="serial", figures=False, log=silent)
    cols = ["point", "status", "steps_done", "ic_acc", "ic2_acc", "iw_acc"]
    pd.testing.assert_frame_equal(pooled[cols], serial[cols])


def test_stacked_seeds_give_the_runs_of_unstacked_ones(tmp_path):
    from interp.experiments.sweep_backends import stack_jobs

    s = spec(grid={"K": (16, 32)}, seeds=(0, 1, 2))
    jobs = stack_jobs(s.points(), 2)  # per K: seeds {0, 1} together, seed 2 alone
    assert [[p.name for p in j] for j in jobs] == [
        ["K=16_seed=0", "K=16_seed=1"],
        ["K=16_seed=2"],
        ["K=32_seed=0", "K=32_seed=1"],
        ["K=32_seed=2"],
    ]
    lines = []
    stacked = run_sweep(
        s, tmp_path / "stacked", backend="serial", stack=2, figures=False, log=lines.append
    )
    assert "in 4 job(s) of up to 2 stacked seeds" in lines[0]
    alone = run_sweep(s, tmp_path / "alone", backend="serial", figures=False, log=silent)
    assert list(stacked["point"]) == list(alone["point"])
    assert (stacked["status"] == "done").all() and (stacked["steps_done"] == 40).all()
    # Equal to float rounding (stacked products add in another order), not bit for bit.
    for col in ("ic_acc", "ic2_acc", "iw_acc"):
        np.testing.assert_allclose(stacked[col], alone[col], atol=0.02, err_msg=col)
    a = pd.read_csv(tmp_path / "stacked" / "K=32_seed=1" / "metrics.csv")
    b = pd.read_csv(tmp_path / "alone" / "K=32_seed=1" / "metrics.csv")
    np.testing.assert_allclose(a["train_loss"][1:], b["train_loss"][1:], rtol=1e-3)
    # An interventions preset cannot stack: each point is its own job.
    no_stack = spec(intervention="uniform_layer1")
    assert all(len(j) == 1 for j in stack_jobs(no_stack.points(), 4))
    with pytest.raises(ValueError, match="stack=0 is invalid"):
        run_sweep(s, tmp_path / "bad", stack=0, log=silent)


def start_local_ray(monkeypatch, num_cpus: int, budget_s: float = HANG_S):
    """Ray, started as a local instance of ``num_cpus`` CPUs within ``budget_s`` seconds. Ray
    gives its node a fixed 30 s to come up, which a loaded machine can miss: a start that timed
    out is tried again until the budget is spent, then the test is skipped, saying so. Its
    workers get the budget to register, and its node 100 missed health checks in a row."""
    import ray

    for name, value in (
        ("worker_register_timeout_seconds", budget_s),
        ("health_check_failure_threshold", 100),
    ):
        monkeypatch.setenv(f"RAY_{name}", str(int(value)))
    end, tries = time.monotonic() + budget_s, 0
    while True:
        tries += 1
        before, serial = descendants(), next_serial()
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False)
            return ray
        except Exception as err:  # ray raises a bare Exception when its node misses its 30 s
            ray.shutdown()
            stop_started(before, serial)  # the processes of a node that never came up
            if "timed out" not in str(err).lower():
                raise
            if time.monotonic() > end:
                pytest.skip(
                    f"a local Ray node did not start in {budget_s:.0f} s ({tries} tries; "
                    f"the machine is too loaded): {err}"
                )


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="ray is not installed (pip install 'induction-cliff[ray]')",
)
def test_ray_backend_runs_the_same_sweep_locally(tmp_path, monkeypatch):
    ray = start_local_ray(monkeypatch, num_cpus=2)
    try:
        on_ray = run_sweep(spec(), tmp_path / "ray", backend="ray", figures=False, log=silent)
        assert ray.is_initialized()  # a cluster it did not start stays up
    finally:
        ray.shutdown()
    serial = run_sweep(spec(), tmp_path / "serial", backend="serial", figures=False, log=silent)
    cols = ["point", "status", "steps_done", "ic_acc", "ic2_acc", "iw_acc"]
    pd.testing.assert_frame_equal(on_ray[cols], serial[cols])


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_a_ray_node_slow_to_start_is_started_again_then_skipped_when_out_of_budget(monkeypatch):
    import ray

    tries = []

    def slow_node(**kwargs):
        tries.append(kwargs)
        if len(tries) < 3:
            raise Exception("The current node timed out during startup. This could happen ...")

    monkeypatch.setattr(ray, "init", slow_node)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    assert start_local_ray(monkeypatch, num_cpus=2) is ray and len(tries) == 3
    assert os.environ["RAY_worker_register_timeout_seconds"] == str(int(HANG_S))

    def never_up(**kwargs):
        raise Exception("The current node timed out during startup.")

    monkeypatch.setattr(ray, "init", never_up)
    with pytest.raises(pytest.skip.Exception, match=r"did not start in 0 s \(1 tries"):
        start_local_ray(monkeypatch, num_cpus=2, budget_s=0)

    def broken(**kwargs):
        raise ValueError("num_cpus must be positive")

    monkeypatch.setattr(ray, "init", broken)  # any other failure is the test's failure
    with pytest.raises(ValueError, match="num_cpus"):
        start_local_ray(monkeypatch, num_cpus=2)


def test_missing_ray_gives_the_install_hint(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(RuntimeError, match=r"pip install 'induction-cliff\[ray\]'"):
        run_sweep(spec(), tmp_path / "s", backend="ray", log=silent)
    assert not (tmp_path / "s").exists()


def test_phase_diagram_of_a_2d_grid_and_curves_of_a_1d_one():
    rows = [
        {"N": N, "L": L, "seed": s, "ic_acc": N / 10 + (L == "N") / 2 + s / 100, "iw_acc": 0.1}
        for N in (2, 8)
        for L in ("N", 32)
        for s in (0, 1)
    ]
    summary = pd.DataFrame(rows)
    fig = plot_sweep(summary, ["N", "L"], order={"N": [2, 8], "L": ["N", 32]}, note="adam")
    ic = fig.data[0]
    assert list(ic.x) == ["2", "8"] and list(ic.y) == ["N", "32"]  # grid order, names kept
    assert ic.z[0][1] == pytest.approx(0.8 + 0.5 + 0.005)  # L=N, N=8, mean of the seeds
    assert fig.layout.xaxis.title.text == "N" and fig.layout.yaxis.title.text == "L"
    assert "adam" in fig.layout.title.text
    one_d = pd.DataFrame(
        {"eps": [0.0, 0.0, 0.5, 0.5], "ic_acc": [0.1, 0.3, 0.6, 0.8], "ic2_acc": 0.2, "iw_acc": 0.9}
    )
    fig = plot_sweep_curves(one_d, "eps", order=[0.0, 0.5], title="eps sweep")
    means = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert list(means) == ["IC", "IC2", "IW"]
    np.testing.assert_allclose(means["IC"].y, [0.2, 0.7])
    np.testing.assert_allclose(means["IC"].error_y.array, [np.std([0.1, 0.3], ddof=1)] * 2)
    assert fig.layout.xaxis.type == "linear" and fig.layout.xaxis.title.text == "eps"
    assert (
        plot_sweep_curves(one_d.assign(eps=[128, 128, 2048, 2048]), "eps").layout.xaxis.type
        == "log"
    )
    with pytest.raises(ValueError, match="one or two fields"):
        plot_sweep(summary, ["N", "L", "seed"])


def test_cli_sweep_then_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    sets = [a for k, v in FAST.items() for a in ("--set", f"{k}={v}")]
    formats = "html,png" if export.find_chromium() else "html"
    argv = ["sweep", "--preset", "tiny", "--grid", "K=16,32", "--grid", "B=1,2", *sets]
    argv += ["--backend", "serial", "--out", str(out), "--formats", formats]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "K=16" not in printed and "done" in printed  # the table: columns, not point names
    summary = pd.read_csv(out / "summary.csv")
    assert summary["point"].tolist() == [f"K={K}_B={B}_seed=0" for K in (16, 32) for B in (1, 2)]
    data = pd.read_csv(out / "figures" / "phase_diagram.csv")
    # tidy: a row per cell, (panel, the y axis's field, the x axis's field, the value)
    _, y_field, x_field, value = data.columns
    ic = data[data["panel"] == "IC"]
    cell = ic[(ic[x_field] == 32) & (ic[y_field] == 2)][value].item()
    assert cell == pytest.approx(summary.set_index("point").loc["K=32_B=2_seed=0", "ic_acc"])
    if "png" in formats:
        assert (out / "figures" / "phase_diagram.png").read_bytes()[:4] == b"\x89PNG"
    # the summary and figure again, from disk only
    (out / "summary.csv").unlink()
    assert main(["sweep-summary", str(out), "--formats", "html"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), summary)
    # runs stopped before the default 1e5 steps say so in the title
    assert "steps (default: 1e5)" in (out / "figures" / "phase_diagram.html").read_text()
    # a rerun with only --out continues the sweep found there (here: nothing left to do)
    assert main(["sweep", "--out", str(out), "--no-figures"]) == 0
    assert main(["sweep", "--preset", "tiny", "--grid", "B=1,3", "--out", str(tmp_path / "x")]) == 2
    assert "B=3 is invalid" in capsys.readouterr().err


def test_encoding_presets_cover_the_controls_and_label_their_deviations():
    # pe-rope-bias: plain RoPE, + q/k bias, + constant dimension, both; two seeds each
    for name in ("pe-rope-bias", "pe-rope-bias-sgd"):
        points = SweepSpec.from_preset(name).points()
        assert len(points) == 8
        arms = {(p.model.qk_bias, p.model.positional_config.constant_dim) for p in points}
        assert arms == {(False, False), (False, True), (True, False), (True, True)}
        assert {p.model.positional for p in points} == {"rope"}
        assert "DEVIATION" in get_preset(name).note
    assert {p.train.optimizer for p in SweepSpec.from_preset("pe-rope-bias-sgd").points()} == {
        "sgd"
    }
    # pe-attn-scale: 3 encodings x 3 scales x 3 seeds, a table long enough for N = 64
    points = SweepSpec.from_preset("pe-attn-scale").points()
    assert len(points) == 27
    assert {(p.model.positional, p.model.attn_scale) for p in points} == {
        (pe, s) for pe in ("onehot", "learned", "cope") for s in ("none", "sqrt", "log_n")
    }
    assert all(p.task.N == 8 and p.task.N_max == 64 for p in points)
