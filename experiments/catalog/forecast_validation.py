"""Forecast validation: how early and how well the two forecasters place the cliff."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.common import TINY_SGD, select
from interp.experiments import register_experiment
from interp.experiments.core import Check, Column, Experiment, Sweep, Tier

FRACTIONS = (0.5, 0.8, 0.9)
METHODS = ("progress", "template")


def forecast_rows(run: Path, methods: Sequence[str] = METHODS) -> list[dict]:
    """One row per method and cut-off (50 / 80 / 90% of the plateau) for a finished run: the
    forecast from the rows up to the cut-off against the transition the whole curve shows."""
    from interp.io.rundir import read_metrics
    from phenomenology.fit import _clean, observed_transition
    from phenomenology.forecast import forecast_curve
    from phenomenology.progress import PROGRESS_COLUMN, progress_forecast

    config = json.loads((run / "config.json").read_text())
    t = config["task"]
    optimizer = config["train"].get("optimizer", "sgd")
    task = {"L": t["L"], "N": t["N"], "B": int(t.get("B_eval") or (t["B"] if t["B"] > 0 else 1))}
    m = read_metrics(run / "metrics.csv").frame
    df = _clean(m, ["ic_loss"])
    obs = observed_transition(df, column="ic_loss")
    if not obs["transitioned"]:
        return []
    start, onset, actual = obs["plateau_start_step"], obs["onset_step"], obs["transition_step"]
    progress = _clean(m, [PROGRESS_COLUMN])
    rows = []
    for method in methods:
        for f in FRACTIONS:
            cut = start + f * (onset - start)
            if method == "progress":
                p = progress[progress["step"] <= cut]
                fc = progress_forecast(p["step"], p[PROGRESS_COLUMN], optimizer=optimizer)
            else:
                part = df[df["step"] <= cut]
                fc = forecast_curve(
                    part["step"],
                    part["ic_loss"],
                    task=task,
                    check_plateau=False,
                    optimizer=optimizer,
                )
            ok = fc.step is not None and math.isfinite(fc.step)
            err = abs(fc.step - actual) / actual * 100 if ok else math.nan
            covered = ok and fc.low is not None and fc.low <= actual <= fc.high
            rows.append(
                {
                    "method": method,
                    "fraction": f,
                    "observed": actual,
                    "forecast": fc.step if ok else math.nan,
                    "n_runs": 1,
                    "median_abs_error_pct": err,
                    "covers": f"{int(covered)}/1",
                }
            )
    return rows


def analyse(experiment: Experiment, tier: str, dirs: Sequence[Path]) -> pd.DataFrame:
    from interp.experiments.sweep import summarize_sweep

    rows = []
    methods = experiment.tiers[tier].params.get("methods", METHODS)
    for sweep, d in zip(experiment.tiers[tier].sweeps, dirs):
        s = summarize_sweep(d)
        for point, seed in zip(s["point"], s["seed"]):
            for r in forecast_rows(d / point, methods):
                rows.append(
                    {
                        "group": f"{sweep.name} seed {seed}",
                        "sweep": sweep.name,
                        "point": point,
                        "seed": seed,
                        **r,
                    }
                )
    return pd.DataFrame(rows)


def _median(rows: pd.DataFrame, **where) -> str:
    sel = select(rows, **where)
    v = pd.to_numeric(sel["median_abs_error_pct"], errors="coerce").dropna()
    return " / ".join(f"{x:.1f}%" for x in v) or "-"


EXPERIMENT = register_experiment(
    Experiment(
        name="forecast-validation",
        title="Forecasting the cliff: both forecasters on held-out runs",
        analyse=analyse,
        question=(
            "From 50, 80 or 90% of the plateau, how far from the observed transition do the "
            "progress forecaster (TILA2's growth) and the template forecaster (the calibrated "
            "nested-logit template of the loss) land, and how often does the 80% interval "
            "contain it?"
        ),
        tiers={
            "quick": Tier(
                sweeps=(Sweep(preset="tiny", overrides=TINY_SGD),),
                cost="about 40 s on one core",
                cost_s=40,
                note="one `tiny` run with plain SGD at lr 0.3 for 1500 steps (a setting far "
                "outside the forecasters' calibration: the check is a loose bound), forecast "
                "at each cut-off by the progress forecaster (the template fit of so small a "
                "task is slow and meaningless).",
                params={"methods": ("progress",)},
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        name="fig3-lr03",
                        preset="paper-fig3",
                        grid={"K": (256, 512)},
                        overrides={
                            "lr": 0.03,
                            "steps": 15000,
                            "eval_every": 250,
                            "hidden_bias": "per_unit",
                            "num_threads": 1,
                        },
                        seeds=(8, 9),
                    ),
                    Sweep(
                        name="fig1d-pc025",
                        preset="paper-fig1d",
                        overrides={
                            "p_C": 0.25,
                            "lr": 0.03,
                            "steps": 12000,
                            "eval_every": 250,
                            "hidden_bias": "per_unit",
                            "num_threads": 1,
                        },
                        seeds=(3,),
                    ),
                ),
                cost="about 40 min on two cores (the fresh runs; the 21 held-out runs: hours)",
                cost_s=2400,
                note="the held-out SGD runs: paper-fig3 at lr 0.03 and 0.01, paper-fig1d at "
                "p_C = 0.25; the sweeps listed train the 5 fresh lr-0.03 ones.",
            ),
        },
        columns=(
            Column(key="method", header="forecaster"),
            Column(key="group", header="runs"),
            Column(key="n_runs", header="n runs", fmt="{:.0f}"),
            Column(key="fraction", header="cut-off (of the plateau)", fmt="{:.0%}"),
            Column(key="median_abs_error_pct", header="median abs error", fmt="{:.1f}%"),
            Column(key="covers", header="80% interval covers"),
        ),
        deviations=(
            "Not a paper experiment: the paper forecasts nothing.",
            "The lr-0.03 runs deviate from the author's code's lr 0.01 (the transition time "
            "scales as 1/lr).",
        ),
        checks=(
            Check(
                what="the progress forecast from 80% of the plateau",
                column="median_abs_error_pct",
                where={"method": "progress", "fraction": 0.8},
                high=35,
                reduce="max",
            ),
            Check(
                what="every progress cut-off forecasts",
                column="forecast",
                where={"method": "progress"},
                reduce="count",
                low=3,
            ),
        ),
        reading=(
            "On held-out SGD runs the progress forecaster lands within a few percent of the "
            "observed transition and its 80% interval covers most runs; the template "
            "forecaster is several times less accurate. Adam runs and RoPE with a q/k bias lie "
            "outside the calibration and are not to be trusted."
        ),
        headline=lambda r: (
            "progress forecaster from 80% of the plateau: "
            + _median(r, method="progress", fraction=0.8, group="all 21 held-out SGD runs")
            + " median error on the 21 held-out SGD runs"
        ),
        sort=("method", "group", "fraction"),
    )
)
