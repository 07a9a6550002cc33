"""The classifier's hidden biases: does the form move the transition? A view of the
collapse-rate runs.

The same paper-fig3 runs as ``collapse-rate`` (plain SGD, the author's scalar biases, per-unit
biases and the author's tied initialisation, paired by seed), read for what the transition does:
each form's transition steps side by side per learning rate, and each seed's steps with the
differences to the scalar form, for the seeds where every form has a fate. Its CSV
(``hidden-bias.csv``, :data:`COLUMNS`) is derived from ``collapse-rate.csv`` by
:func:`from_collapse_rows`; its page is rendered from it alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from interp.experiments import register_experiment
from interp.experiments.core import Experiment, Tier, reproduce_lines

FORMS = ("scalar", "per_unit", "tied")
COLUMNS = (
    "hidden_bias",
    "lr",
    "seed",
    "steps",
    "fate",
    "transition_ic_acc",
    "transitioned",
    "final_ic_acc",
    "commit",
    "command",
)


def from_collapse_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``hidden-bias.csv`` from the collapse-rate rows: every run with a fate (an
    unfinished run is left out), its transition step when it transitioned."""
    r = rows[rows["fate"].isin(["transitioned", "dead", "alive"])]
    jumped = r["fate"] == "transitioned"
    out = pd.DataFrame(
        {
            "hidden_bias": r["hidden_bias"],
            "lr": r["lr"],
            "seed": r["seed"],
            "steps": r["steps"],
            "fate": r["fate"],
            "transition_ic_acc": pd.to_numeric(r["fate_step"]).where(jumped),
            "transitioned": jumped,
            "final_ic_acc": r["final_ic_acc"],
            "commit": r["commit"],
            "command": r["command"],
        }
    )
    return out[list(COLUMNS)].reset_index(drop=True)


def _spread(values: pd.Series) -> str:
    v = pd.to_numeric(values, errors="coerce").dropna()
    if not len(v):
        return "none"
    if len(v) == 1:
        return f"{v.iloc[0]:.0f} (1 seed)"
    return f"{v.mean():.0f} ± {v.std():.0f} ({len(v)} seeds, {v.min():.0f}-{v.max():.0f})"


def _jumped(rows: pd.DataFrame) -> pd.Series:
    return rows["transitioned"].astype(str).str.lower().isin(["true", "1", "1.0"])


def paired(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (lr, seed) with each form's transition step (NaN when it did not jump or has
    no run) and the differences to the scalar form (NaN unless both jumped)."""
    r = rows.assign(
        step=pd.to_numeric(rows["transition_ic_acc"], errors="coerce").where(_jumped(rows))
    )
    wide = r.pivot_table(
        index=["lr", "seed"], columns="hidden_bias", values="step", aggfunc="first", dropna=False
    )
    wide = wide.reindex(columns=list(FORMS))
    wide["difference"] = wide["per_unit"] - wide["scalar"]
    wide["tied_difference"] = wide["tied"] - wide["scalar"]
    return wide.reset_index()


def _headline(rows: pd.DataFrame) -> str:
    """How many seeds of each form jumped, per learning rate, and the paired difference."""
    parts = []
    for lr, g in rows.groupby(pd.to_numeric(rows["lr"]), sort=True):
        jumped = _jumped(g)
        counts = ", ".join(
            f"{f} {int(jumped[g['hidden_bias'] == f].sum())} "
            f"of {int((g['hidden_bias'] == f).sum())}"
            for f in FORMS
            if (g["hidden_bias"] == f).any()
        )
        diff = _spread(paired(g)["difference"])
        parts.append(f"lr {lr:g}: jumped {counts}; per-unit - scalar {diff}")
    return "; ".join(parts)


def _num(v, spec="{:.0f}"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)


def _side_by_side(rows: pd.DataFrame) -> list[str]:
    lines = [
        "| lr | hidden biases | jumped | dead | alive at budget | transition (IC acc), "
        "mean ± sd | final IC acc |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for lr, g in rows.groupby("lr", sort=True):
        for form in FORMS:
            f = g[g["hidden_bias"] == form]
            if not len(f):  # no run of this form at this lr: no row
                continue
            j = _jumped(f)
            step = pd.to_numeric(f["transition_ic_acc"], errors="coerce").where(j)
            acc = pd.to_numeric(f["final_ic_acc"], errors="coerce")
            fates = f["fate"].value_counts()
            lines.append(
                f"| {lr:g} | {form} | {int(j.sum())} of {len(f)} | {fates.get('dead', 0)} | "
                f"{fates.get('alive', 0)} | {_spread(step)} | "
                f"{acc.min():.3f}-{acc.max():.3f} |"
            )
    return lines


def _by_seed(rows: pd.DataFrame) -> list[str]:
    """Each seed whose runs of every form have a fate: the steps, or the fate of a form that
    did not jump, and the differences to the scalar form."""
    fate = {
        (float(r["lr"]), int(r["seed"]), str(r["hidden_bias"])): r["fate"]
        for r in rows.to_dict("records")
    }
    lines = [
        "| lr | seed | scalar | per-unit | tied | per-unit - scalar | tied - scalar |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in paired(rows).to_dict("records"):
        key = (float(p["lr"]), int(p["seed"]))
        if not all((*key, f) in fate for f in FORMS):
            continue  # a form without a run of this seed: not a pair
        cells = [fate[(*key, f)] if pd.isna(p[f]) else _num(p[f]) for f in FORMS]
        lines.append(
            f"| {p['lr']:g} | {int(p['seed'])} | {' | '.join(cells)} | "
            f"{_num(p['difference'], '{:+.0f}')} | {_num(p['tied_difference'], '{:+.0f}')} |"
        )
    return lines


def render_hidden_bias(experiment: Experiment, rows: pd.DataFrame) -> str:
    bad = sorted(set(rows["hidden_bias"].astype(str)) - set(FORMS))
    if bad:
        raise ValueError(f"hidden-bias.csv field hidden_bias has {bad}: allowed values {FORMS}")
    lines = [f"# {experiment.title}", "", f"**Question.** {experiment.question}", ""]
    lines += ["## Data", ""]
    counts = ", ".join(f"{int((rows['hidden_bias'] == f).sum())} {f}" for f in FORMS)
    lines.append(
        f"- **Runs:** {len(rows)} ({counts}; `hidden_bias` set per run): the runs of "
        "[collapse-rate](collapse-rate.md) that have a fate, paper-fig3 under plain SGD."
    )
    commits = list(dict.fromkeys(str(c) for c in rows["commit"]))
    lines.append(f"- **Commit:** {', '.join(f'`{c}`' for c in commits)}.")
    lines += ["", "## The forms side by side", "", *_side_by_side(rows)]
    lines += ["", "## Paired by seed", ""]
    lines += [
        "Seeds where every form has a run with a fate; a form that did not jump shows its fate.",
        "",
        *_by_seed(rows),
    ]
    lines += ["", "Paired difference over the seeds where both forms jumped:", ""]
    for lr, g in paired(rows).groupby("lr", sort=True):
        for col, name in (("difference", "per-unit"), ("tied_difference", "tied")):
            spread = _spread(g[col]).replace(" (", " steps (", 1)
            lines.append(f"- lr {lr:g}, {name} - scalar: {spread}")
    lines += ["", "## Deviations from the paper", ""]
    lines += [f"- {d}" for d in experiment.deviations]
    lines += reproduce_lines(
        experiment,
        [
            f"induction-cliff reproduce {experiment.name} --render-only   # this page from "
            f"{experiment.name}.csv",
            f"induction-cliff reproduce {experiment.name} --tier full     # from collapse-rate.csv "
            "(trains its runs when it is missing)",
        ],
        rows,
    )
    return "\n".join(lines)


def _produce(experiment: Experiment, tier: str, runs: Path, workers, log, out):
    """The rows from ``out/collapse-rate.csv`` when it is there, or else from the collapse-rate
    experiment's runs of the same tier (trained when missing)."""
    from interp.experiments import get_experiment
    from interp.experiments.core import read_rows

    source = None if out is None else Path(out) / "collapse-rate.csv"
    if source is not None and source.exists():
        log(f"{experiment.name}: from {source}")
        rows = read_rows(source, ("commit", "command"))
    else:
        collapse = get_experiment("collapse-rate")
        rows, _ = collapse.produce(
            collapse, tier, runs.parent.parent / "collapse-rate" / tier, workers, log, out
        )
        rows = rows.assign(command=f"induction-cliff reproduce collapse-rate --tier {tier}")
    return from_collapse_rows(rows), {}


EXPERIMENT = register_experiment(
    Experiment(
        name="hidden-bias",
        title="The classifier's hidden biases: one scalar per layer, one per unit, or tied",
        question=(
            "Does the form of the classifier's hidden biases (the author's one scalar per layer, "
            "one per unit, or the author's tied initialisation) move the transition at the "
            "paper-fig3 settings?"
        ),
        tiers={
            "quick": Tier(
                sweeps=(),
                cost="about 60 s on one core (the collapse-rate quick tier's runs)",
                cost_s=60,
                note="the collapse-rate quick tier: the `tiny` preset at plain SGD lr 3.",
            ),
            "full": Tier(
                sweeps=(),
                cost="none beyond the collapse-rate full tier, whose runs it reads",
                cost_s=0,
                note="the collapse-rate full tier: paper-fig3, three forms, plain SGD at lr "
                "0.03 and 0.01, paired seeds.",
            ),
        },
        columns=(),
        deviations=(
            "lr 0.03 runs deviate from the author's code's lr 0.01 (the transition time scales as "
            "1/lr).",
            "Budgets of 15000 (lr 0.03) and 45000 (lr 0.01) steps, not the toolkit's default 1e5 "
            "(the paper gives no length).",
        ),
        page=render_hidden_bias,
        produce=_produce,
        meta=("commit", "command"),
        headline=_headline,
    )
)
