"""The transition grid: runs trained in chunks equal one uninterrupted run bit for bit, ended runs
are skipped, a diverged run is kept as such, and an invalid point fails before anything trains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.experiments.transition_grid import (
    GridPoint,
    TransitionGrid,
    collect,
    run_grid,
    stop_rule,
)

BASE = {"optimizer": "sgd", "hidden_bias": "per_unit", "lr": 0.3, "eval_every": 50,
        "num_threads": 1, "live_forecast": False}  # fmt: skip


def test_chunks_equal_one_run_and_a_second_call_skips_it(tmp_path):
    from interp.experiments.standard import train
    from interp.train.overrides import build_configs

    grid = TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="a"),), seeds=(0,),
                          budget=200, chunk=100)  # fmt: skip
    assert run_grid(grid, tmp_path / "grid", workers=1, log=lambda _: None) == 1
    task, model, cfg, _ = build_configs("tiny", grid.overrides(grid.points[0]), 0)
    train(task, model, cfg, tmp_path / "whole", progress=False)
    chunked = (tmp_path / "grid" / "a-seed0" / "metrics.csv").read_bytes()
    assert chunked == (tmp_path / "whole" / "metrics.csv").read_bytes()
    assert run_grid(grid, tmp_path / "grid", workers=1, log=lambda _: None) == 0
    rows, curves = collect(grid, tmp_path / "grid")
    assert rows[["point", "seed", "steps", "budget", "status"]].values.tolist() == [
        ["a", 0, 200, 200, "ended"]
    ]
    assert rows["lr"].iloc[0] == 0.3 and rows["K"].iloc[0] == 64
    assert len(curves) == 5 and set(curves.columns) >= {"step", "ic_loss", "tila2"}


def test_a_diverged_run_is_an_outcome_and_a_bad_point_fails_first(tmp_path):
    grid = TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="hot", overrides={"lr": 1e4}),),
                          seeds=(0,), budget=200, chunk=100)  # fmt: skip
    run_grid(grid, tmp_path / "grid", workers=1, log=lambda _: None)
    rows, _ = collect(grid, tmp_path / "grid")
    assert rows["status"].tolist() == ["diverged"] and not rows["transitioned"].iloc[0]
    bad = TransitionGrid(
        preset="tiny", base=BASE, points=(GridPoint(name="x", overrides={"K": 7}),)
    )
    with pytest.raises(ValueError, match="grid point x: .*K"):
        run_grid(bad, tmp_path / "bad", workers=1)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="used twice"):
        TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="a"), GridPoint(name="a")))


def test_the_stop_rule_waits_for_room_after_the_transition():
    steps = np.arange(0, 8001, 100)
    acc = 0.05 + 0.9 / (1 + np.exp(-(steps - 3000) / 60))  # the midpoint at 3000, width ~260
    m = pd.DataFrame({"step": steps, "ic_acc": acc})
    # the midpoint at 3000 needs max(800, 15% of 3000, the width) = 800 steps after it
    assert not stop_rule(m[m["step"] <= 3500], budget=16000)
    assert stop_rule(m[m["step"] <= 3900], budget=16000)
    assert not stop_rule(m[m["step"] <= 2000], budget=16000)  # on the plateau
    assert stop_rule(m[m["step"] <= 1000], budget=1000)  # the budget is spent


def test_a_point_with_its_own_seeds_runs_those_and_bad_seeds_are_refused():
    grid = TransitionGrid(
        preset="tiny", base=BASE, seeds=(0, 1, 2),
        points=(GridPoint(name="a"), GridPoint(name="b", seeds=(4,))),
    )  # fmt: skip
    assert [(p.name, s) for p, s in grid.jobs()] == [("a", 0), ("a", 1), ("a", 2), ("b", 4)]
    for bad in ((), (1, 1), (-1,), (True,)):
        with pytest.raises(ValueError, match=r"TransitionGrid\.points\[b\]\.seeds=.* is invalid"):
            TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="b", seeds=bad),))
    with pytest.raises(ValueError, match=r"TransitionGrid\.seeds=\[\] is invalid"):
        TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="a"),), seeds=())
