"""The collapse-rate page (``docs/results/collapse-rate.md``), from ``collapse-rate.csv`` alone."""

from __future__ import annotations

import math

import pandas as pd

from interp.analysis.collapse import SPAN_LR_STEPS, THRESHOLD
from interp.experiments.catalog.collapse_rate import FATES, FORMS, LRS, fisher, rates


def _num(v, spec: str = "{:.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)


def _seeds(seeds) -> str:
    return ", ".join(str(s) for s in seeds) or "none"


def _rate_lines(rows: pd.DataFrame) -> list[str]:
    r = rates(rows)
    lines = [
        "| lr | hidden biases | runs with a fate / declared | dead | transitioned | alive at "
        "budget | death rate (95% CI) | seeds with a fate | seeds missing |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows_lr = pd.to_numeric(rows["lr"])
    declared_seeds = {lr: n for lr, (_, n) in LRS.items()}  # the full tier's
    for lr in sorted(set(rows_lr)) if not set(rows_lr) <= set(LRS) else []:
        declared_seeds[lr] = int(rows.loc[rows_lr == lr, "seed"].max()) + 1  # another tier's
    for lr, declared in sorted(declared_seeds.items()):
        for form in FORMS:
            x = r[(r["lr"] == lr) & (r["hidden_bias"] == form)]
            x = x.iloc[0] if len(x) else None
            seeds = x["seeds"] if x is not None else []
            missing = [s for s in range(declared) if s not in seeds]
            if x is None or not x["n"]:
                rate, counts = "unmeasured", ("-", "-", "-")
            else:
                rate = f"{x['rate']:.2f} ({x['low']:.2f}-{x['high']:.2f})"
                counts = (x["dead"], x["transitioned"], x["alive"])
            n = 0 if x is None else x["n"]
            lines.append(
                f"| {lr:g} | {form} | {n} / {declared} | {counts[0]} | {counts[1]} | "
                f"{counts[2]} | {rate} | {_seeds(seeds)} | {_seeds(missing)} |"
            )
    return lines


def _fisher_lines(rows: pd.DataFrame) -> list[str]:
    r = rates(rows)
    lines = []
    for lr in sorted(set(LRS) | set(r["lr"]) if len(r) else LRS):
        got = {x["hidden_bias"]: x for _, x in r[r["lr"] == lr].iterrows()}
        for a, b in (("scalar", "per_unit"), ("scalar", "tied"), ("per_unit", "tied")):
            if a in got and b in got and got[a]["n"] and got[b]["n"]:
                p = fisher(got[a], got[b])
                lines.append(
                    f"- lr {lr:g}, {a} ({got[a]['dead']} of {got[a]['n']} dead) against {b} "
                    f"({got[b]['dead']} of {got[b]['n']}): Fisher exact p = {p:.2f}"
                )
            else:
                lines.append(f"- lr {lr:g}, {a} against {b}: not testable (a form has no run)")
    return lines


def render_collapse_rate(experiment, rows: pd.DataFrame) -> str:
    bad = sorted(set(rows["hidden_bias"].astype(str)) - set(FORMS))
    if bad:
        raise ValueError(f"collapse-rate.csv field hidden_bias has {bad}: allowed values {FORMS}")
    bad = sorted(set(rows["fate"].astype(str)) - set(FATES))
    if bad:
        raise ValueError(f"collapse-rate.csv field fate has {bad}: allowed values {FATES}")
    lines = [f"# {experiment.title}", "", f"**Question.** {experiment.question}", ""]
    lines += ["## Data", ""]
    counts = ", ".join(f"{int((rows['hidden_bias'] == f).sum())} {f}" for f in FORMS)
    lines.append(f"- **Runs:** {len(rows)} ({counts}); hidden biases set per run (`hidden_bias`).")
    lines.append(
        "- **Fate** of a run: `transitioned` (IC accuracy jumped), `dead` (its last hidden "
        f"layer below {THRESHOLD:.0%} of its units firing at every evaluation over "
        f"{SPAN_LR_STEPS:g} / lr steps, `interp.analysis.collapse`), `alive` (neither by its "
        "budget), `unfinished` (short of its budget: in no rate)."
    )
    commits = list(dict.fromkeys(str(c) for c in rows["commit"]))
    lines.append(f"- **Commit:** {', '.join(f'`{c}`' for c in commits)}.")
    lines += ["", "## Death rates", ""] + _rate_lines(rows)
    lines += [
        "",
        "Intervals: Clopper-Pearson, 95%. A cell with few runs says little: the interval is the "
        "measure of it.",
        "",
        "## Between forms",
        "",
        *_fisher_lines(rows),
        "",
        "## Every run",
        "",
        "| lr | hidden biases | seed | steps done / budget | fate | at step | silent since | "
        "lowest share firing (last layer) | longest silence recovered from | final IC acc |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = rows.assign(_f=rows["hidden_bias"].map(FORMS.index))
    for _, x in order.sort_values(["lr", "_f", "seed"], ascending=[False, True, True]).iterrows():
        lines.append(
            f"| {x['lr']:g} | {x['hidden_bias']} | {int(x['seed'])} | {int(x['steps_done'])} / "
            f"{int(x['steps'])} | {x['fate']} | {_num(x['fate_step'])} | "
            f"{_num(x['silent_since'])} | {_num(x['min_active_last'], '{:.4f}')} | "
            f"{_num(x['recovered_after'])} | {_num(x['final_ic_acc'], '{:.3f}')} |"
        )
    back = pd.to_numeric(rows["recovered_after"], errors="coerce").dropna()
    lines += ["", "## Silences that ended", ""]
    if len(back):
        lines.append(
            f"{len(back)} run(s) fell below {THRESHOLD:.0%} and came back; the longest silence "
            f"recovered from lasted {back.max():.0f} steps. The rule's span must exceed it."
        )
    else:
        lines.append(
            f"No run here fell below {THRESHOLD:.0%} and came back: the rule's span rests on "
            "no recovery measured in these data, and is provisional."
        )
    lines += ["", "## Deviations from the paper", ""]
    lines += [f"- {d}" for d in experiment.deviations]
    lines += ["", "## Reproduce", "", "```bash"]
    lines += [
        f"induction-cliff reproduce {experiment.name} --render-only   # this page from "
        f"{experiment.name}.csv",
        f"induction-cliff reproduce {experiment.name} --tier full     # trains every declared run",
        "```",
        "",
        "The rows' data came from:",
        "",
    ]
    lines += [f"- `{c}`" for c in dict.fromkeys(str(c) for c in rows["command"])]
    lines.append("")
    return "\n".join(lines)
