"""``induction-cliff forecast``: a configuration's transition step, before training."""

from __future__ import annotations

import math
import sys

NAME = "forecast"
HELP = (
    "forecast a configuration's transition step (given a transition) and whether it transitions "
    "within its budget, its measured collapse risk included, before training, from the "
    "transition law (docs/results/transition-law.md) and the collapse rates "
    "(docs/results/collapse-rate.md)"
)
EPILOG = """\
examples:
  induction-cliff forecast --preset paper-fig3 --set hidden_bias=per_unit
  induction-cliff forecast --preset paper-fig3 --set lr=0.03 --set steps=20000
  induction-cliff forecast --preset paper-fig3 --set hidden_bias=per_unit --set batch_size=512

A batch size or classifier width (d_mlp) other than the law's 128, or a weight decay other than
its 1e-6, is forecast by the law carried along that axis by what docs/results/batch-size.md,
width.md and transience.md measured, within the values they trained.
"""


def add_arguments(p) -> None:
    p.add_argument("--preset", default="paper-fig3", help="the preset (default paper-fig3)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field, as for train (repeatable); steps is the budget",
    )
    p.add_argument(
        "--rates",
        default=None,
        metavar="PATH",
        help="measured collapse rates (default: the toolkit's, phenomenology/collapse_rate.csv, "
        "a copy of the collapse-rate experiment's rows)",
    )
    p.add_argument(
        "--law",
        default=None,
        metavar="PATH",
        help="a stored law (default: the toolkit's, phenomenology/transition_law.json)",
    )
    p.add_argument(
        "--axes",
        default=None,
        metavar="PATH",
        help="the law's batch-size and width exponents and weight-decay factors (default: the "
        "toolkit's, phenomenology/law_axes.json)",
    )


def _k(x: float) -> str:
    return f"{x:,.0f}"


def run(args) -> int:
    from interp.train.overrides import build_configs, parse_overrides
    from phenomenology.law_axes import AxisTerms
    from phenomenology.transition_law import StoredLaw, law_inputs, term_fields

    task, model, train, _ = build_configs(args.preset, parse_overrides(args.set), None)
    law = StoredLaw.load(args.law)
    terms = AxisTerms.load(args.axes)
    fields, settings = law_inputs(task, model, train)
    at_law = terms.at_law(fields, settings)
    refusals, notes = law.problems(*at_law)
    refusals += terms.problems(settings)
    if refusals:
        raise ValueError(
            f"{refusals[0]}: no forecast outside the data"
            + (f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else "")
        )
    p = terms.apply(law.forecast(at_law[0]), settings)
    if p.step == 0.0:  # a term at its limit sends the step to 0: name the fields it reads
        names = term_fields(p.reason.split(" is at")[0])
        raise ValueError(", ".join(f"{f}={fields[f]:g}" for f in names) + f": {p.reason}")
    budget = int(train.steps)
    where = ", ".join(f"{k}={fields[k]:g}" for k in ("K", "L", "N", "B", "eps", "p_C", "lr"))
    print(f"configuration: {args.preset} ({where}; budget steps={budget})")
    if not p.transitions:
        print(f"transition: none expected ({p.reason})")
        print("within the budget: no (P = 0)")
        _say_observed(law.observed_at(fields))
        return 0
    chance = p.p_within(budget)
    print(
        f"transition step given a transition: {_k(p.step)}  (80% interval {_k(p.low)} to "
        f"{_k(p.high)})"
    )
    _say_within(budget, chance, *_collapse_risk(args.rates, task, model, train))
    moved = terms.moved(settings)
    carried = "".join(_carried(terms, f, v) for f, v in moved.items())
    print(f"law: {law.source or 'the stored law'}{carried}; nothing was trained")
    _say_observed(None if moved else law.observed_at(fields))
    _say_fading(terms, settings, budget)
    for line in notes:
        print(
            f"note: {line}; the law's data are per-unit runs, and with scalar hidden biases "
            "plain SGD collapsed on some seeds (docs/results/collapse-rate.md)",
            file=sys.stderr,
        )
    return 0


PAGES = {"batch_size": "batch-size.md", "d_mlp": "width.md", "weight_decay": "transience.md"}
"""The page that measured each axis the law is carried along."""


def _carried(terms, f: str, v: float) -> str:
    if f in terms.levels:
        lv = terms.levels[f].at(v)
        return (
            f"; carried to {f}={v:g} by its measured factor {math.exp(lv.shift):.2f} "
            f"(se of log {lv.se:.3f}, {PAGES[f]})"
        )
    t = terms.terms[f]
    return f"; carried to {f}={v:g} by its exponent {t.slope:+.3f} (se {t.se:.3f}, {PAGES[f]})"


def _say_fading(terms, settings, budget: int) -> None:
    """Whether in-context accuracy faded in the long runs at this weight decay."""
    term = terms.levels.get("weight_decay")
    value = terms.values_of(settings).get("weight_decay")
    lv = term.at(value) if term is not None and value is not None else None
    if lv is None:
        return
    beyond = f"; beyond {_k(lv.steps)} steps it was not measured" if budget > lv.steps else ""
    print(
        f"long runs: at weight_decay={value:g} in-context accuracy faded in {lv.faded} of "
        f"{lv.runs} runs of {_k(lv.steps)} steps ({PAGES['weight_decay']}){beyond}"
    )


def _collapse_risk(path, task, model, train):
    """The measured death rate of the configuration's form at its lr, and the table read: the
    one named, else the toolkit's own (package data, the same in a checkout and an installed
    package), named by its place in the package."""
    from pathlib import Path

    from interp.analysis.collapse import measured_risk, measured_within
    from interp.io.inputs import read_csv
    from phenomenology.transition_law import RATES_FILE

    if path is not None and not Path(path).is_file():
        raise ValueError(f"--rates {path}: no such file")
    if path is None:
        path, shown = RATES_FILE, Path(RATES_FILE.parent.name, RATES_FILE.name)
    else:
        path = shown = Path(path)
    rows = read_csv(path)  # limits checked before parsing
    risk, where = measured_risk(rows, task, model, train)
    within = measured_within(rows, task, model, train, int(train.steps))
    return risk, where, shown, within


def _verdict(low: float, high: float) -> str:
    """yes or no only where the interval of P lies on one side of an even chance."""
    return "yes" if low >= 0.5 else "no" if high < 0.5 else "uncertain"


def _say_within(budget: int, chance: float, risk, where: str, path, within) -> None:
    """The collapse risk, then the probability of a transition within the budget: the share of
    the configuration's measured runs that did, where runs were followed that far; else the law's
    probability times the measured survival, said as such."""
    if risk is None:
        print(f"collapse risk ({where}): unmeasured (no run of it in {path})")
        print(
            f"within the budget of {_k(budget)} steps: unknown, the collapse risk being "
            f"unmeasured (the law alone, assuming no collapse: {chance:.2f})"
        )
        return
    n, dead, low, high = int(risk["n"]), int(risk["dead"]), risk["low"], risk["high"]
    print(
        f"collapse risk ({where}): {dead} of {n} runs died ({dead / n:.2f}, 95% interval "
        f"{low:.2f} to {high:.2f}; {path})"
    )
    p, p_low, p_high = (1 - dead / n) * chance, (1 - high) * chance, (1 - low) * chance
    if within is not None and within["complete"]:
        k, m = within["transitioned"], within["n"]
        print(
            f"within the budget of {_k(budget)} steps: {_verdict(within['low'], within['high'])} "
            f"(P = {within['share']:.2f}, 95% interval {within['low']:.2f} to "
            f"{within['high']:.2f}: measured, {k} of {m} runs of this configuration transitioned "
            f"within it; the law times the measured survival would say {p:.2f})"
        )
        return
    print(
        f"within the budget of {_k(budget)} steps: {_verdict(p_low, p_high)} (P = {p:.2f}, 95% "
        f"interval {p_low:.2f} to {p_high:.2f}: the law's P times the measured survival; what "
        "the runs did within this budget is not measured)"
    )
    if within is not None:
        print(
            f"measured: {within['transitioned']} of {within['n']} runs of this configuration "
            f"transitioned within {_k(within['followed'])} steps, as far as every run was followed"
        )


def _say_observed(rec) -> None:
    """What the law's own runs of this configuration did, when it was trained."""
    if rec is None:
        return
    runs, done = rec["runs"], rec["transitioned"]
    what = f"{done} of {runs} runs" if done else f"none of its {runs} runs"
    median = f" (median step {_k(rec['median_step'])})" if done else ""
    print(
        f"observed: the law's data trained this configuration: {what} transitioned within "
        f"{_k(rec['budget'])} steps{median}"
    )
