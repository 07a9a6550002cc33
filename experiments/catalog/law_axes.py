"""The transition law's open axes, each forecast before its runs: batch size, width and p_C.

Three declared experiments on the law's network and task
(:data:`transition_law_base.BASE`: paper-fig3's task with per-unit hidden biases, plain SGD at
lr 0.1, the fast path), each a
:class:`~experiments.transition_grid.TransitionGrid` of configurations of the law's data times
values of an axis the law never varied, five seeds a point, each run trained until its transition
(with a margin) or its budget:

- ``batch-size``: batch 32, 128 and 512 (a factor of 16) at three configurations (the centre,
  N 4 and B 2). Aoyama et al. put the induction-head point at a number of tokens that grows as
  the square root of the batch, so the steps should fall as batch^-1/2.
- ``width``: the classifier's hidden units (``d_mlp``) 32, 64, 128 and 256 (a factor of 8) at
  two configurations (the centre and N 4). The attention layers' width is the task's
  (``D + P``, set by the one-hot positions): it is not varied.
- ``p-c-interior``: the share of bursty sequences p_C at 0.1, 0.2 and 0.35 (and the centre's 0.8)
  at the centre, inside
  the edge the law's data never reached (its points have p_C 0.5 to 0.95, and 0 where nothing
  transitions). The law's p_C coefficient is positive, so it forecasts earlier transitions as p_C
  falls towards the edge; the hypothesis registered beside it is exposure: the step grows as
  1 / p_C, the bursty sequences being those that teach the copy.

**Forecasts registered before the runs** (:data:`REGISTRY`, in this folder): for every point,
what the stored law says (at the law's own batch 128 and width 128 it forecasts; elsewhere the
axis is outside its data and the registry says it cannot say; p_C is one of the law's inputs, so
it forecasts every p_C point) and what a named hypothesis says (batch: the law's step at batch
128 times ``(batch / 128)^-1/2``; width: the law's step at width 128, whatever the width; p_C:
the law's step at p_C 0.8 times ``0.8 / p_C``). ``python experiments/register_forecasts.py``
adds the rows of points that have none and never changes a row; ``reproduce`` refuses to train a
point without its registered forecasts. The page scores each forecast after the runs (inside its 80%
interval or not; its error against the seeds' own scatter) and judges the directions declared
here with the grids.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.catalog.transition_law_base import BASE
from experiments.transition_grid import GridPoint, TransitionGrid
from interp.experiments import register_experiment
from interp.experiments.core import Column, Experiment, Tier
from interp.experiments.directions import Direction, directions_table

REGISTRY = Path(__file__).resolve().parent / "law_axes_forecasts.csv"
"""The registered forecasts: one row per (experiment, point, hypothesis), never rewritten."""
REGISTRY_COLUMNS = (
    "experiment",
    "point",
    "hypothesis",
    "step",
    "low",
    "high",
    "says",
    "law_configurations",
    "registered",
)
SEEDS = (0, 1, 2, 3, 4)
LAW_BATCH, LAW_WIDTH = 128, 128
"""The batch size and width of every run of the law's data."""
QUICK_BASE = {
    "optimizer": "sgd",
    "hidden_bias": "per_unit",
    "lr": 0.6,
    "eval_every": 25,
    "num_threads": 1,
    "live_forecast": False,
}


@dataclass(frozen=True)
class Axis:
    """An axis the law never varied: its experiment's name, the config field it sets, its
    values, the configurations it is moved at, the law's value of it, and the hypothesis
    registered beside the law's own forecast (``scale(value)``: the factor on the law's step)."""

    name: str
    field: str
    label: str
    values: tuple[float, ...]
    configs: dict
    hypothesis: str
    quick_values: tuple[float, ...]
    law_input: bool = False
    """Whether the law takes this field as an input (then it forecasts every point)."""
    budget: int = 16_000

    def point(self, config: str, value: float) -> str:
        return f"{config}-{self.field}{value:g}"

    def grid(self, tier: str) -> TransitionGrid:
        if tier == "quick":
            points = tuple(
                GridPoint(name=self.point("tiny", v), overrides={self.field: v})
                for v in self.quick_values
            )
            return TransitionGrid(
                preset="tiny", base=QUICK_BASE, points=points, seeds=(0, 1), budget=1500, chunk=500
            )
        points = tuple(
            GridPoint(name=self.point(c, v), overrides={**o, self.field: v})
            for c, o in self.configs.items()
            for v in self.values
        )
        return TransitionGrid(
            preset="paper-fig3", base=BASE, points=points, seeds=SEEDS, budget=self.budget
        )

    def scale(self, value: float) -> float:
        """The hypothesis's factor on the law's step at the law's value of the axis."""
        if self.name == "batch-size":
            return (value / LAW_BATCH) ** -0.5
        if self.name == "p-c-interior":
            return LAW_VALUE[self.field] / value
        return 1.0


AXES = {
    "batch-size": Axis(
        name="batch-size",
        field="batch_size",
        label="batch size",
        values=(32, 128, 512),
        configs={"centre": {}, "N4": {"N": 4}, "B2": {"B": 2}},
        hypothesis="aoyama: the law's step at batch 128 times (batch / 128)^-1/2",
        quick_values=(32, 128),
    ),
    "width": Axis(
        name="width",
        field="d_mlp",
        label="classifier width (d_mlp)",
        values=(32, 64, 128, 256),
        configs={"centre": {}, "N4": {"N": 4}},
        hypothesis="independent: the law's step at width 128, whatever the width",
        quick_values=(32, 128),
    ),
    "p-c-interior": Axis(
        name="p-c-interior",
        field="p_C",
        label="share of bursty sequences (p_C)",
        values=(0.1, 0.2, 0.35, 0.8),
        configs={"centre": {}},
        hypothesis="exposure: the law's step at p_C 0.8 times 0.8 / p_C",
        quick_values=(0.4, 0.8),
        law_input=True,
        budget=32_000,
    ),
}
LAW_VALUE = {"batch_size": LAW_BATCH, "d_mlp": LAW_WIDTH, "p_C": 0.8, "weight_decay": 1e-6}
"""The value of each axis at the law's centre (batch and width: at every run of its data)."""


# ---- the registry: forecasts written before the runs ----


def forecasts_for(axis: Axis) -> pd.DataFrame:
    """The forecasts of every full-tier point of ``axis`` by the stored law as it is now: the
    law's own (``law``) and the axis's hypothesis (its first word), steps with 80% intervals."""
    from phenomenology.transition_law import StoredLaw

    law = StoredLaw.load()
    runs = len(law.observed)
    grid, out = axis.grid("full"), []
    for p in grid.points:
        value = p.overrides[axis.field]
        pred, why = law_at(law, grid, p, {axis.field: str(LAW_VALUE[axis.field])})
        if why:
            out += [_row(axis, p, h, math.nan, math.nan, math.nan, why, runs) for h in ("law",)]
            continue
        hyp = axis.hypothesis.split(":")[0]
        own, outside = value == LAW_VALUE[axis.field], ""
        if axis.law_input and not own:
            at, why = law_at(law, grid, p, {})
            own, outside = not why, why
        else:
            at = pred
            outside = f"{axis.field}={value} is outside the law's data ({LAW_VALUE[axis.field]})"
        law_says = "the law's forecast" if own else f"cannot say: {outside}"
        step = (at.step, at.low, at.high) if own else (math.nan,) * 3
        out.append(_row(axis, p, "law", *step, law_says, runs))
        f = axis.scale(value)
        out.append(
            _row(axis, p, hyp, pred.step * f, pred.low * f, pred.high * f, axis.hypothesis, runs)
        )
    return pd.DataFrame(out, columns=list(REGISTRY_COLUMNS))


def law_at(law, grid: TransitionGrid, point: GridPoint, changes: dict):
    """The stored law's forecast at ``point`` with ``changes`` to its overrides, and why it cannot
    say ("" where it can)."""
    from interp.train.overrides import build_configs
    from phenomenology.transition_law import law_inputs

    task, model, train, _ = build_configs(grid.preset, {**grid.overrides(point), **changes}, 0)
    fields, settings = law_inputs(task, model, train)
    refusals, _ = law.problems(fields, settings)
    pred = law.forecast(fields)
    if refusals or not pred.transitions:
        return pred, "; ".join(refusals) or pred.reason or "no transition"
    return pred, ""


def _row(axis, p, hypothesis, step, low, high, says, runs) -> dict:
    return registry_row(axis.name, p, hypothesis, step, low, high, says, runs)


def registry_row(name, p, hypothesis, step, low, high, says, runs) -> dict:
    """One row of the registry: experiment ``name``'s point ``p`` as ``hypothesis`` forecasts it."""
    return {
        "experiment": name,
        "point": p.name,
        "hypothesis": hypothesis,
        "step": round(step, 1) if math.isfinite(step) else math.nan,
        "low": round(low, 1) if math.isfinite(low) else math.nan,
        "high": round(high, 1) if math.isfinite(high) else math.nan,
        "says": says,
        "law_configurations": runs,
        "registered": datetime.date.today().isoformat(),
    }


def read_registry(path: Path = REGISTRY) -> pd.DataFrame:
    from interp.io.inputs import read_csv

    if not path.exists():
        return pd.DataFrame(columns=list(REGISTRY_COLUMNS))
    return read_csv(path)


def register(path: Path = REGISTRY) -> int:
    """Add the forecasts of every declared point that has none; never change a row. Returns how
    many rows were added."""
    from interp.io.atomic import write_text_atomic

    have = read_registry(path)
    known = set(zip(have["experiment"].astype(str), have["point"].astype(str)))
    new = []
    for source in (*(lambda a=a: forecasts_for(a) for a in AXES.values()), *SOURCES.values()):
        rows = source()
        new.append(rows[[(e, p) not in known for e, p in zip(rows["experiment"], rows["point"])]])
    added = pd.concat(new, ignore_index=True)
    if len(added):
        both = pd.concat([have, added], ignore_index=True) if len(have) else added
        write_text_atomic(path, both.to_csv(index=False))
    return len(added)


SOURCES: dict = {}
"""Other experiments' forecasts, by experiment name: a callable returning registry rows of every
full-tier point (:mod:`experiments.catalog.transience` adds its own)."""


def missing_forecasts(name: str, grid: TransitionGrid, registry: pd.DataFrame) -> list[str]:
    """The points of experiment ``name``'s (full-tier) ``grid`` without a registered forecast."""
    have = set(registry.loc[registry["experiment"] == name, "point"].astype(str))
    return [p.name for p in grid.points if p.name not in have]


def refuse_unregistered(name: str, grid: TransitionGrid) -> None:
    """Raise before any run trains where a point of ``grid`` has no registered forecast."""
    missing = missing_forecasts(name, grid, read_registry())
    if missing:
        raise ValueError(
            f"{REGISTRY.name}: no registered forecast for {', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''}: run `python experiments/"
            "register_forecasts.py` and commit it before these points train"
        )


# ---- training and the rows ----


def _produce(experiment, tier: str, runs: Path, workers, log, out: Path | None = None):
    from experiments.transition_grid import collect, run_grid

    axis = AXES[experiment.name]
    grid = axis.grid(tier)
    if tier == "full":
        refuse_unregistered(axis.name, grid)
    run_grid(grid, runs, workers=workers or 2, log=log)
    rows, curves = collect(grid, runs)
    return with_axis(rows, axis, grid, runs), {f"{axis.name}-curves.csv": curves}


def with_axis(rows: pd.DataFrame, axis: Axis, grid: TransitionGrid, runs: Path) -> pd.DataFrame:
    """The grid's rows with the configuration's name, the classifier's width (from each run's
    ``config.json``) and ``step_or_never`` (the transition step, ``inf`` for a run that did not
    transition within its budget: later than any that did)."""
    from experiments.transition_grid import run_name

    if not len(rows):
        return rows
    by_name = {p.name: p for p in grid.points}
    width = []
    for p, s in zip(rows["point"], rows["seed"], strict=True):
        config = json.loads((Path(runs) / run_name(by_name[p], int(s)) / "config.json").read_text())
        width.append(int(config["model"]["d_mlp"]))
    step = pd.to_numeric(rows["transition_step"], errors="coerce")
    jumped = rows["transitioned"].astype(str) == "True"
    return rows.assign(
        config=[str(p).rsplit(f"-{axis.field}", 1)[0] for p in rows["point"]],
        d_mlp=width,
        step_or_never=step.where(jumped, math.inf),
    )


# ---- the page ----


def exponent(rows: pd.DataFrame, field: str) -> dict | None:
    """The exponent of the transition step in ``field`` (least squares of ``log step`` on each
    configuration's own intercept and a common slope in ``log field``, over transitioned runs),
    with its 95% interval (t distribution); None with fewer than two values of the field."""
    from scipy.stats import t as student

    ok = rows[rows["transitioned"].astype(str) == "True"]
    if ok[field].nunique() < 2 or len(ok) < ok["config"].nunique() + 2:
        return None
    configs = sorted(ok["config"].unique())
    X = np.column_stack(
        [*(np.asarray(ok["config"] == c, float) for c in configs), np.log(ok[field].astype(float))]
    )
    y = np.log(ok["transition_step"].astype(float).to_numpy())
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    resid = y - X @ beta
    cov = (resid @ resid / dof) * np.linalg.inv(X.T @ X)
    se = math.sqrt(cov[-1, -1])
    q = float(student.ppf(0.975, dof))
    return {"slope": beta[-1], "low": beta[-1] - q * se, "high": beta[-1] + q * se, "dof": dof}


def curvature(rows: pd.DataFrame, field: str) -> dict | None:
    """The quadratic term of ``log step`` in ``log field`` (each configuration its own intercept,
    a common slope and curvature), with 95% intervals: a U has a curvature above zero and its
    lowest point inside the values trained."""
    from scipy.stats import t as student

    ok = rows[rows["transitioned"].astype(str) == "True"]
    if ok[field].nunique() < 3:
        return None
    configs = sorted(ok["config"].unique())
    x = np.log(ok[field].astype(float).to_numpy())
    x0 = x.mean()
    X = np.column_stack(
        [*(np.asarray(ok["config"] == c, float) for c in configs), x - x0, (x - x0) ** 2]
    )
    y = np.log(ok["transition_step"].astype(float).to_numpy())
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    if dof < 1:
        return None
    resid = y - X @ beta
    cov = (resid @ resid / dof) * np.linalg.inv(X.T @ X)
    q = float(student.ppf(0.975, dof))
    se = np.sqrt(np.diag(cov))
    b1, b2 = beta[-2], beta[-1]
    return {
        "slope": b1,
        "slope_low": b1 - q * se[-2],
        "slope_high": b1 + q * se[-2],
        "curve": b2,
        "curve_low": b2 - q * se[-1],
        "curve_high": b2 + q * se[-1],
        "lowest": math.exp(x0 - b1 / (2 * b2)) if b2 > 0 else math.nan,
    }


def shape(c: dict | None, values) -> str:
    """Flat, monotone or U-shaped, as the intervals of :func:`curvature` tell."""
    if c is None:
        return "too few widths with transitions to tell"
    if c["curve_low"] > 0 and min(values) < c["lowest"] < max(values):
        return f"U-shaped (fastest near {c['lowest']:.0f})"
    if c["slope_low"] > 0:
        return "monotone: wider is slower"
    if c["slope_high"] < 0:
        return "monotone: wider is faster"
    return "flat within the intervals"


def scores(rows: pd.DataFrame, registry: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """Each registered forecast against the point's runs: the median step of its transitioned
    seeds, inside the forecast's 80% interval or not, the absolute log error, and the point's
    seed floor (``0.6745 x sd(log step)``: the median error of a forecast exact in the mean)."""
    reg = registry[registry["experiment"] == experiment]
    out = []
    for _, f in reg.iterrows():
        runs = rows[rows["point"].astype(str) == str(f["point"])]
        ok = runs[runs["transitioned"].astype(str) == "True"]
        steps = ok["transition_step"].astype(float)
        med = float(steps.median()) if len(ok) else math.nan
        step = float(f["step"])
        err = abs(math.log(med / step)) if len(ok) and math.isfinite(step) else math.nan
        floor = 0.6745 * float(np.log(steps).std(ddof=1)) if len(ok) >= 2 else math.nan
        out.append(
            {
                "point": f["point"],
                "hypothesis": f["hypothesis"],
                "forecast": step,
                "low": float(f["low"]),
                "high": float(f["high"]),
                "says": f["says"],
                "runs": len(runs),
                "transitioned": len(ok),
                "median": med,
                "inside": (float(f["low"]) <= med <= float(f["high"]))
                if math.isfinite(step) and len(ok)
                else None,
                "abs_log_error": err,
                "floor": floor,
            }
        )
    return pd.DataFrame(out)


def _num(v, spec="{:.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else spec.format(v)


# ---- the law refitted with the axes (phenomenology/law_axes.py) ----

REFITTED = ("batch-size", "width")
"""The axes :mod:`phenomenology.law_axes` carries the law along (p_C is one of its own inputs)."""


def _transitioned(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["transitioned"].astype(str) == "True"]


def fitted_terms(results: Path | None = None):
    """The axis terms fitted on the committed rows of :data:`REFITTED`, and the weight decay's
    levels on those of ``transience`` once committed (what ``phenomenology/law_axes.json``
    holds: ``python experiments/fit_law_axes.py`` writes it)."""
    from interp.experiments.core import RESULTS_DIR, read_table
    from phenomenology.law_axes import AxisTerms, fit_levels, fit_term

    terms, levels = {}, {}
    for name in REFITTED:
        axis = AXES[name]
        ok = _transitioned(read_table(Path(results or RESULTS_DIR) / f"{name}.csv"))
        terms[axis.field] = fit_term(
            axis.field, ok["config"], ok[axis.field], ok["transition_step"]
        )
    long_runs = Path(results or RESULTS_DIR) / "transience.csv"
    if long_runs.exists():
        rows = read_table(long_runs)
        jumped = rows["transitioned"].astype(str) == "True"
        steps = pd.to_numeric(rows["transition_step"]).where(jumped)
        levels["weight_decay"] = fit_levels(
            "weight_decay",
            LAW_VALUE["weight_decay"],
            rows["K"],
            rows["weight_decay"],
            steps,
            rows["faded"].astype(str) == "True",
            int(rows["budget"].max()),
        )
    return AxisTerms(terms, levels)


def held_out(axis: Axis, rows: pd.DataFrame, registry: pd.DataFrame) -> pd.DataFrame:
    """The refitted law on each configuration it was not fitted on: for every configuration,
    the axis's exponent fitted on the other configurations' runs carries the law's registered
    forecast at the law's value of the axis to the configuration's other values; each point's
    absolute log error against its transitioned runs' median, beside the registered hypothesis's
    and the point's seed floor."""
    from phenomenology.law_axes import fit_term

    ok = _transitioned(rows)
    reg = registry[registry["experiment"] == axis.name].set_index(["point", "hypothesis"])
    hyp = axis.hypothesis.split(":")[0]
    out = []
    for config in axis.configs:
        rest = ok[ok["config"] != config]
        try:
            term = fit_term(axis.field, rest["config"], rest[axis.field], rest["transition_step"])
        except ValueError:
            continue
        at_law = reg.loc[(axis.point(config, LAW_VALUE[axis.field]), "law"), "step"]
        for value in axis.values:
            if value == LAW_VALUE[axis.field]:
                continue
            steps = ok[ok["point"] == axis.point(config, value)]["transition_step"].astype(float)
            if len(steps) < 2:
                continue
            med = float(steps.median())
            forecast = at_law * (value / LAW_VALUE[axis.field]) ** term.slope
            out.append(
                {
                    "point": axis.point(config, value),
                    "refitted": forecast,
                    "refitted_error": abs(math.log(med / forecast)),
                    "registered": float(reg.loc[(axis.point(config, value), hyp), "step"]),
                    "registered_error": abs(
                        math.log(med / float(reg.loc[(axis.point(config, value), hyp), "step"]))
                    ),
                    "median": med,
                    "floor": 0.6745 * float(np.log(steps).std(ddof=1)),
                }
            )
    return pd.DataFrame(out)


def _refit_lines(axis: Axis, rows: pd.DataFrame) -> list[str]:
    if axis.name not in REFITTED:
        return []
    h = held_out(axis, rows, read_registry())
    lines = ["## The law refitted with this axis, on configurations it was not fitted on", ""]
    if not len(h):
        return lines + ["Too few configurations with transitioned runs to hold one out.", ""]
    lines += [
        "`forecast` carries the stored law from its "
        f"{axis.label} {LAW_VALUE[axis.field]} along this axis by the exponent fitted on these "
        "rows (`phenomenology/law_axes.json`). Here each configuration in turn is held out: the "
        "exponent is fitted on the others' runs, and carries the law's forecast registered at "
        f"{axis.label} {LAW_VALUE[axis.field]} to the held-out configuration's other values.",
        "",
        "| point | median step | refitted law (held out) | abs log error | registered "
        f"({axis.hypothesis.split(':')[0]}) | abs log error | seeds' floor |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, x in h.iterrows():
        lines.append(
            f"| {x['point']} | {x['median']:.0f} | {x['refitted']:.0f} | "
            f"{x['refitted_error']:.3f} | {x['registered']:.0f} | {x['registered_error']:.3f} | "
            f"{x['floor']:.3f} |"
        )
    floor = h["floor"].median()
    lines += [
        "",
        f"Median abs log error on held-out configurations: the refitted law "
        f"{h['refitted_error'].median():.3f} ({h['refitted_error'].median() / floor:.2f} x the "
        f"seeds' floor, {floor:.3f}); the registered hypothesis "
        f"{h['registered_error'].median():.3f} ({h['registered_error'].median() / floor:.2f} x). "
        "Both start from the law's own forecast at the configuration, so its error at the law's "
        "value is in both.",
        "",
    ]
    return lines


def new_axes_lines(law_ratio: float, results: Path | None = None) -> list[str]:
    """The transition law's page's section on the axes it never varied: for each axis whose
    rows are committed, the median abs log error (x its points' seed floor) of the forecasts
    registered before the runs and, for batch size and width, of the law refitted with the axis
    on configurations it was not fitted on; beside the law's own held-out ``law_ratio``."""
    from interp.experiments.core import RESULTS_DIR, read_table

    reg = read_registry()
    lines = [
        f"Beside the law's held-out error above ({law_ratio:.2f} x the floor), the axes it never "
        "varied, each forecast before its runs (`experiments/catalog/law_axes_forecasts.csv`); "
        "errors are medians over each axis's points, x the median of their seed floors.",
        "",
        "| axis | points | forecast | median abs log error | x floor |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in (*AXES, "transience"):
        axis = AXES.get(name)
        path = Path(results or RESULTS_DIR) / f"{name}.csv"
        if not path.exists():
            continue
        rows = read_table(path)
        s = scores(rows, reg, name)
        s = s[s["abs_log_error"].notna()]
        for hyp, g in s.groupby("hypothesis", sort=False):
            said = f"{hyp} (registered)"
            if hyp == "law":
                said = (
                    "the stored law"
                    if name == "p-c-interior"
                    else ("the stored law, at its own value")
                )
            floor = g["floor"].median()
            lines.append(
                f"| [{name}]({name}.md) | {len(g)} | {said} | {g['abs_log_error'].median():.3f} "
                f"| {g['abs_log_error'].median() / floor:.2f} |"
            )
        if name in REFITTED:
            h = held_out(axis, rows, reg)
            if len(h):
                floor = h["floor"].median()
                lines.append(
                    f"| [{name}]({name}.md) | {len(h)} | the law refitted with the axis, held out "
                    f"| {h['refitted_error'].median():.3f} | "
                    f"{h['refitted_error'].median() / floor:.2f} |"
                )
    lines += [
        "",
        "The goal for the refitted law is at most 1.2 x the floor on configurations it was not "
        "fitted on. `forecast` uses the refitted batch-size and width terms and the weight "
        "decay's measured factors (`phenomenology/law_axes.json`); p_C is one of the law's own "
        "inputs, and its interior points are not yet in the law's data.",
    ]
    return lines


def notes(axis: Axis, rows: pd.DataFrame) -> str:
    lines = _axis_lines(axis, rows)
    lines += score_lines(axis.name, rows)
    lines += _refit_lines(axis, rows)
    lines.append(directions_table(DIRECTIONS[axis.name], rows))
    return "\n".join(lines)


def _axis_lines(axis: Axis, rows: pd.DataFrame) -> list[str]:
    lines = [f"## The transition step against {axis.label}", ""]
    lines += [
        f"| configuration | {axis.label} | runs | transitioned | median step | range |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (config, value), g in rows.groupby(["config", axis.field], sort=False):
        ok = g[g["transitioned"].astype(str) == "True"]["transition_step"].astype(float)
        rng = f"{ok.min():.0f}-{ok.max():.0f}" if len(ok) else "-"
        lines.append(
            f"| {config} | {value:g} | {len(g)} | {len(ok)} | {_num(ok.median())} | {rng} |"
        )
    lines.append("")
    if axis.name in EXPONENT_SAYS:
        e = exponent(rows, axis.field)
        if e is None:
            lines.append("Too few transitioned runs to fit the exponent.")
        else:
            said = "; ".join(
                f"{who}'s {v:+.3g} is {'inside' if e['low'] <= v <= e['high'] else 'outside'} it"
                for who, v in EXPONENT_SAYS[axis.name]
            )
            lines.append(
                f"**Exponent** of the transition step in the {axis.label} (each configuration "
                f"its own intercept, transitioned runs only): {e['slope']:.3f} (95% interval "
                f"{e['low']:.3f} to {e['high']:.3f}, {e['dof']} degrees of freedom); {said}."
            )
    else:
        c = curvature(rows, axis.field)
        lines.append(f"**Shape** in log width: {shape(c, axis.values)}.")
        if c is not None:
            lines.append(
                f"Slope {c['slope']:.3f} ({c['slope_low']:.3f} to {c['slope_high']:.3f}), "
                f"curvature {c['curve']:.3f} ({c['curve_low']:.3f} to {c['curve_high']:.3f}), "
                "95% intervals, log step on log width centred, each configuration its own "
                "intercept; transitioned runs only (a width whose runs never transition is "
                "counted in the table above, not here)."
            )
    return lines + [""]


def score_lines(name: str, rows: pd.DataFrame) -> list[str]:
    """The page's section scoring experiment ``name``'s registered forecasts on its rows."""
    reg = read_registry()
    s = scores(rows, reg, name)
    lines = ["## Forecasts registered before the runs", ""]
    if not len(s):
        return lines + ["No forecast is registered for this experiment.", ""]
    waiting = s[s["runs"] == 0]
    s = s[s["runs"] > 0]
    if waiting["point"].nunique():
        lines += [
            f"{len(waiting)} forecasts registered for {waiting['point'].nunique()} points "
            "(`experiments/catalog/law_axes_forecasts.csv`) wait for their runs (the full tier).",
            "",
        ]
    if not len(s):
        return lines
    dates = sorted(set(reg.loc[reg["experiment"] == name, "registered"].astype(str)))
    lines += [
        f"Registered in `experiments/catalog/{REGISTRY.name}` on {', '.join(dates)}, before the "
        "runs, from the stored law then (its data: "
        f"{int(reg['law_configurations'].iloc[0])} configurations). 80% intervals. The law's own "
        "forecast exists only where the axis is at the law's value; the hypothesis forecasts "
        "everywhere.",
        "",
        "| point | forecast by | step (80% interval) | runs: transitioned / all | median step "
        "| inside | abs log error | seeds' floor |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for _, x in s.iterrows():
        said = (
            f"{x['forecast']:.0f} ({x['low']:.0f}-{x['high']:.0f})"
            if math.isfinite(x["forecast"])
            else str(x["says"])
        )
        inside = "-" if x["inside"] is None else ("yes" if x["inside"] else "no")
        lines.append(
            f"| {x['point']} | {x['hypothesis']} | {said} | {x['transitioned']} / {x['runs']} | "
            f"{_num(x['median'])} | {inside} | {_num(x['abs_log_error'], '{:.3f}')} | "
            f"{_num(x['floor'], '{:.3f}')} |"
        )
    lines.append("")
    for hyp, g in s.groupby("hypothesis", sort=False):
        g = g[g["abs_log_error"].notna()]
        if not len(g):
            continue
        floor = g["floor"].median()
        lines.append(
            f"- **{hyp}**: {int(g['inside'].astype(bool).sum())} of {len(g)} points inside their "
            f"interval; median abs log error {g['abs_log_error'].median():.3f}, "
            f"{g['abs_log_error'].median() / floor:.2f} x the seeds' floor ({floor:.3f})."
        )
    return lines + [""]


EXPONENT_SAYS = {
    "batch-size": (("Aoyama", -0.5),),
    "p-c-interior": (("the stored law", 0.158), ("exposure", -1.0)),
}
"""The exponents a hypothesis gives each axis fitted by :func:`exponent`: Aoyama's batch^-1/2;
the stored law's p_C coefficient (``docs/results/transition-law.md``) and exposure's 1 / p_C."""


def _directions(axis: Axis) -> tuple[Direction, ...]:
    lo, hi = axis.values[0], axis.values[-1]
    if axis.name == "p-c-interior":
        return (
            Direction(
                claim=f"centre: p_C {lo:g} transitions later than p_C {hi:g} (or never) on at "
                "least 4 of 5 seeds",
                column="step_or_never",
                where={"point": axis.point("centre", lo)},
                than={"point": axis.point("centre", hi)},
                op=">",
                at_least=4,
            ),
        )
    batch = axis.name == "batch-size"
    said = (
        f"batch {hi} transitions in fewer steps than batch {lo} on at least 4 of 5 seeds"
        if batch
        else f"width {hi} transitions no later than width {lo} on at least 3 of 5 seeds"
    )
    return tuple(
        Direction(
            claim=f"{c}: {said}",
            column="step_or_never",
            where={"point": axis.point(c, hi)},
            than={"point": axis.point(c, lo)},
            op="<" if batch else "<=",
            at_least=4 if batch else 3,
        )
        for c in axis.configs
    )


DIRECTIONS = {name: _directions(axis) for name, axis in AXES.items()}
"""Stated with the grids, before their runs."""


def _headline(axis: Axis):
    def headline(rows: pd.DataFrame) -> str:
        jumped = int((rows["transitioned"].astype(str) == "True").sum())
        text = f"{jumped} of {len(rows)} runs transitioned"
        if axis.name in EXPONENT_SAYS:
            e = exponent(rows, axis.field)
            if e is not None:
                text += f"; exponent {e['slope']:.2f} ({e['low']:.2f} to {e['high']:.2f})"
        else:
            text += f"; {shape(curvature(rows, axis.field), axis.values)}"
        return text

    return headline


def _experiment(axis: Axis) -> Experiment:
    configs = ", ".join(f"`{c}`" for c in axis.configs)
    values = ", ".join(f"{v:g}" for v in axis.values)
    return Experiment(
        name=axis.name,
        title=f"The transition step against {axis.label}, forecast before the runs",
        question=(
            f"How does the step of the in-context transition move with the {axis.label}, an "
            "axis the transition law never varied, and does a forecast registered before the "
            "runs get it right?"
        ),
        tiers={
            "quick": Tier(
                cost="about 1 min on 2 cores",
                cost_s=60,
                hidden_bias="per_unit",
                note=f"the `tiny` task at SGD lr 0.6, {axis.label} "
                f"{', '.join(f'{v:g}' for v in axis.quick_values)}, two seeds: the machinery only.",
            ),
            "full": Tier(
                cost="about 30 min on 2 cores",
                cost_s=1800,
                hidden_bias=BASE["hidden_bias"],
                note=f"{axis.label} {values} at the transition law's configurations {configs} "
                f"(paper-fig3, SGD lr 0.1), seeds {SEEDS[0]}-{SEEDS[-1]}, each run until its "
                f"transition with a margin or {axis.budget // 1000}k steps.",
            ),
        },
        produce=_produce,
        companions=(f"{axis.name}-curves.csv",),
        columns=(
            Column(key="point", header="point"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key=axis.field, header=axis.label, fmt="{:g}"),
            Column(key="transitioned", header="transitioned"),
            Column(key="transition_step", header="transition step", fmt="{:.0f}"),
            Column(key="steps", header="steps trained", fmt="{:.0f}"),
            Column(key="final_ic_acc", header="final IC acc", fmt="{:.3f}"),
        ),
        notes=lambda rows: notes(axis, rows),
        deviations=(
            "Per-unit hidden biases, SGD lr 0.1, runs stopped after their transition: the "
            "transition law's settings (docs/results/transition-law.md).",
            f"The {axis.label} is moved from the "
            f"{'centre' if axis.law_input else 'author'}'s {LAW_VALUE[axis.field]:g}; nothing "
            "else is.",
        ),
        headline=_headline(axis),
        sort=("point", "seed"),
    )


EXPERIMENTS = {name: register_experiment(_experiment(axis)) for name, axis in AXES.items()}
