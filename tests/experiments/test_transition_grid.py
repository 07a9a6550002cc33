"""The transition grid: runs trained in chunks equal one uninterrupted run bit for bit, ended runs
are skipped, a diverged run is kept as such, and an invalid point fails before anything trains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.transition_grid import (
    GridPoint,
    TransitionGrid,
    collect,
    run_grid,
    stop_rule,
)

BASE = {
    "optimizer": "sgd",
    "hidden_bias": "per_unit",
    "lr": 0.3,
    "eval_every": 50,
    "num_threads": 1,
    "live_forecast": False,
}


def test_chunks_equal_one_run_and_a_second_call_skips_it(tmp_path):
    from interp.experiments.standard import train
    from interp.train.overrides import build_configs

    grid = TransitionGrid(
        preset="tiny", base=BASE, points=(GridPoint(name="a"),), seeds=(0,), budget=200, chunk=100
    )
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
    grid = TransitionGrid(
        preset="tiny",
        base=BASE,
        points=(GridPoint(name="hot", overrides={"lr": 1e4}),),
        seeds=(0,),
        budget=200,
        chunk=100,
    )
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
    # a long run (to_budget) goes on past its transition, to its budget
    assert not stop_rule(m[m["step"] <= 7900], budget=8000, to_budget=True)
    assert stop_rule(m, budget=8000, to_budget=True)


def test_a_point_with_its_own_seeds_runs_those_and_bad_seeds_are_refused():
    grid = TransitionGrid(
        preset="tiny",
        base=BASE,
        seeds=(0, 1, 2),
        points=(GridPoint(name="a"), GridPoint(name="b", seeds=(4,))),
    )
    assert [(p.name, s) for p, s in grid.jobs()] == [("a", 0), ("a", 1), ("a", 2), ("b", 4)]
    for bad in ((), (1, 1), (-1,), (True,)):
        with pytest.raises(ValueError, match=r"TransitionGrid\.points\[b\]\.seeds=.* is invalid"):
            TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="b", seeds=bad),))
    with pytest.raises(ValueError, match=r"TransitionGrid\.seeds=\[\] is invalid"):
        TransitionGrid(preset="tiny", base=BASE, points=(GridPoint(name="a"),), seeds=())


def test_a_grown_grid_trains_only_its_new_runs_and_keeps_the_committed_rows(tmp_path, monkeypatch):
    from experiments.catalog import transition_law as tl
    from interp.experiments import get_experiment, reproduce

    def grid(*points):
        return TransitionGrid(
            preset="tiny", base=BASE, points=points, seeds=(0,), budget=200, chunk=100
        )

    a, b = GridPoint(name="a"), GridPoint(name="b", overrides={"lr": 0.6})
    out, said = tmp_path / "out", []
    exp = get_experiment("transition-law")

    def run(g, runs):
        monkeypatch.setitem(tl.GRIDS, "quick", g)
        said.clear()
        reproduce(exp, tier="quick", out=out, runs=tmp_path / runs, figures=False, log=said.append)
        return pd.read_csv(out / "transition-law.csv"), pd.read_csv(out / tl.CURVES)

    rows1, curves1 = run(grid(a, b), "r1")
    c = GridPoint(name="c", overrides={"lr": 0.45})
    rows2, curves2 = run(grid(a, b, c), "r2")  # a fresh runs folder: a and b's runs are gone
    assert "2 runs kept from" in said[0]
    trained = sorted(p.name for p in (tmp_path / "r2" / "transition-law" / "quick").iterdir())
    assert trained == ["c-seed0", "c-seed0.done.json"]
    assert rows2["point"].tolist() == ["a", "b", "c"]
    pd.testing.assert_frame_equal(rows2.iloc[:2], rows1)  # kept as committed, wall time and all
    pd.testing.assert_frame_equal(curves2[curves2["point"] != "c"], curves1)
    assert rows2.loc[2, "lr"] == 0.45 and len(curves2[curves2["point"] == "c"]) == 5

    b5 = GridPoint(name="b", overrides={"lr": 0.5})  # a point changed: its runs train again
    rows3, _ = run(grid(a, b5, c), "r3")
    assert "b-seed0: its lr changed" in said[0]
    relabelled, _ = run(grid(GridPoint(name="a", role="sub"), b5, c), "r3b")  # a label only
    assert relabelled["role"].tolist() == ["sub", "axis", "axis"]
    assert not (tmp_path / "r3b" / "transition-law" / "quick" / "a-seed0").exists()
    assert rows3["lr"].tolist() == [0.3, 0.5, 0.45]
    rows3[rows3["point"] != "b"].to_csv(out / "transition-law.csv", index=False)  # b's row lost
    rerun, _ = run(grid(a, b5), "r4")  # c no longer declared: dropped, and said
    assert "c-seed0: no longer declared" in said[0] and rerun["point"].tolist() == ["a", "b"]
    assert (tmp_path / "r4" / "transition-law" / "quick" / "b-seed0").is_dir()
    science = ["steps", "transitioned", "transition_step", "final_ic_loss", "final_ic_acc"]
    pd.testing.assert_frame_equal(rerun[science], rows3.iloc[:2][science])  # trained again: equal

    text = (out / "transition-law.csv").read_text().splitlines()
    text[1] = text[1].replace(",0,", ",zero,", 1)  # the seed of the first row is not a number
    (out / "transition-law.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match="out/transition-law.csv row 2 field seed"):
        run(grid(a, b5), "r5")
    assert not (tmp_path / "r5").exists()
    rows3.to_csv(out / "transition-law.csv", index=False)
    curves = (out / tl.CURVES).read_text().splitlines()
    curves[3] = curves[3].replace("a,0,", "a,x,", 1)
    (out / tl.CURVES).write_text("\n".join(curves) + "\n")
    with pytest.raises(
        ValueError, match="out/transition-law-curves.csv row 4 field seed ='x' is not a number"
    ):
        run(grid(a, b5), "r6")
    assert not (tmp_path / "r6").exists()
