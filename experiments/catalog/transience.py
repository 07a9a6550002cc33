"""Does in-context learning fade with long training on this network, and does weight decay matter?

Singh et al. (2023) found in-context (IC) accuracy rising and then fading in favour of in-weight
(IW) learning on long training, and weight decay changing that; Wurgaft et al. (2025) predict the
time to fade growing faster than linearly in the task diversity K. The toolkit trains to a budget
and stops; this experiment trains the transition law's network (:data:`transition_law_base.BASE`:
paper-fig3's task, per-unit hidden biases, plain SGD lr 0.1) at two values of K, 64 (few classes,
where the classifier can learn labels in its weights) and the centre's 256, under four weight
decays (none, the author's 1e-6 and two stronger, 1e-5 and 1e-4, all the author's multiplicative
form: each step every weight times ``1 - weight_decay``), five seeds a point, each run to 20,000
steps: five times the centre's transition step (about 3,400) or more.

Per run (:func:`fading`): the transition step of IC accuracy, its peak and where, the step after
the peak where IC accuracy first falls to half its excess over chance (1 / L) if it does (the fade),
and IW accuracy's peak and last value beside it. Before training, the stored law's transition step
is registered for every point (:mod:`experiments.catalog.law_axes`'s registry: the law forecasts
only at the author's weight decay and K inside its data; the hypothesis ``no-effect`` is the law's
step at the author's weight decay, whatever the weight decay), and the page scores it after.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.catalog import law_axes
from experiments.catalog.transition_law_base import BASE
from experiments.transition_grid import CURVE_COLUMNS, GridPoint, TransitionGrid
from interp.experiments import register_experiment
from interp.experiments.core import Column, Experiment, Tier
from interp.experiments.directions import Direction, directions_table

NAME = "transience"
CURVES = f"{NAME}-curves.csv"
KS = (64, 256)
WEIGHT_DECAYS = (0.0, 1e-6, 1e-5, 1e-4)
AUTHOR_WD = 1e-6
BUDGET = 20_000
SEEDS = (0, 1, 2, 3, 4)
CURVE = (*CURVE_COLUMNS, "iw_acc")
"""The curves keep IW accuracy beside IC accuracy."""


def point_name(k: int, wd: float) -> str:
    return f"K{k}-wd{wd:g}"


def grid(tier: str) -> TransitionGrid:
    if tier == "quick":
        points = tuple(
            GridPoint(name=point_name(64, wd), overrides={"K": 64, "weight_decay": wd})
            for wd in (0.0, 1e-4)
        )
        return TransitionGrid(
            preset="tiny",
            base={**law_axes.QUICK_BASE, "eval_every": 100},
            points=points,
            seeds=(0, 1),
            budget=1500,
            chunk=500,
            to_budget=True,
            curve_columns=CURVE,
        )
    points = tuple(
        GridPoint(name=point_name(k, wd), overrides={"K": k, "weight_decay": wd})
        for k in KS
        for wd in WEIGHT_DECAYS
    )
    return TransitionGrid(
        preset="paper-fig3",
        base={**BASE, "eval_every": 500},
        points=points,
        seeds=SEEDS,
        budget=BUDGET,
        chunk=5000,
        to_budget=True,
        curve_columns=CURVE,
    )


# ---- the registry: the transition step forecast before the runs ----


def forecasts() -> pd.DataFrame:
    """The stored law's transition step at every full-tier point (``law``: only at the author's
    weight decay; ``no-effect``: the law's step at the author's weight decay, whatever it is)."""
    from phenomenology.transition_law import StoredLaw

    law = StoredLaw.load()
    runs, g, out = len(law.observed), grid("full"), []
    for p in g.points:
        pred, why = law_axes.law_at(law, g, p, {"weight_decay": f"{AUTHOR_WD:g}"})
        if why:
            out.append(law_axes.registry_row(NAME, p, "law", *(math.nan,) * 3, why, runs))
            continue
        wd = float(p.overrides["weight_decay"])
        own = math.isclose(wd, AUTHOR_WD)
        says = (
            "the law's forecast"
            if own
            else (f"cannot say: weight_decay={wd:g} is outside the law's data ({AUTHOR_WD:g})")
        )
        step = (pred.step, pred.low, pred.high)
        out.append(
            law_axes.registry_row(NAME, p, "law", *(step if own else (math.nan,) * 3), says, runs)
        )
        out.append(
            law_axes.registry_row(
                NAME, p, "no-effect", *step, "no-effect: the law's step at weight decay 1e-6", runs
            )
        )
    return pd.DataFrame(out, columns=list(law_axes.REGISTRY_COLUMNS))


law_axes.SOURCES[NAME] = forecasts


# ---- the rows ----


def fading(curve: pd.DataFrame, labels: int) -> dict:
    """What one run's IC and IW accuracy did: the peak of IC accuracy and its step, the first step
    after it where IC accuracy is at most chance (``1 / labels``) plus half the peak's excess over
    chance (``fade_step``, NaN where it never is: ``faded`` False), IC accuracy at the end, and
    IW accuracy's peak, its step, its last value and whether it faded by the same rule
    (``iw_faded``)."""
    chance = 1.0 / labels
    step = curve["step"].to_numpy(float)
    ic = curve["ic_acc"].to_numpy(float)
    iw = curve["iw_acc"].to_numpy(float)
    top = int(ic.argmax())
    after = _fades(ic, top, chance)
    iw_top = int(iw.argmax())
    return {
        "peak_ic_acc": round(float(ic[top]), 4),
        "peak_ic_step": float(step[top]),
        "faded": bool(after),
        "fade_step": float(step[after[0]]) if after else math.nan,
        "final_ic_acc": round(float(ic[-1]), 4),
        "peak_iw_acc": round(float(iw[iw_top]), 4),
        "peak_iw_step": float(step[iw_top]),
        "final_iw_acc": round(float(iw[-1]), 4),
        "iw_faded": bool(_fades(iw, iw_top, chance)),
    }


def _fades(acc, top: int, chance: float) -> list[int]:
    """The evaluations after the peak ``top`` at or below half its excess over chance."""
    half = chance + 0.5 * (acc[top] - chance)
    return [i for i in range(top + 1, len(acc)) if acc[i] <= half]


def _produce(experiment, tier: str, runs: Path, workers, log, out: Path | None = None):
    from experiments.transition_grid import collect, run_grid

    g = grid(tier)
    if tier == "full":
        law_axes.refuse_unregistered(NAME, g)
    run_grid(g, runs, workers=workers or 2, log=log)
    rows, curves = collect(g, runs)
    return with_fading(rows, curves), {CURVES: curves}


def with_fading(rows: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The grid's rows with K, the weight decay and :func:`fading` of each run's curve."""
    if not len(rows):
        return rows
    extra = []
    for _, r in rows.iterrows():
        c = curves[(curves["point"] == r["point"]) & (curves["seed"] == r["seed"])]
        wd = float(str(r["point"]).split("-wd", 1)[1])
        extra.append({"weight_decay": wd, **fading(c, int(r["L"]))})
    extra = pd.DataFrame(extra, index=rows.index)
    return pd.concat([rows.drop(columns=["final_ic_acc"]), extra], axis=1)


# ---- the page ----

DIRECTIONS = (
    Direction(
        claim="K 64, no weight decay: IC accuracy fades (to half its excess over chance) within "
        "20,000 steps on at least 3 of 5 seeds (Singh et al.'s transience)",
        column="faded",
        where={"point": point_name(64, 0.0)},
        value=1,
        at_least=3,
    ),
    Direction(
        claim="K 64: weight decay 1e-4 ends with IC accuracy at least that of no weight decay "
        "on at least 4 of 5 seeds (Singh et al.: weight decay keeps in-context learning)",
        column="final_ic_acc",
        where={"point": point_name(64, 1e-4)},
        than={"point": point_name(64, 0.0)},
        at_least=4,
    ),
    Direction(
        claim="The author's weight decay: K 64 ends with higher IW accuracy than K 256 on 5 of "
        "5 seeds (fewer classes are learned in the weights sooner)",
        column="final_iw_acc",
        where={"point": point_name(64, AUTHOR_WD)},
        than={"point": point_name(256, AUTHOR_WD)},
        op=">",
        at_least=5,
    ),
)
"""Stated with the grid, before its runs."""


def _fmt(v, spec="{:.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else spec.format(v)


def notes(rows: pd.DataFrame) -> str:
    lines = ["## In-context and in-weight accuracy over long training", ""]
    lines += [
        "| K | weight decay | runs | transitioned | median transition step | peak IC acc "
        "(median) | IC faded | median fade step | final IC acc | peak IW acc (median step) | "
        "final IW acc | IW faded |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (k, wd), g in rows.groupby(["K", "weight_decay"], sort=True):
        ok = g[g["transitioned"].astype(str) == "True"]
        lines.append(
            f"| {int(k)} | {wd:g} | {len(g)} | {len(ok)} | "
            f"{_fmt(ok['transition_step'].astype(float).median())} | "
            f"{g['peak_ic_acc'].median():.3f} | {int(g['faded'].astype(bool).sum())} | "
            f"{_fmt(g['fade_step'].astype(float).median())} | {g['final_ic_acc'].median():.3f} | "
            f"{g['peak_iw_acc'].median():.3f} ({g['peak_iw_step'].median():.0f}) | "
            f"{g['final_iw_acc'].median():.3f} | {int(g['iw_faded'].astype(bool).sum())} |"
        )
    lines += [
        "",
        "Medians over seeds; `faded`: runs whose accuracy fell, after its peak, to half its "
        "excess over chance (1 / L) within the budget.",
        "",
        *_reverse(rows),
        "",
        *_wurgaft(rows),
        "",
    ]
    lines += law_axes.score_lines(NAME, rows)
    lines.append(directions_table(DIRECTIONS, rows))
    return "\n".join(lines)


def _reverse(rows: pd.DataFrame) -> list[str]:
    """How often the fading went the other way: IW accuracy peaking before the IC transition and
    fading after it, while IC accuracy held."""
    jumped = rows["transitioned"].astype(str) == "True"
    before = pd.to_numeric(rows["peak_iw_step"]) < pd.to_numeric(rows["transition_step"])
    iw = rows["iw_faded"].astype(bool) & before & jumped & ~rows["faded"].astype(bool)
    ic = int(rows["faded"].astype(bool).sum())
    return [
        f"**Which learning was transient.** In-context accuracy faded in {ic} of {len(rows)} "
        f"runs. In-weight accuracy peaked before the in-context transition and faded after it, "
        f"with in-context accuracy holding, in {int(iw.sum())} of {len(rows)}."
    ]


def _wurgaft(rows: pd.DataFrame) -> list[str]:
    """Wurgaft et al.'s claim, where the data allow: the fade step's exponent in K above 1."""
    faded = rows[rows["faded"].astype(bool)]
    ks = sorted(faded["K"].unique())
    if len(ks) < 2:
        where = ", ".join(f"K {int(k)}" for k in ks) or "no K"
        return [
            f"**Wurgaft et al.'s superlinear fade time in K** cannot be tested: IC accuracy "
            f"faded within the budget at {where} (it needs fades at two values of K or more)."
        ]
    out = []
    for wd, g in faded.groupby("weight_decay"):
        med = g.groupby("K")["fade_step"].median()
        if len(med) >= 2:
            k0, k1 = med.index[0], med.index[-1]
            e = math.log(med[k1] / med[k0]) / math.log(k1 / k0)
            said = "superlinear, as Wurgaft et al. predict" if e > 1 else "not superlinear"
            out.append(
                f"- weight decay {wd:g}: the median fade step grows as K^{e:.2f} from K "
                f"{int(k0)} to {int(k1)}: {said}."
            )
    return (
        ["**Wurgaft et al.'s superlinear fade time in K**:", "", *out]
        if out
        else [
            "**Wurgaft et al.'s superlinear fade time in K** cannot be tested: no weight decay has "
            "fades at two values of K."
        ]
    )


def headline(rows: pd.DataFrame) -> str:
    faded = int(rows["faded"].astype(bool).sum())
    iw = int(rows["iw_faded"].astype(bool).sum())
    jumped = int((rows["transitioned"].astype(str) == "True").sum())
    return (
        f"{jumped} of {len(rows)} runs transitioned; IC accuracy faded in {faded}, IW accuracy "
        f"in {iw}"
    )


EXPERIMENT = register_experiment(
    Experiment(
        name=NAME,
        title="Does in-context learning fade with long training? Weight decay and K",
        question=(
            "Trained five times past its transition, does the network's in-context accuracy "
            "fade in favour of in-weight learning (Singh et al. 2023), does weight decay change "
            "that, and does the time to fade grow faster than K (Wurgaft et al. 2025)?"
        ),
        tiers={
            "quick": Tier(
                cost="about 1 min on 2 cores",
                cost_s=60,
                hidden_bias="per_unit",
                note="the `tiny` task at SGD lr 0.6 and K 64, weight decay 0 and 1e-4, two seeds, "
                "1,500 steps: the machinery only.",
            ),
            "full": Tier(
                cost="about 50 min on 2 cores",
                cost_s=3000,
                hidden_bias=BASE["hidden_bias"],
                note="K 64 and 256 x weight decay 0, 1e-6 (the author's), 1e-5 and 1e-4 at the "
                "transition law's centre (paper-fig3, SGD lr 0.1), seeds 0-4, each run to "
                "20,000 steps, evaluated every 500.",
            ),
        },
        produce=_produce,
        companions=(CURVES,),
        columns=(
            Column(key="point", header="point"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="transition_step", header="transition step", fmt="{:.0f}"),
            Column(key="peak_ic_acc", header="peak IC acc", fmt="{:.3f}"),
            Column(key="fade_step", header="fade step", fmt="{:.0f}"),
            Column(key="final_ic_acc", header="final IC acc", fmt="{:.3f}"),
            Column(key="peak_iw_acc", header="peak IW acc", fmt="{:.3f}"),
            Column(key="final_iw_acc", header="final IW acc", fmt="{:.3f}"),
            Column(key="iw_faded", header="IW faded"),
        ),
        notes=notes,
        deviations=(
            "Per-unit hidden biases and SGD lr 0.1: the transition law's settings "
            "(docs/results/transition-law.md).",
            "K is 64 or 256 and the weight decay 0 to 1e-4 (the author's: 1e-6); runs are 20,000 "
            "steps, evaluated every 500.",
        ),
        headline=headline,
        sort=("point", "seed"),
    )
)
