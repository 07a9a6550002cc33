"""How often does plain SGD kill the author's classifier? The death rate of each hidden-bias form.

Every run is taken to its fate: ``transitioned`` (IC accuracy jumped,
:func:`interp.analysis.transition.detect_transition`), ``dead`` (its last hidden layer judged
dead by the rule of :mod:`interp.analysis.collapse`, before any transition), or ``alive`` (neither
by its budget); a run short of its budget with neither is ``unfinished`` and counts in no rate.
Its data come in a form of their own (``collapse-rate.csv``, :data:`COLUMNS`), so it has its own
page: per learning rate and form, how many of the declared seeds have a fate, the death rate with
its Clopper-Pearson 95% interval, the forms compared seed by seed (exact McNemar tests, Holm's
correction over every comparison on the page), every run's fate, and the runs whose last layer fell
silent and came back (the evidence the rule's span must respect).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from experiments.catalog.collapse_warning import warning_lines
from interp.analysis.collapse import (
    FATES,
    SPAN_LR_STEPS,
    SPAN_MARGIN,
    THRESHOLD,
    collapse_step,
    last_layer_column,
    rates,
    span_steps,
)
from interp.experiments import register_experiment
from interp.experiments.core import Experiment, Sweep, Tier, reproduce_lines

FORMS = ("scalar", "per_unit", "tied")
KEY = ["hidden_bias", "lr", "seed"]
CURVES = "collapse-rate-curves.csv"
CONTINUED = "collapse-rate-continued.csv"
"""Curves of runs the rule judged dead, trained again past their budget (:data:`CONTINUE`)."""
CONTINUE = {
    "lr0.03-continued": (0.03, ("scalar", "tied"), (0,), 89000),
    "lr0.03-scalar-continued": (0.03, ("scalar",), (30,), 89000),
    "lr0.03-scalar-recovered": (0.03, ("scalar",), (31,), 37500),
    "lr0.01-continued": (0.01, ("scalar", "tied"), (0,), 265500),
}
"""Sweep name -> (lr, forms, seeds, steps) of runs trained again past their budget to see whether
a verdict holds: each run the rule judges dead, to at least three spans past its verdict (the page
checks it), and scalar seed 31, judged dead by an earlier, shorter span (:data:`PREVIOUS_SPANS`),
to the transition that overturned it."""
PREVIOUS_SPANS = (225.0,)
"""Spans (``lr x steps``) the rule used before: the page says what each would have judged."""
LRS = {0.03: (15000, 12), 0.01: (45000, 12)}  # lr -> (budget steps, declared seeds)
# More seeds of the default form where the decision about it rests: (lr, form) -> seeds in all.
MORE_SEEDS = {(0.03, "scalar"): 36}
COLUMNS = (
    "hidden_bias",
    "lr",
    "seed",
    "steps",
    "steps_done",
    "fate",
    "fate_step",
    "silent_since",
    "min_active_last",
    "final_ic_acc",
    "recovered_after",
    "commit",
    "command",
)


def recoveries(steps, active) -> list[int]:
    """Lengths (steps) of each silent stretch (below the threshold) that ended with the layer
    firing again: how long a run stayed silent and still came back."""
    out, since = [], None
    for step, value in zip(steps, active):
        if value < THRESHOLD:
            since = step if since is None else since
        elif since is not None:
            out.append(int(step - since))
            since = None
    return out


def judge(steps, active, ic_acc, budget: int, optimizer: str, lr: float) -> dict:
    """A run's fate from its evaluations: the fate columns of :data:`COLUMNS` (``steps_done``
    the last evaluation; a curve followed past ``budget`` is judged over all of it)."""
    from interp.analysis.transition import detect_transition

    steps, active = [float(s) for s in steps], [float(a) for a in active]
    dead = collapse_step(steps, active, span_steps(optimizer, lr))
    t = detect_transition(pd.Series(steps), pd.Series(ic_acc, dtype=float))
    done = int(max(steps))
    if t.transitioned and (dead is None or t.step < dead[1]):
        fate, fate_step = "transitioned", float(t.step)
    elif dead is not None:
        fate, fate_step = "dead", float(dead[1])
    else:
        fate, fate_step = ("alive" if done >= budget else "unfinished"), math.nan
    back = recoveries(steps, active)
    return {
        "steps_done": done,
        "fate": fate,
        "fate_step": fate_step,
        "silent_since": float(dead[0]) if dead is not None else math.nan,
        "min_active_last": float(pd.Series(active).min()),
        "final_ic_acc": float(list(ic_acc)[-1]),
        "recovered_after": max(back) if back else math.nan,
    }


def fate_row(run_dir: str | Path) -> dict:
    """One run's fate from its ``config.json`` and ``metrics.csv`` (:data:`COLUMNS` but the
    provenance ones)."""
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    model, train = config["model"], config["train"]
    m = pd.read_csv(run_dir / "metrics.csv")
    column = last_layer_column(int(model.get("n_mlp_layers", 3)))
    active = m[column].tolist() if column in m else [math.nan] * len(m)
    budget = int(train["steps"])
    return {
        "hidden_bias": model.get("hidden_bias", "per_unit"),
        "lr": float(train["lr"]),
        "seed": int(train["seed"]),
        "steps": budget,
        **judge(m["step"], active, m["ic_acc"], budget, train["optimizer"], float(train["lr"])),
    }


def rejudged(rows: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """``rows`` with the fate of every run that has a recorded curve judged again by today's rule
    over all of its curve (:func:`with_continued` first, for runs followed past their budget);
    provenance and budget kept. A run without a curve keeps its row: a longer span judges no new
    death and moves no transition, so only a ``dead`` row without a curve could be out of date
    (:func:`stale_deaths`)."""
    if curves is None or not len(curves) or not len(rows):
        return rows
    out = rows.copy()
    index = {k: i for i, k in enumerate(zip(out["hidden_bias"], out["lr"], out["seed"]))}
    for (form, lr, seed), c in curves.groupby(KEY, sort=False):
        i = index.get((form, float(lr), int(seed)))
        if i is None:
            continue
        c = c.sort_values("step")
        fate = judge(
            c["step"], c["active_last"], c["ic_acc"], int(out["steps"].iloc[i]), "sgd", float(lr)
        )
        for column, value in fate.items():
            out.iloc[i, out.columns.get_loc(column)] = value
    return out


def stale_deaths(rows: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """Rows called ``dead`` without a recorded curve to judge them again from."""
    have = (
        set()
        if curves is None or not len(curves)
        else set(zip(curves["hidden_bias"], curves["lr"].astype(float), curves["seed"].astype(int)))
    )
    keys = zip(rows["hidden_bias"], rows["lr"].astype(float), rows["seed"].astype(int))
    return rows[[fate == "dead" and k not in have for fate, k in zip(rows["fate"], keys)]]


def mcnemar_exact(a: dict, b: dict) -> float:
    """Two-sided exact McNemar p of two forms trained on the same seeds: ``a`` and ``b`` map each
    seed with a fate under both forms to whether the event (death, or a transition within the
    budget) happened. Only the discordant seeds count: under no difference between the forms,
    the seeds where only ``a`` had the event are Binomial(discordant, 1/2). NaN without a seed
    common to both."""
    from scipy.stats import binomtest

    seeds = sorted(set(a) & set(b))
    if not seeds:
        return math.nan
    only_a = sum(1 for s in seeds if a[s] and not b[s])
    only_b = sum(1 for s in seeds if b[s] and not a[s])
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``ps`` (family-wise error over all of them; NaNs are not
    comparisons and stay NaN)."""
    real = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    out, running = [math.nan] * len(ps), 0.0
    for rank, (p, i) in enumerate(real):
        running = max(running, min(1.0, (len(real) - rank) * p))
        out[i] = running
    return out


def _produce(experiment: Experiment, tier: str, runs: Path, workers, log, out):
    """Train (or resume) the tier's sweeps under ``runs`` and return every run's fate row
    (with its commit and training command) and curve (``collapse-rate-curves.csv``)."""
    from experiments.catalog.collapse_warning import CURVE_COLUMNS, curve_rows
    from interp.experiments.sweep import load_manifest, point_dir, run_sweep

    rows, curves, continued = [], [], []
    commit = _commit()
    for sweep in experiment.tiers[tier].sweeps:
        d = runs / sweep.name
        log(f"{experiment.name} [{tier}] {sweep.command()} -> {d}")
        run_sweep(sweep.spec(), d, workers=workers, figures=False, log=log)
        for p in load_manifest(d)["points"]:
            run = point_dir(d, p["name"])
            if not (run / "metrics.csv").exists():
                continue
            n_mlp = int(json.loads((run / "config.json").read_text())["model"]["n_mlp_layers"])
            curve = curve_rows(run, last_layer_column(n_mlp))
            if sweep.name in CONTINUE:  # a verdict followed further: its curve only
                continued.append(curve)
                continue
            row = fate_row(run)
            rows.append({**row, "commit": commit, "command": train_command(run, sweep.preset)})
            curves.append(curve)
    table = pd.DataFrame(rows, columns=list(COLUMNS)).sort_values(KEY, kind="stable")

    def frame(parts):
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CURVE_COLUMNS)

    curves, continued = frame(curves), frame(continued)
    table = rejudged(table.reset_index(drop=True), with_continued(curves, continued))
    return table, {CURVES: curves, CONTINUED: continued}


def checked_curves(curves: pd.DataFrame | None, source: str) -> pd.DataFrame | None:
    """``curves`` with every run's curve checked by the one curve validator
    (:func:`interp.io.curves.check_curve`: steps finite and increasing, the share firing and the
    IC accuracy numbers at every evaluation), so that a damaged file is refused, naming it and
    the run, before anything is judged from it."""
    from interp.io.curves import check_curve

    if curves is None or not len(curves):
        return curves
    for (form, lr, seed), c in curves.groupby(KEY, sort=False):
        check_curve(c, ("active_last", "ic_acc"), f"{source} ({form}, lr {lr:g}, seed {seed})")
    return curves


def with_continued(curves: pd.DataFrame, continued: pd.DataFrame | None) -> pd.DataFrame:
    """The recorded curves, each run trained again past its budget taking its longer curve (a
    curve trained again that ends before the run's budget curve is a damaged file: refused)."""
    from interp.io.errors import DamagedFileError

    if continued is None or not len(continued):
        return curves
    if len(curves):
        ends = curves.groupby(KEY)["step"].max()
        for key, end in continued.groupby(KEY)["step"].max().items():
            if key in ends.index and end < ends[key]:
                raise DamagedFileError(
                    f"{CONTINUED} ({key[0]}, lr {key[1]:g}, seed {key[2]}): its curve ends at step "
                    f"{end:g}, before the run's budget curve ({ends[key]:g})"
                )
    again = continued.set_index(KEY).index
    kept = curves[~curves.set_index(KEY).index.isin(again)] if len(curves) else curves
    return pd.concat([kept, continued], ignore_index=True)


def _commit() -> str:
    from interp.experiments.core import _commit as commit

    return commit()


def train_command(run_dir: Path, preset: str = "paper-fig3") -> str:
    """The ``induction-cliff train`` line that trains the run (its fields as set for it)."""
    import shlex

    c = json.loads((Path(run_dir) / "config.json").read_text())
    t, m = c["train"], c["model"]
    sets = {
        "hidden_bias": m["hidden_bias"],
        "optimizer": t["optimizer"],
        "lr": t["lr"],
        "steps": t["steps"],
        "eval_every": t["eval_every"],
        "live_forecast": str(t["live_forecast"]).lower(),
        "num_threads": t["num_threads"],
    }
    parts = ["induction-cliff", "train", "--preset", preset, "--seed", str(t["seed"])]
    for k, v in sets.items():
        parts += ["--set", f"{k}={v}"]
    return shlex.join(parts)


def _sweeps(
    lr: float, steps: int, seeds, preset: str = "paper-fig3", forms=FORMS, name: str = ""
) -> Sweep:
    return Sweep(
        name=name or f"lr{lr:g}",
        preset=preset,
        grid={"hidden_bias": tuple(forms)},
        overrides={
            "optimizer": "sgd",
            "lr": lr,
            "steps": steps,
            "eval_every": 250,
            "live_forecast": False,
            "num_threads": 1,
        },
        seeds=tuple(seeds),
    )


def _headline(rows: pd.DataFrame) -> str:
    r = rates(rows)
    return "; ".join(
        f"lr {x['lr']:g} {x['hidden_bias']}: {x['dead']} of {x['n']} dead" for _, x in r.iterrows()
    )


# The page (docs/results/collapse-rate.md), from collapse-rate.csv alone.


def _num(v, spec: str = "{:.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)


def _seeds(seeds) -> str:
    return ", ".join(str(s) for s in seeds) or "none"


def _rate_lines(rows: pd.DataFrame) -> list[str]:
    r = rates(rows)
    lines = [
        "Counted over every step a run was followed (its budget, or further for a run trained "
        "again): `alive` neither died nor transitioned by then.",
        "",
        "| lr | hidden biases | runs with a fate / declared | dead | transitioned | alive | "
        "death rate (95% CI) | seeds with a fate | seeds missing |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows_lr = pd.to_numeric(rows["lr"])
    declared_seeds = {lr: n for lr, (_, n) in LRS.items()}  # the full tier's
    for lr in sorted(set(rows_lr)) if not set(rows_lr) <= set(LRS) else []:
        declared_seeds[lr] = int(rows.loc[rows_lr == lr, "seed"].max()) + 1  # another tier's
    for lr, n_declared in sorted(declared_seeds.items()):
        for form in FORMS:
            declared = MORE_SEEDS.get((lr, form), n_declared)
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


PAIRS = (("scalar", "per_unit"), ("scalar", "tied"), ("per_unit", "tied"))
EVENTS = (("dead", "dead"), ("transitioned", "transitioned within the budget"))


def _events(rows: pd.DataFrame, lr: float, form: str, fate: str) -> dict:
    """Seed -> whether the run of ``form`` at ``lr`` ended with ``fate`` (runs with a fate only)."""
    x = rows[(pd.to_numeric(rows["lr"]) == lr) & (rows["hidden_bias"] == form)]
    x = x[x["fate"].isin(("dead", "transitioned", "alive"))]
    return {int(s): f == fate for s, f in zip(x["seed"], x["fate"])}


def _paired_lines(rows: pd.DataFrame) -> list[str]:
    """The forms against each other, seed by seed: for each learning rate, pair of forms and
    event, the discordant seeds, the exact McNemar p and its Holm adjustment over every test."""
    lrs = sorted(set(LRS) | set(pd.to_numeric(rows["lr"])))
    tests = []
    for lr in lrs:
        for a, b in PAIRS:
            for fate, said in EVENTS:
                x, y = _events(rows, lr, a, fate), _events(rows, lr, b, fate)
                common = sorted(set(x) & set(y))
                only_a = sum(1 for s in common if x[s] and not y[s])
                only_b = sum(1 for s in common if y[s] and not x[s])
                tests.append((lr, a, b, said, len(common), only_a, only_b, mcnemar_exact(x, y)))
    adjusted = holm([t[-1] for t in tests])
    n = sum(1 for p in adjusted if not math.isnan(p))
    lines = [
        "The forms are trained on the same seeds, so they are compared seed by seed: of the "
        "seeds with a fate under both forms, those where only one form had the event decide "
        f"(two-sided exact McNemar test). {n} comparisons are made on this page; each p is also "
        "given after Holm's correction for all of them.",
        "",
        "| lr | forms | event | seeds paired | only the first | only the second | p | "
        f"p, Holm over {n} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (lr, a, b, said, common, only_a, only_b, p), q in zip(tests, adjusted):
        if not common:
            lines.append(f"| {lr:g} | {a} against {b} | {said} | 0 | - | - | not testable | - |")
            continue
        lines.append(
            f"| {lr:g} | {a} against {b} | {said} | {common} | {only_a} | {only_b} | "
            f"{p:.2f} | {q:.2f} |"
        )
    return lines


def verdicts(curves: pd.DataFrame, span_lr: float | None = None) -> pd.DataFrame:
    """Every run the rule judged dead, from its recorded curve, and what it did after: the
    verdict's step, how far past it the run was followed (in steps and in spans of the rule),
    the first evaluation where its last layer fired again (at or above the threshold), and the IC
    accuracy at its last evaluation. A verdict is overturned when the layer fired again.
    ``span_lr`` judges with another span (``lr x steps``) than today's rule."""
    out = []
    if curves is None or not len(curves):
        return pd.DataFrame(out)
    for (form, lr, seed), c in curves.groupby(["hidden_bias", "lr", "seed"], sort=True):
        c = c.sort_values("step")
        steps, active = c["step"].tolist(), c["active_last"].tolist()
        span = span_steps("sgd", float(lr)) if span_lr is None else round(span_lr / float(lr))
        dead = collapse_step(steps, active, span)
        if dead is None:
            continue
        after = c[c["step"] > dead[1]]
        again = after[after["active_last"] >= THRESHOLD]
        last = float(c["step"].iloc[-1])
        out.append(
            {
                "hidden_bias": form,
                "lr": float(lr),
                "seed": int(seed),
                "verdict": dead[1],
                "followed": last - dead[1],
                "spans": (last - dead[1]) / span,
                "fired_again": float(again["step"].iloc[0]) if len(again) else math.nan,
                "final_ic_acc": float(c["ic_acc"].iloc[-1]),
            }
        )
    return pd.DataFrame(out)


def longest_recovery(rows: pd.DataFrame) -> pd.Series | None:
    """The row of the run that came back from the longest silence, counted in ``lr x steps``
    (``None`` when no run came back)."""
    back = pd.to_numeric(rows["recovered_after"], errors="coerce") * rows["lr"].astype(float)
    return None if back.notna().sum() == 0 else rows.loc[back.idxmax()]


def _span_lines(rows: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    """Where the span comes from, and what each span the rule has used judges on the curves."""
    lines = ["## The span", ""]
    top = longest_recovery(rows)
    if top is not None:
        lr, back = float(top["lr"]), float(top["recovered_after"])
        lines += [
            f"The longest silence a run came back from: {back:.0f} steps at lr {lr:g} "
            f"({top['hidden_bias']}, seed {int(top['seed'])}), {back * lr:g} lr x steps. The "
            f"rule's span is {SPAN_MARGIN:g} times that, {SPAN_LR_STEPS:g} lr x steps: "
            f"{span_steps('sgd', 0.03)} steps at lr 0.03 and {span_steps('sgd', 0.01)} at lr "
            "0.01. What each span the rule has used judges on the recorded curves (a verdict "
            "is overturned when the last layer fires again after it):",
            "",
        ]
    lines += [
        "| span (lr x steps) | at lr 0.03 | at lr 0.01 | runs judged dead | overturned | "
        "followed three spans past the verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for span_lr, what in [*((s, "earlier") for s in PREVIOUS_SPANS), (SPAN_LR_STEPS, "today")]:
        v = verdicts(curves, span_lr)
        n = len(v)
        over = int(v["fired_again"].notna().sum()) if n else 0
        held = int((v["spans"] >= 3).sum()) if n else 0
        lines.append(
            f"| {span_lr:g} ({what}) | {round(span_lr / 0.03)} | {round(span_lr / 0.01)} | {n} | "
            f"{over} | {held} |"
        )
    return lines + [""]


def _verdict_lines(rows: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    v = verdicts(curves)
    dead = int((rows["fate"] == "dead").sum())
    lines = [*_span_lines(rows, curves), "## What judged runs did after the verdict", ""]
    if not len(v):
        return lines + [f"None of the {dead} runs judged dead has a recorded curve.", ""]
    overturned = int(v["fired_again"].notna().sum())
    validated = int((v["spans"] >= 3).sum())
    lines += [
        f"Of the {dead} runs judged dead in the table, {len(v)} have a recorded curve"
        + (" (the others were trained before curves were kept)" if len(v) < dead else "")
        + f"; {overturned} of these fired again later "
        f"(an overturned verdict); {validated} were followed at least three spans of the rule past "
        "their verdict. A verdict followed for less than that has not been tested: a run may "
        "stay silent longer and recover. `stop_on_collapse` is off by default for that reason: "
        "`train` then only says when a run is judged dead and trains on.",
        "",
        "| lr | hidden biases | seed | verdict at step | followed after it (steps) | spans of "
        "the rule | fired again at step | IC acc at the last step |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, x in v.sort_values(
        ["lr", "hidden_bias", "seed"], ascending=[False, True, True]
    ).iterrows():
        lines.append(
            f"| {x['lr']:g} | {x['hidden_bias']} | {int(x['seed'])} | {int(x['verdict'])} | "
            f"{int(x['followed'])} | {x['spans']:.1f} | {_num(x['fired_again'])} | "
            f"{x['final_ic_acc']:.3f} |"
        )
    return lines + [""]


DECLARED_FIRST = 12
"""Seeds below this were measured first: the forecast they give is scored on the later seeds."""


def _law_chance(form: str, lr: float, budget: int) -> float:
    """The stored law's probability of a transition within ``budget`` at paper-fig3 with this
    form and learning rate (plain SGD), before any collapse risk."""
    from interp.train.overrides import build_configs
    from phenomenology.transition_law import StoredLaw, law_inputs

    sets = {"hidden_bias": form, "lr": str(lr), "steps": str(budget), "optimizer": "sgd"}
    task, model, train, _ = build_configs("paper-fig3", sets, None)
    fields, _ = law_inputs(task, model, train)
    return float(StoredLaw.load().forecast(fields).p_within(budget))


def _calibration_lines(rows: pd.DataFrame) -> list[str]:
    """``forecast``'s P from the seeds measured first against the share on the later seeds."""
    from interp.analysis.collapse import clopper_pearson

    lines = ["## Forecast against held-out seeds", ""]
    fated = rows[rows["fate"].isin(FATES[:3])]
    later = fated[fated["seed"] >= DECLARED_FIRST]
    if not len(later):
        return lines + [
            f"No seed at or above {DECLARED_FIRST} has a fate yet: nothing to score.",
            "",
        ]
    lines += [
        f"What `forecast` says from seeds 0-{DECLARED_FIRST - 1} (its P: the share of them that "
        "transitioned within the budget; beside it what the law times their survival would say) "
        f"against what the later seeds did. A P inside the later seeds' 95% interval is "
        "consistent with them.",
        "",
        "| lr | hidden biases | budget | P (seeds measured first) | law x survival | later "
        "seeds: transitioned / with a fate | share (95% CI) | P inside |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (lr, form), held in later.groupby(["lr", "hidden_bias"], sort=True):
        first = fated[(fated["lr"] == lr) & (fated["hidden_bias"] == form)]
        first = first[first["seed"] < DECLARED_FIRST]
        budget = int(held["steps"].min())
        k0 = int(((first["fate"] == "transitioned") & (first["fate_step"] <= budget)).sum())
        n0 = len(first)
        survival = 1 - int((first["fate"] == "dead").sum()) / n0 if n0 else math.nan
        law = _law_chance(form, float(lr), budget) * survival
        k = int(((held["fate"] == "transitioned") & (held["fate_step"] <= budget)).sum())
        low, high = clopper_pearson(k, len(held))
        p = k0 / n0 if n0 else math.nan
        inside = "yes" if low <= p <= high else "no"
        lines.append(
            f"| {lr:g} | {form} | {budget} | {p:.2f} ({k0} of {n0}) | {law:.2f} | {k} / "
            f"{len(held)} | {k / len(held):.2f} ({low:.2f}-{high:.2f}) | {inside} (law x "
            f"survival: {'yes' if low <= law <= high else 'no'}) |"
        )
    return lines + [""]


def render_collapse_rate(experiment, rows: pd.DataFrame, extra: dict | None = None) -> str:
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
        "budget), `unfinished` (short of its budget: in no rate). A run trained again past its "
        "budget is judged over every step it was followed (its steps done exceed its budget): "
        "a death can be judged after the budget, a transition counts within the budget only "
        "when it came by then."
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
        *_paired_lines(rows),
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
    back = rows[pd.to_numeric(rows["recovered_after"], errors="coerce").notna()]
    lines += ["", "## Silences that ended", ""]
    if len(back):
        lines.append(
            f"Runs whose last hidden layer fell below {THRESHOLD:.0%} of its units firing and "
            "came back, with the longest such silence; the rule's span at the run's learning "
            "rate must exceed it, or the rule would have called a living run dead:"
        )
        lines.append("")
        for _, x in back.sort_values(["lr", "hidden_bias", "seed"]).iterrows():
            span = span_steps("sgd", float(x["lr"]))
            lines.append(
                f"- lr {x['lr']:g}, {x['hidden_bias']}, seed {int(x['seed'])}: silent for "
                f"{float(x['recovered_after']):.0f} steps, then firing again (span {span} steps)"
            )
        lines.append("")
        lines.append(
            "Few recoveries stand behind the rule: its threshold and span are provisional."
        )
    else:
        lines.append(
            f"No run here fell below {THRESHOLD:.0%} and came back: the rule's span rests on "
            "no recovery measured in these data, and is provisional."
        )
    curves = checked_curves((extra or {}).get(CURVES), CURVES)
    followed = with_continued(
        curves if curves is not None else pd.DataFrame(),
        checked_curves((extra or {}).get(CONTINUED), CONTINUED),
    )
    lines += ["", *_verdict_lines(rows, followed), *_calibration_lines(rows)]
    lines += [*warning_lines(rows, followed)]  # every recorded curve, the longest of a run
    lines += ["## Deviations from the paper", ""]
    lines += [f"- {d}" for d in experiment.deviations]
    lines += reproduce_lines(
        experiment,
        [
            f"induction-cliff reproduce {experiment.name} --render-only   # this page from "
            f"{experiment.name}.csv and {CURVES}",
            f"induction-cliff reproduce {experiment.name} --tier full     # trains every "
            "declared run",
        ],
        rows,
    )
    return "\n".join(lines)


EXPERIMENT = register_experiment(
    Experiment(
        name="collapse-rate",
        title=(
            "How often plain SGD kills the classifier: the collapse rate of each hidden-bias form"
        ),
        question=(
            "At the paper-fig3 settings under plain SGD, what share of seeds end with a dead "
            "classifier for the author's scalar hidden biases, per-unit ones and the author's "
            "tied initialisation, at lr 0.03 and at lr 0.01 (the author's code)?"
        ),
        produce=_produce,
        companions=(CURVES, CONTINUED),
        tiers={
            "quick": Tier(
                sweeps=(
                    Sweep(
                        name="tiny",
                        preset="tiny",
                        grid={"hidden_bias": FORMS},
                        overrides={
                            "optimizer": "sgd",
                            "lr": 3,
                            "steps": 300,
                            "eval_every": 25,
                            "live_forecast": False,
                            "num_threads": 1,
                        },
                        seeds=(0, 1),
                    ),
                ),
                cost="about 60 s on one core",
                cost_s=60,
                note="the `tiny` preset at plain SGD lr 3 (where it dies), three forms, seeds 0-1.",
            ),
            "full": Tier(
                sweeps=(
                    *(_sweeps(lr, steps, range(n)) for lr, (steps, n) in LRS.items()),
                    *(
                        _sweeps(
                            lr,
                            LRS[lr][0],
                            range(LRS[lr][1], n),
                            forms=(form,),
                            name=f"lr{lr:g}-{form}-more",
                        )
                        for (lr, form), n in MORE_SEEDS.items()
                    ),
                    *(
                        _sweeps(lr, steps, seeds, forms=forms, name=name)
                        for name, (lr, forms, seeds, steps) in CONTINUE.items()
                    ),
                ),
                cost="60 lr-0.03 runs of 13-17 min on a heavily shared core, and 36 lr-0.01 "
                "runs of 7-15 min each (compiled by backend=auto) on one core beside a second "
                "busy worker: about 24 h of one core in all",
                cost_s=86400,
                note="paper-fig3, three forms, plain SGD: lr 0.03 to 15000 steps (seeds 0-11, "
                "and seeds 12-35 of the default scalar form) and lr 0.01 to 45000 steps (seeds "
                "0-11), evaluated every 250 steps; the lr 0.03 deaths (scalar and tied seed 0, "
                "scalar seeds 30 and 31) trained again to 37500 steps, three spans of the rule "
                "past the budget.",
            ),
        },
        columns=(),
        deviations=(
            "lr 0.03 runs deviate from the author's code's lr 0.01 (the transition time scales as "
            "1/lr).",
            "Budgets of 15000 (lr 0.03) and 45000 (lr 0.01) steps, not the toolkit's default 1e5 "
            "(the paper gives no length): "
            "a run alive at its budget is reported as alive, not as transitioned or dead.",
        ),
        page=render_collapse_rate,
        meta=("commit", "command"),
        headline=_headline,
    )
)
