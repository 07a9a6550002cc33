"""Does the dead-unit measure see a death coming? Early-warning scores from the runs' curves.

At a check step ``c``, every run whose fate is still open there (not yet judged dead, not yet
transitioned) is scored by how few of its last hidden layer's units fire
(``1 - active_last`` at ``c``). Two scores, per learning rate and check step:

- **AUROC** over every such run with a fate (dead against transitioned or alive): the chance
  that a run that died reads lower than one that did not (ties count half). No threshold is fitted.
- **A held-out rule**: a threshold on ``active_last`` at ``c`` is chosen on the fitting seeds
  (seeds below the split, :data:`SPLIT`) as the one that best separates their dead runs from the
  others (Youden's J; the midpoint between neighbouring values, the highest on a tie), then
  applied to the held-out seeds: dead runs warned, other runs warned (false alarms), and the lead
  time, the steps from ``c`` to the step the collapse rule judged the run dead.

The curves (``collapse-rate-curves.csv``: hidden_bias, lr, seed, step, active_last, ic_acc) come
from the same runs as ``collapse-rate.csv``; runs without curves take part in no score.
"""

from __future__ import annotations

import math

import pandas as pd

CURVE_COLUMNS = ("hidden_bias", "lr", "seed", "step", "active_last", "ic_acc")
CHECKS = (250, 500, 1000, 2000, 4000)
"""Check steps (at lr 0.03; scaled by 0.03 / lr at other learning rates)."""

SPLIT = {0.03: 6, 0.01: 4}
"""Per learning rate: seeds below this fit the held-out rule's threshold, the rest test it."""


def auroc(scores_pos, scores_neg) -> float:
    """The probability that a positive scores above a negative, ties counting half (NaN when a
    side is empty)."""
    pos, neg = list(scores_pos), list(scores_neg)
    if not pos or not neg:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def best_threshold(values, dead) -> float:
    """The threshold ``t`` (warn when ``value < t``) that maximises Youden's J on ``values`` with
    labels ``dead``: candidates are midpoints between neighbouring distinct values (and one
    above the largest); the highest ``t`` wins a tie. NaN when a class is empty."""
    pairs = sorted(zip(values, dead))
    if not any(d for _, d in pairs) or all(d for _, d in pairs):
        return math.nan
    distinct = sorted({v for v, _ in pairs})
    cands = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] + 1e-9]
    n_dead = sum(1 for _, d in pairs if d)
    n_other = len(pairs) - n_dead
    best, best_j = math.nan, -math.inf
    for t in cands:
        tp = sum(1 for v, d in pairs if d and v < t)
        fp = sum(1 for v, d in pairs if not d and v < t)
        j = tp / n_dead - fp / n_other
        if j >= best_j:
            best, best_j = t, j
    return best


def check_steps(lr: float) -> list[int]:
    """The check steps at ``lr`` (:data:`CHECKS` scaled by ``0.03 / lr``)."""
    return [int(round(c * 0.03 / lr)) for c in CHECKS]


def _at(curves: pd.DataFrame, step: int) -> pd.DataFrame:
    """Each run's last evaluation at or before ``step``, for the runs that reached it."""
    out = [
        g[g["step"] <= step].sort_values("step").iloc[-1]
        for _, g in curves.groupby(["hidden_bias", "lr", "seed"])
        if g["step"].max() >= step
    ]
    return pd.DataFrame(out, columns=curves.columns)


def warning_scores(rows: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """One row per (lr, check step): the open runs, AUROC, the held-out rule's threshold, its
    hits, misses and false alarms on the held-out seeds, and the median lead time of its hits."""
    out = []
    if curves is None or not len(curves):
        return pd.DataFrame(out)
    fates = rows[rows["fate"].isin(["dead", "transitioned", "alive"])]
    for lr in sorted(set(pd.to_numeric(curves["lr"]))):
        split = SPLIT.get(lr, 6)
        for step in check_steps(lr):
            at = _at(curves[curves["lr"] == lr], step)
            m = at.merge(fates, on=["hidden_bias", "lr", "seed"])
            m = m[~(pd.to_numeric(m["fate_step"]) <= step)]  # fates still open at the check
            dead = m["fate"] == "dead"
            fit, test = m[m["seed"] < split], m[m["seed"] >= split]
            t = best_threshold(fit["active_last"].tolist(), (fit["fate"] == "dead").tolist())
            warned = test["active_last"] < t
            hit = test[warned & (test["fate"] == "dead")]
            lead = (pd.to_numeric(hit["fate_step"]) - step).median() if len(hit) else math.nan
            out.append(
                {
                    "lr": lr,
                    "check_step": step,
                    "dead": int(dead.sum()),
                    "other": int((~dead).sum()),
                    "auroc": auroc(-m.loc[dead, "active_last"], -m.loc[~dead, "active_last"]),
                    "threshold": t,
                    "test_dead": int((test["fate"] == "dead").sum()),
                    "test_other": int((test["fate"] != "dead").sum()),
                    "hits": len(hit),
                    "false_alarms": int((warned & (test["fate"] != "dead")).sum()),
                    "lead": lead,
                }
            )
    return pd.DataFrame(out)


def _f(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else spec.format(v)


def warning_lines(rows: pd.DataFrame, curves: pd.DataFrame) -> list[str]:
    """The page's early-warning section (markdown lines)."""
    s = warning_scores(rows, curves)
    lines = ["## Seeing it coming", ""]
    if not len(s):
        return lines + ["No run here has its curve recorded: nothing is scored.", ""]
    n_runs = curves.groupby(["hidden_bias", "lr", "seed"]).ngroups
    lines += [
        f"From the {n_runs} runs whose curves are recorded (`collapse-rate-curves.csv`; the longer "
        "curve of a run trained again, `collapse-rate-continued.csv`), the "
        "last hidden layer's share of firing units at a check step, scored against each run's "
        "fate (runs still open at the check). AUROC over all of them; the held-out rule's "
        "threshold is fitted on seeds "
        + ", ".join(f"below {v} at lr {k:g}" for k, v in SPLIT.items())
        + " and tested on the other seeds. Lead: steps from the check to the step the collapse "
        "rule judged the run dead (median over warned deaths).",
        "",
        "| lr | check step | open runs (dead / other) | AUROC | threshold (fitted) | held-out "
        "deaths warned | held-out false alarms | lead (steps) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for x in s[s["dead"] + s["other"] > 0].to_dict("records"):
        lines.append(
            f"| {x['lr']:g} | {x['check_step']} | {x['dead']} / {x['other']} | "
            f"{_f(x['auroc'], '{:.2f}')} | {_f(x['threshold'], '{:.3f}')} | "
            f"{x['hits']} of {x['test_dead']} | {x['false_alarms']} of {x['test_other']} | "
            f"{_f(x['lead'], '{:.0f}')} |"
        )
    lines += [
        "",
        "Check steps where no run was still open are left out. A cell with no dead run (or no "
        "other run) has no AUROC; a threshold needs both "
        "kinds among the fitting seeds.",
        "",
    ]
    shown = s[s["dead"] + s["other"] > 0]
    if not int(shown["test_dead"].sum()):
        dead = curves.merge(rows[rows["fate"] == "dead"][["hidden_bias", "lr", "seed"]])
        keys = dead[["hidden_bias", "lr", "seed"]].drop_duplicates()
        seeds = sorted(
            f"{f} seed {int(k)} at lr {lr:g}" for f, lr, k in keys.itertuples(index=False)
        )
        lines += [
            "**No held-out test.** No held-out seed died, so the warning has not been scored on "
            "a death it was not fitted on; its AUROC rests on the deaths with a recorded curve ("
            + (", ".join(seeds) or "none")
            + "), not on a held-out one.",
            "",
        ]
    return lines


def curve_rows(run_dir, last_column: str | None) -> pd.DataFrame:
    """A run's curve (:data:`CURVE_COLUMNS`) from its ``config.json`` and ``metrics.csv``."""
    import json
    from pathlib import Path

    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    m = pd.read_csv(run_dir / "metrics.csv")
    active = m[last_column] if last_column in m else math.nan
    return pd.DataFrame(
        {
            "hidden_bias": config["model"].get("hidden_bias", "per_unit"),
            "lr": float(config["train"]["lr"]),
            "seed": int(config["train"]["seed"]),
            "step": m["step"].astype(int),
            "active_last": active,
            "ic_acc": m["ic_acc"],
        }
    )[list(CURVE_COLUMNS)]
