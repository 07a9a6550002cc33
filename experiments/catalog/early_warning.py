"""Early warning as a benchmark: the field's signal families scored on the same runs.

"Will this run make the jump within its budget?", asked at 5, 10, 20 and 30% of the budget. The
runs: twelve of the transition law's configurations (:data:`transition_law_base.BASE`: paper-fig3's
task, per-unit hidden biases, plain SGD), each with its budget set to the stored law's median
transition step, so that about half its runs jump within it (classes balanced by design), eight
new seeds each (100-107: the law was fitted on seeds 0-5). Every run logs, at each evaluation
(about 60 over its budget), the signal measures of :mod:`interp.analysis.signals` (repetition
bias, representation collapse, attention participation, heat capacity) beside the toolkit's own
(the attention progress measure ``tila2`` and the IC loss the template forecaster reads).

The signals at each observation (:func:`signal_table`): each measure's value and its change since
the run's first evaluation; the toolkit's ``progress`` (``tila2``'s excess over its start),
``template`` (how far inside the budget the partial-curve forecaster puts the cliff) and ``law``
(the stored law's probability of a transition by the budget given none yet). Scoring
(:mod:`experiments.warning_scores`): every sign, threshold and combination fitted on the other
configurations and scored on the held-out one; AUROC with bootstrap intervals, lead time at a 5%
false-positive rate.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.catalog.transition_law_base import BASE
from experiments.transition_grid import CURVE_COLUMNS, GridPoint, TransitionGrid
from interp.experiments import register_experiment
from interp.experiments.core import Column, Experiment, Tier

NAME = "early-warning"
CURVES = f"{NAME}-curves.csv"
SIGNALS_CSV = f"{NAME}-signals.csv"
PLUGIN = "interp.analysis.signals"
MEASURES = (
    "repetition_bias",
    "representation_collapse",
    "attention_participation",
    "heat_capacity",
)
"""The signal measures of :mod:`interp.analysis.signals` (columns of each run's metrics)."""
FRACTIONS = (0.05, 0.1, 0.2, 0.3)
"""Fractions of the budget at which the warning is scored."""
OBSERVE = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Fractions of the budget at which each run's signals are read (the lead time's grid)."""
SEEDS = tuple(range(100, 108))
CONFIGS = {
    "centre": {},
    "N4": {"N": 4},
    "N6": {"N": 6},
    "B2": {"B": 2},
    "B2-N12": {"B": 2, "N": 12},
    "K128": {"K": 128},
    "K512": {"K": 512},
    "L16": {"L": 16},
    "L64": {"L": 64},
    "eps0.2": {"eps": 0.2},
    "pC0.5": {"p_C": 0.5},
    "lr0.2": {"lr": 0.2},
}
"""The configurations: the law's, with budgets from its forecast (:func:`budgets`)."""
BUDGETS = {
    "centre": 3379,
    "N4": 1414,
    "N6": 2343,
    "B2": 1623,
    "B2-N12": 2629,
    "K128": 3266,
    "K512": 3497,
    "L16": 3549,
    "L64": 3696,
    "eps0.2": 3466,
    "pC0.5": 3225,
    "lr0.2": 1824,
}
"""Each configuration's budget: the stored law's median transition step, rounded (a test keeps
them equal to the law's forecast, so that the law's probability of a jump within it is 0.5)."""
CURVE = (*CURVE_COLUMNS, *MEASURES)


def _eval_every(budget: int) -> int:
    return max(10, round(budget / 60))


def grid(tier: str) -> TransitionGrid:
    if tier == "quick":
        points = tuple(
            GridPoint(name=f"tinyN{n}", overrides={"N": n, "eval_every": 20}, budget=400)
            for n in (2, 3, 4)
        )
        from experiments.catalog.law_axes import QUICK_BASE

        return TransitionGrid(
            preset="tiny",
            base=QUICK_BASE,
            points=points,
            seeds=(0, 1, 2),
            chunk=500,
            curve_columns=CURVE,
            plugins=(PLUGIN,),
        )
    points = tuple(
        GridPoint(
            name=name,
            overrides={**o, "eval_every": _eval_every(BUDGETS[name])},
            budget=BUDGETS[name],
        )
        for name, o in CONFIGS.items()
    )
    return TransitionGrid(
        preset="paper-fig3",
        base=BASE,
        points=points,
        seeds=SEEDS,
        chunk=1000,
        curve_columns=CURVE,
        plugins=(PLUGIN,),
    )


def budgets() -> dict[str, int]:
    """The stored law's median transition step at each configuration, rounded."""
    from phenomenology.transition_law import StoredLaw

    law = StoredLaw.load()
    return {name: round(law.forecast(_fields(name)).step) for name in CONFIGS}


# ---- the signals of every run at each observation ----


def signal_table(rows: pd.DataFrame, curves: pd.DataFrame, law=None) -> pd.DataFrame:
    """One row per run and observed fraction of its budget (:data:`OBSERVE`) before its
    transition: ``config, point, seed, step, fraction, positive, transition_step`` and the
    signals (higher or lower may warn: the scoring orients each on other configurations)."""
    from experiments.transition_scores import _signals
    from phenomenology.transition_law import StoredLaw

    law = law if law is not None else StoredLaw.load()
    out = []
    for _, r in rows.iterrows():
        c = curves[(curves["point"] == r["point"]) & (curves["seed"] == r["seed"])]
        c = c.sort_values("step")
        budget = float(r["budget"])
        jumped = str(r["transitioned"]) == "True" and float(r["transition_step"]) <= budget
        t_step = float(r["transition_step"]) if jumped else math.inf
        prior = law.forecast(_fields(str(r["point"])))
        first = c.iloc[0]
        for f in OBSERVE:
            t = f * budget
            if t >= t_step or t > float(c["step"].max()):
                break
            seen = c[c["step"] <= t]
            last = seen.iloc[-1]
            row = {
                "config": str(r["point"]),
                "point": str(r["point"]),
                "seed": int(r["seed"]),
                "step": t,
                "fraction": f,
                "positive": jumped,
                "transition_step": t_step,
                **_signals(c, r, prior, t),
            }
            for m in MEASURES:
                v, v0 = float(last.get(m, math.nan)), float(first.get(m, math.nan))
                row[m] = v
                row[f"{m}_change"] = v - v0
            out.append(row)
    return pd.DataFrame(out)


def _fields(name: str) -> dict:
    """Configuration ``name``'s fields as the law reads them (a name not in :data:`CONFIGS`,
    as in the quick tier, reads as the centre's; its law is a stand-in there)."""
    from interp.train.overrides import build_configs
    from phenomenology.transition_law import law_inputs

    over = {k: str(v) for k, v in {**BASE, **CONFIGS.get(name, {})}.items()}
    return law_inputs(*build_configs("paper-fig3", over, 0)[:3])[0]


SIGNAL_NAMES = (
    "progress",
    "template",
    "law",
    *MEASURES,
    *(f"{m}_change" for m in MEASURES),
)
"""Every signal scored: the toolkit's three, then each measure's value and its change."""
FAMILIES = {
    "repetition bias (Gopalani and Hu)": ("repetition_bias", "repetition_bias_change"),
    "representation collapse": ("representation_collapse", "representation_collapse_change"),
    "attention participation (Xu)": ("attention_participation", "attention_participation_change"),
    "heat capacity (after Corlouer and Hennick)": ("heat_capacity", "heat_capacity_change"),
    "attention progress (the toolkit's tila2)": ("progress",),
    "partial-curve template": ("template",),
    "transition law": ("law",),
}


# ---- producing the rows ----


def _produce(experiment, tier: str, runs: Path, workers, log, out: Path | None = None):
    from experiments.transition_grid import collect, run_grid
    from interp.io.plugins import load_plugins

    g = grid(tier)
    load_plugins(g.plugins)
    run_grid(g, runs, workers=workers or 2, log=log)
    rows, curves = collect(g, runs)
    law = None
    if tier == "quick":
        law = _QuickLaw()
    signals = signal_table(rows, curves, law=law)
    jumped = [
        str(t) == "True" and float(s) <= float(b)
        for t, s, b in zip(rows["transitioned"], rows["transition_step"], rows["budget"])
    ]
    rows = rows.assign(config=rows["point"], positive=jumped)
    return rows, {CURVES: curves, SIGNALS_CSV: signals.round(6)}


class _QuickLaw:
    """The quick tier's stand-in law (the tiny task is outside the stored law's data): every
    run's prior the same, a median at 300 steps."""

    def forecast(self, fields):
        from phenomenology.law_forms import Prediction

        return Prediction.interval(math.log(300.0), 0.5)


# ---- the page ----


def _page(experiment: Experiment, rows: pd.DataFrame, extra: dict) -> str:
    """The page: :func:`interp.experiments.core.render_page` with the scores of the signals
    (the companion ``early-warning-signals.csv``) in its notes."""
    import dataclasses

    from interp.experiments.core import render_page

    signals = extra[SIGNALS_CSV]
    bound = dataclasses.replace(experiment, notes=lambda r: notes(r, signals))
    return render_page(bound, rows)


def notes(rows: pd.DataFrame, signals: pd.DataFrame) -> str:
    lines = ["## The runs", ""]
    pos = rows["positive"].astype(str) == "True"
    lines += [
        f"{int(pos.sum())} runs jumped within their budget and {int((~pos).sum())} did not, over "
        f"{rows['config'].nunique()} configurations.",
        "",
        "| configuration | budget | runs | jumped within it |",
        "| --- | --- | --- | --- |",
    ]
    for c, g in rows.groupby("config", sort=False):
        lines.append(
            f"| {c} | {int(g['budget'].iloc[0])} | {len(g)} | "
            f"{int((g['positive'].astype(str) == 'True').sum())} |"
        )
    if rows["config"].nunique() < 3 or not len(signals):
        return "\n".join([*lines, "", "Too few configurations to hold one out."])
    from experiments.warning_scores import held_out_auroc, held_out_lead, verdict_table

    signals = signals.copy()
    signals["positive"] = signals["positive"].astype(str) == "True"
    au = held_out_auroc(signals, SIGNAL_NAMES, fractions=FRACTIONS)
    lead = held_out_lead(signals, SIGNAL_NAMES)
    lines += ["", "## Scores on held-out configurations", ""]
    lines += verdict_table(au, lead)
    lines += ["", "## Signal families", ""]
    for family, names in FAMILIES.items():
        best = au[(au["signal"].isin(names)) & np.isclose(au["at"], 0.1)]
        best = best[best["auroc"].notna()]
        if not len(best):
            lines.append(f"- **{family}**: no value at 10% of the budget on these runs")
            continue
        b = best.loc[best["auroc"].idxmax()]
        lines.append(
            f"- **{family}**: best at 10% of the budget `{b['signal']}`, AUROC {b['auroc']:.2f} "
            f"({b['low']:.2f}-{b['high']:.2f})"
        )
    lines += ["", *_llc_line()]
    return "\n".join(lines)


def _llc_line() -> list[str]:
    """Why the local learning coefficient is not among the signals: its measured cost."""
    from interp.experiments.core import RESULTS_DIR, read_table

    path = Path(RESULTS_DIR) / "llc.csv"
    if not path.exists():
        return []
    llc = read_table(path)
    each = float(pd.to_numeric(llc["wall_s"]).sum()) / len(llc)
    n = len(SEEDS) * len(CONFIGS) * len(FRACTIONS)
    return [
        f"- **local learning coefficient**: not scored. An estimate costs about {each:.1f} s "
        f"([llc.md](llc.md): {len(llc)} estimates in {pd.to_numeric(llc['wall_s']).sum():.0f} "
        f"s), and these runs at four fractions need {n}: about {n * each / 60:.0f} "
        "core-minutes from checkpoints, more than logging it live could cost."
    ]


def headline(rows: pd.DataFrame) -> str:
    pos = int((rows["positive"].astype(str) == "True").sum())
    return f"{pos} of {len(rows)} runs jumped within a budget set at the law's median step"


EXPERIMENT = register_experiment(
    Experiment(
        name=NAME,
        title="Early warning: the field's signal families scored on the same runs",
        question=(
            "Early in a run's plateau, which signal tells whether it will make the jump within "
            "its budget, scored on configurations none of its thresholds was fitted on?"
        ),
        tiers={
            "quick": Tier(
                cost="about 1 min on 2 cores",
                cost_s=60,
                hidden_bias="per_unit",
                note="the `tiny` task at SGD lr 0.6, N 2, 3 and 4, three seeds, budgets of 400 "
                "steps, the signal measures on: the machinery only.",
            ),
            "full": Tier(
                cost="about 40 min on 2 cores",
                cost_s=2400,
                hidden_bias=BASE["hidden_bias"],
                note="twelve of the transition law's configurations (paper-fig3, SGD), each "
                "with its budget at the law's median step, seeds 100-107, the signal measures "
                "logged at about 60 evaluations a run.",
            ),
        },
        produce=_produce,
        companions=(CURVES, SIGNALS_CSV),
        columns=(
            Column(key="point", header="configuration"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="budget", header="budget", fmt="{:.0f}"),
            Column(key="transition_step", header="transition step", fmt="{:.0f}"),
            Column(key="positive", header="jumped within the budget"),
        ),
        page=_page,
        deviations=(
            "Per-unit hidden biases and plain SGD at the transition law's learning rates "
            "(docs/results/transition-law.md); budgets set to the law's median step.",
        ),
        headline=headline,
        sort=("point", "seed"),
    )
)
