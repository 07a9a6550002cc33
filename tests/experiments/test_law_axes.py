"""The law's open axes: forecasts registered before the runs (and never rewritten), the exponent
and the shape against known answers, and each forecast scored against its runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments.catalog.law_axes import (
    AXES,
    REGISTRY,
    curvature,
    exponent,
    missing_forecasts,
    read_registry,
    register,
    scores,
    shape,
)


def _rows(field: str, values, configs: dict, step, seeds=(0, 1)) -> pd.DataFrame:
    rows = []
    for c, base in configs.items():
        for v in values:
            for s in seeds:
                rows.append(
                    {
                        "point": f"{c}-{field}{v}",
                        "config": c,
                        "seed": s,
                        field: v,
                        "transitioned": "True",
                        "transition_step": step(base, v, s),
                    }
                )
    return pd.DataFrame(rows)


def test_every_declared_point_has_its_forecasts_registered_and_registering_changes_nothing(
    tmp_path,
):
    """The committed registry covers every point of both axes, the law's own and the hypothesis;
    registering again into a copy adds no row and leaves every row as it was."""
    reg = read_registry()
    for axis in AXES.values():
        assert missing_forecasts(axis.name, axis.grid("full"), reg) == []
        mine = reg[reg["experiment"] == axis.name]
        assert set(mine["hypothesis"]) == {"law", axis.hypothesis.split(":")[0]}
    copy = tmp_path / "forecasts.csv"
    copy.write_bytes(REGISTRY.read_bytes())
    assert register(copy) == 0
    assert copy.read_bytes() == REGISTRY.read_bytes()


def test_registering_adds_only_the_points_without_a_row(tmp_path):
    """A registry missing one point gets that point's rows appended; the rows already there are
    kept byte for byte, whatever the law says now."""
    reg = read_registry()
    gone = reg["point"] == "N4-batch_size512"
    kept = reg[~gone].assign(step=reg.loc[~gone, "step"] * 2)  # as if the law had changed since
    path = tmp_path / "forecasts.csv"
    path.write_text(kept.to_csv(index=False))
    assert register(path) == int(gone.sum()) == 2
    again = read_registry(path)
    assert (again.iloc[: len(kept)]["step"].fillna(-1) == kept["step"].fillna(-1).values).all()
    added = again.iloc[len(kept) :].set_index("hypothesis")
    at_128 = reg[(reg["point"] == "N4-batch_size128") & (reg["hypothesis"] == "law")]
    # Aoyama at 512: the law's step at 128 times (512 / 128)^-1/2 = one half
    assert added.loc["aoyama", "step"] == pytest.approx(0.5 * at_128["step"].iloc[0], abs=0.1)
    assert math.isnan(added.loc["law", "step"])  # batch 512: outside the law's data
    assert "cannot say" in added.loc["law", "says"]


def test_a_point_without_a_registered_forecast_does_not_train(tmp_path, monkeypatch):
    import experiments.catalog.law_axes as law_axes

    empty = tmp_path / "none.csv"
    monkeypatch.setattr(law_axes, "REGISTRY", empty)
    monkeypatch.setattr(
        law_axes,
        "read_registry",
        lambda path=empty: pd.DataFrame(columns=list(law_axes.REGISTRY_COLUMNS)),
    )
    e = law_axes.EXPERIMENTS["batch-size"]
    with pytest.raises(ValueError, match=r"no registered forecast for centre-batch_size32"):
        law_axes._produce(e, "full", tmp_path / "runs", 1, print)
    assert not (tmp_path / "runs").exists()


def test_the_exponent_is_the_power_of_the_batch_with_a_configuration_each_its_own_scale():
    """Steps exactly 4000 x (b / 128)^-1/2 at one configuration and 1500 x (b / 128)^-1/2 at
    another: the exponent is -1/2, its interval a point. With seed 1 a factor 1.2 above seed 0
    everywhere, the exponent is still -1/2 and the interval widens around it."""
    exact = _rows(
        "batch_size", (32, 128, 512), {"a": 4000, "b": 1500}, lambda c, b, s: c * (b / 128) ** -0.5
    )
    e = exponent(exact, "batch_size")
    assert e["slope"] == pytest.approx(-0.5) and e["high"] - e["low"] == pytest.approx(0, abs=1e-9)
    noisy = _rows(
        "batch_size",
        (32, 128, 512),
        {"a": 4000, "b": 1500},
        lambda c, b, s: c * (b / 128) ** -0.5 * (1.2 if s else 1.0),
    )
    e = exponent(noisy, "batch_size")
    assert e["slope"] == pytest.approx(-0.5) and e["low"] < -0.5 < e["high"]
    assert e["dof"] == 12 - 3


def test_the_shape_in_width_tells_u_monotone_and_flat_apart():
    widths = (32, 64, 128, 256)
    u = _rows(
        "d_mlp",
        widths,
        {"a": 3000},
        lambda c, w, s: c * math.exp((math.log(w / 90)) ** 2) * (1.1 if s else 1),
    )
    c = curvature(u, "d_mlp")
    assert c["curve"] == pytest.approx(1.0) and shape(c, widths) == "U-shaped (fastest near 90)"
    down = _rows(
        "d_mlp", widths, {"a": 3000}, lambda c, w, s: c * (w / 128) ** -0.3 * (1.1 if s else 1)
    )
    assert shape(curvature(down, "d_mlp"), widths) == "monotone: wider is faster"
    flat = _rows(
        "d_mlp", widths, {"a": 3000}, lambda c, w, s: c * (1.3 if (s + w // 32) % 2 else 1)
    )
    assert shape(curvature(flat, "d_mlp"), widths) == "flat within the intervals"


def test_each_registered_forecast_is_scored_against_its_runs():
    """Point P: runs at 900 and 1100 and one that never transitioned; the forecast 1000
    (800-1250) holds the median 1000: error 0, the floor 0.6745 x sd(log 900, log 1100)."""
    rows = pd.DataFrame(
        {
            "point": ["P", "P", "P"],
            "seed": [0, 1, 2],
            "transitioned": ["True", "True", "False"],
            "transition_step": [900.0, 1100.0, math.nan],
        }
    )
    reg = pd.DataFrame(
        [
            {
                "experiment": "x",
                "point": "P",
                "hypothesis": "h",
                "step": 1000.0,
                "low": 800.0,
                "high": 1250.0,
                "says": "h",
            },
            {
                "experiment": "x",
                "point": "P",
                "hypothesis": "far",
                "step": 2000.0,
                "low": 1800.0,
                "high": 2300.0,
                "says": "far",
            },
        ]
    )
    s = scores(rows, reg, "x").set_index("hypothesis")
    floor = 0.6745 * np.std(np.log([900.0, 1100.0]), ddof=1)
    assert (s.loc["h", "runs"], s.loc["h", "transitioned"], s.loc["h", "median"]) == (3, 2, 1000)
    assert s.loc["h", "inside"] and s.loc["h", "abs_log_error"] == pytest.approx(0)
    assert s.loc["h", "floor"] == pytest.approx(floor)
    assert not s.loc["far", "inside"] and s.loc["far", "abs_log_error"] == pytest.approx(
        math.log(2)
    )


def test_the_refitted_law_held_out_carries_the_registered_step_by_the_others_exponent():
    """Steps exactly 1000 x c x (batch / 128)^-0.2 (c per configuration) times 1.02^-1, 1 and
    1.02 over three seeds; the law registered exactly at batch 128. Each configuration held out,
    the others' exponent is -0.2, so the refitted law's median is exact; Aoyama's -1/2 misses
    by 0.3 x log 4 = 0.416."""
    from experiments.catalog.law_axes import held_out

    axis = AXES["batch-size"]
    scale = {c: 1.0 + i for i, c in enumerate(axis.configs)}
    rows = _rows(
        "batch_size",
        axis.values,
        {c: scale[c] for c in axis.configs},
        lambda c, v, s: 1000 * c * (v / 128) ** -0.2 * 1.02 ** (s - 1),
        seeds=(0, 1, 2),
    )
    registry = pd.DataFrame(
        [
            {"experiment": axis.name, "point": axis.point(c, v), "hypothesis": h, "step": step}
            for c in axis.configs
            for v in axis.values
            for h, step in (
                ("law", 1000 * scale[c] if v == 128 else math.nan),
                ("aoyama", 1000 * scale[c] * (v / 128) ** -0.5),
            )
        ]
    )
    h = held_out(axis, rows, registry)
    assert len(h) == 2 * len(axis.configs)  # the values other than 128, each configuration
    assert np.allclose(h["refitted_error"], 0.0, atol=1e-9)  # the median seed is exact
    assert np.allclose(h["registered_error"], 0.3 * math.log(4), atol=1e-9)
    assert np.allclose(h["floor"], 0.6745 * math.log(1.02), rtol=1e-9)
