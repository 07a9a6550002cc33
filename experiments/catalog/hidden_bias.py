"""The classifier's hidden biases: one scalar per layer (the author's code) or one per unit.

Its data come in a form of their own (``hidden-bias.csv``: ``hidden_bias, lr, seed, steps,
eval_every, transition_ic_acc, transition_ic_loss, transitioned, final_ic_acc, wall_s, commit,
command``), so it has its own page: the two forms side by side per learning rate, with the seeds'
spread and the paired difference of each seed's transition steps.
"""

from __future__ import annotations

import math

import pandas as pd

from interp.experiments import register_experiment
from interp.experiments.core import Experiment, Sweep, Tier, current_format_version

FORMS = ("scalar", "per_unit")
COLUMNS = (
    "hidden_bias",
    "lr",
    "seed",
    "steps",
    "eval_every",
    "transition_ic_acc",
    "transition_ic_loss",
    "transitioned",
    "final_ic_acc",
    "wall_s",
    "commit",
    "command",
)


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
    """One row per (lr, seed) with both forms' transition steps and their difference
    (per-unit minus scalar; NaN unless both jumped)."""
    r = rows.assign(
        step=pd.to_numeric(rows["transition_ic_acc"], errors="coerce").where(_jumped(rows))
    )
    wide = r.pivot_table(
        index=["lr", "seed"], columns="hidden_bias", values="step", aggfunc="first", dropna=False
    )
    wide = wide.reindex(columns=list(FORMS))
    wide["difference"] = wide["per_unit"] - wide["scalar"]
    wide["ratio"] = wide["per_unit"] / wide["scalar"]
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


def render_hidden_bias(experiment: Experiment, rows: pd.DataFrame) -> str:
    bad = sorted(set(rows["hidden_bias"].astype(str)) - set(FORMS))
    if bad:
        raise ValueError(f"hidden-bias.csv field hidden_bias has {bad}: allowed values {FORMS}")
    pairs = paired(rows)
    lines = [f"# {experiment.title}", "", f"**Question.** {experiment.question}", ""]
    lines += ["## Data", ""]
    counts = ", ".join(f"{int((rows['hidden_bias'] == f).sum())} {f}" for f in FORMS)
    lines.append(
        f"- **Runs:** {len(rows)} ({counts}; `hidden_bias` set per run), trained under run "
        "format version "
        f"{current_format_version()} or earlier (the CSV does not record it)."
    )
    commits = list(dict.fromkeys(str(c) for c in rows["commit"]))
    lines.append(f"- **Commit:** {', '.join(f'`{c}`' for c in commits)}.")
    wall = pd.to_numeric(rows["wall_s"], errors="coerce")
    if wall.notna().any():
        lines.append(f"- **Wall time:** {wall.sum() / 60:.1f} min in all.")
    lines += ["", "## Both forms side by side", ""]
    lines += [
        "| lr | hidden biases | jumped | transition (IC acc), mean ± sd | final IC acc |",
        "| --- | --- | --- | --- | --- |",
    ]
    for lr, g in rows.groupby("lr", sort=True):
        for form in FORMS:
            f = g[g["hidden_bias"] == form]
            if not len(f):  # no run of this form at this lr: no row
                continue
            j = _jumped(f)
            step = pd.to_numeric(f["transition_ic_acc"], errors="coerce").where(j)
            acc = pd.to_numeric(f["final_ic_acc"], errors="coerce")
            accs = f"{acc.min():.3f}-{acc.max():.3f}" if acc.notna().any() else "-"
            lines.append(
                f"| {lr:g} | {form} | {int(j.sum())} of {len(f)} | {_spread(step)} | {accs} |"
            )
    lines += ["", "## Paired by seed", ""]
    lines += [
        "| lr | seed | scalar | per-unit | per-unit - scalar | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def num(v, spec="{:.0f}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)

    ran = {(float(r["lr"]), int(r["seed"]), str(r["hidden_bias"])) for _, r in rows.iterrows()}

    def cell(p, form):
        if (float(p["lr"]), int(p["seed"]), form) not in ran:
            return "no run"
        return "no jump" if pd.isna(p[form]) else num(p[form])

    for _, p in pairs.iterrows():
        if not any((float(p["lr"]), int(p["seed"]), f) in ran for f in FORMS):
            continue  # no run of this seed at this lr: no row
        lines.append(
            f"| {p['lr']:g} | {int(p['seed'])} | {cell(p, 'scalar')} | "
            f"{cell(p, 'per_unit')} | {num(p['difference'], '{:+.0f}')} | "
            f"{num(p['ratio'], '{:.3f}')} |"
        )
    lines += ["", "Paired difference over the seeds where both forms jumped:", ""]
    for lr, g in pairs.groupby("lr", sort=True):
        lines.append(f"- lr {lr:g}: {_spread(g['difference']).replace(' (', ' steps (', 1)}")
    lines += ["", "## Deviations from the paper", ""]
    lines += [f"- {d}" for d in experiment.deviations]
    lines += ["", "## Reproduce", "", "```bash"]
    lines += [
        f"induction-cliff reproduce {experiment.name} --render-only   # this page from "
        f"{experiment.name}.csv",
        "```",
        "",
        "The rows' data came from:",
        "",
    ]
    lines += [f"- `{c}`" for c in dict.fromkeys(str(c) for c in rows["command"])]
    lines.append("")
    return "\n".join(lines)


def _analyse(experiment: Experiment, tier: str, dirs) -> pd.DataFrame:
    from interp.experiments.sweep import summarize_sweep

    frames = []
    for d in dirs:
        s = summarize_sweep(d)
        frames.append(
            pd.DataFrame(
                {
                    "hidden_bias": s["hidden_bias"],
                    "lr": s.get("lr", float("nan")),
                    "seed": s["seed"],
                    "steps": s["steps"],
                    "eval_every": s.get("eval_every", float("nan")),
                    "transition_ic_acc": s["transition_step"],
                    "transition_ic_loss": float("nan"),
                    "transitioned": s["transition_step"].notna(),
                    "final_ic_acc": s["ic_acc"],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


EXPERIMENT = register_experiment(
    Experiment(
        name="hidden-bias",
        title="The classifier's hidden biases: one scalar per layer or one per unit",
        question=(
            "Does giving the classifier's hidden layers one bias per unit, instead of the "
            "author's one scalar per layer, move the transition at the paper-fig3 settings?"
        ),
        analyse=_analyse,
        tiers={
            "quick": Tier(
                sweeps=(
                    Sweep(
                        preset="tiny",
                        grid={"hidden_bias": FORMS},
                        overrides={
                            "steps": 1500,
                            "eval_every": 25,
                            "optimizer": "sgd",
                            "lr": 0.3,
                            "num_threads": 1,
                        },
                    ),
                ),
                cost="about 40 s on one core",
                cost_s=40,
                note="the `tiny` preset at plain SGD lr 0.3, both forms, seed 0.",
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        preset="paper-fig3",
                        grid={"hidden_bias": FORMS, "lr": (0.03, 0.01)},
                        overrides={"num_threads": 1},
                        seeds=(0, 1, 2),
                    ),
                ),
                cost="hours on two cores",
                cost_s=36000,
                note="paper-fig3, both forms, plain SGD at lr 0.03 and 0.01, paired seeds.",
            ),
        },
        columns=(),
        deviations=(
            "lr 0.03 runs deviate from the paper's lr 0.01 (the transition time scales as 1/lr).",
        ),
        page=render_hidden_bias,
        meta=("commit", "command", "wall_s"),
        headline=_headline,
    )
)
