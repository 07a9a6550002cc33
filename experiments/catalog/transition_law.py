"""The transition step across configurations: a declared grid, a law fitted to it, held-out scores.

The grid (:data:`GRID`) is trained by :mod:`experiments.transition_grid` (each run until
its IC-loss cliff, with a margin, or its budget); the law and its baselines are
:mod:`phenomenology.transition_law`, the combination with the partial-curve forecasters
:mod:`phenomenology.prior`, the scores :mod:`experiments.transition_scores`.

``induction-cliff reproduce transition-law --tier full`` trains what is missing (interrupted runs
resume), writes ``transition-law.csv`` (one row per run), its companions (the curves and the
score tables) and the fitted law (``transition-law-law.json``; ``induction-cliff forecast`` reads
the copy packaged as ``phenomenology/transition_law.json``, which a test keeps equal to the one in
docs/results), and renders the page. ``--render-only`` rebuilds the page
from the CSVs alone. More points are added by declaring them in :data:`GRID` and reproducing
again (on a GPU: ``BASE`` plus ``--set device=cuda`` in a grid of its own).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments.catalog.transition_law_base import BASE
from experiments.catalog.transition_law_page import DECLARED_AFTER
from experiments.transition_grid import GridPoint, TransitionGrid
from interp.experiments import register_experiment
from interp.experiments.core import Experiment, Tier

NAME = "transition-law"
CURVES = f"{NAME}-curves.csv"
LOO = f"{NAME}-loo.csv"
COMBINED = f"{NAME}-combined.csv"
WARNING = f"{NAME}-warning.csv"
COMPANIONS = (CURVES, LOO, COMBINED, WARNING)
LAW_JSON = f"{NAME}-law.json"

_P = GridPoint
GRID = TransitionGrid(
    preset="paper-fig3",
    base=BASE,
    points=(
        _P(name="centre"),
        _P(name="lr0.2", overrides={"lr": 0.2}),
        _P(name="lr0.01", overrides={"lr": 0.01}, budget=60_000),
        _P(name="lr0.05", overrides={"lr": 0.05}),
        _P(name="N4", overrides={"N": 4}),
        _P(name="N16", overrides={"N": 16}),
        _P(name="B2", overrides={"B": 2}),
        _P(name="K1024", overrides={"K": 1024}),
        _P(name="eps0.2", overrides={"eps": 0.2}, role="sub"),
        _P(name="pC0.5", overrides={"p_C": 0.5}, role="sub"),
        _P(name="L16", overrides={"L": 16}),
        _P(name="L8", overrides={"L": 8}, role="negative", budget=8000),
        _P(
            name="pC0-K512-B2",
            overrides={"p_C": 0.0, "K": 512, "B": 2},
            role="negative",
            budget=8000,
        ),
        _P(name="lr0.003", overrides={"lr": 0.003}, role="negative", budget=8000),
        _P(name="lr0.03", overrides={"lr": 0.03}),
        _P(name="N6", overrides={"N": 6}),
        _P(name="N12", overrides={"N": 12}),
        _P(name="B4", overrides={"B": 4}),
        _P(name="K128", overrides={"K": 128}),
        _P(name="eps0.05", overrides={"eps": 0.05}, role="sub"),
        _P(name="pC0.95", overrides={"p_C": 0.95}, role="sub"),
        _P(name="L64", overrides={"L": 64}),
        _P(name="lr0.05-N4", overrides={"lr": 0.05, "N": 4}, role="cross"),
        _P(name="lr0.05-B2", overrides={"lr": 0.05, "B": 2}, role="cross"),
        _P(name="N24", overrides={"N": 24}, budget=60_000, seeds=(0, 1, 2)),
        _P(name="lr0.2-N16", overrides={"lr": 0.2, "N": 16}, role="cross"),
        _P(name="lr0.05-K1024", overrides={"lr": 0.05, "K": 1024}, role="cross"),
        _P(name="B2-N16", overrides={"B": 2, "N": 16}, role="cross"),
        _P(name="B2-N4", overrides={"B": 2, "N": 4}, role="cross"),
        _P(name="B4-N16", overrides={"B": 4, "N": 16}, role="cross"),
        _P(name="B2-N12", overrides={"B": 2, "N": 12}, role="cross"),
        _P(name="L16-N4", overrides={"L": 16, "N": 4}, role="cross"),
        _P(name="N10", overrides={"N": 10}),
        _P(name="L128", overrides={"L": 128}),
        _P(name="L16-N6", overrides={"L": 16, "N": 6}, role="cross"),
        _P(name="L64-N16", overrides={"L": 64, "N": 16}, role="cross"),
        _P(name="L16-N12", overrides={"L": 16, "N": 12}, role="cross", budget=24_000),
        _P(name="L16-N10", overrides={"L": 16, "N": 10}, role="cross"),
        _P(name="L128-N4", overrides={"L": 128, "N": 4}, role="cross"),
        _P(name="L64-N12", overrides={"L": 64, "N": 12}, role="cross"),
        _P(name="B3-N6", overrides={"B": 3, "N": 6}, role="cross"),
        _P(name="B3-N9", overrides={"B": 3, "N": 9}, role="cross"),
        _P(name="lr0.2-N12", overrides={"lr": 0.2, "N": 12}, role="cross"),
        _P(name="lr0.2-B2-N16", overrides={"lr": 0.2, "B": 2, "N": 16}, role="cross"),
        _P(name="K512-L64", overrides={"K": 512, "L": 64}, role="cross"),
        _P(
            name="L16-N14",
            overrides={"L": 16, "N": 14},
            role="cross",
            budget=32_000,
            seeds=(0, 1, 2),
        ),
        _P(name="L8-N6", overrides={"L": 8, "N": 6}, role="cross"),
        _P(name="L8-N7", overrides={"L": 8, "N": 7}, role="cross", seeds=(0, 1, 2)),
        _P(name="B2-L8-N12", overrides={"B": 2, "L": 8, "N": 12}, role="cross"),
        _P(name="L64-N4", overrides={"L": 64, "N": 4}, role="cross"),
        _P(name="B3-N12", overrides={"B": 3, "N": 12}, role="cross"),
        _P(name="B4-N12", overrides={"B": 4, "N": 12}, role="cross"),
        _P(
            name="lr0.2-N18",
            overrides={"lr": 0.2, "N": 18},
            role="cross",
            budget=24_000,
            seeds=(0, 1, 2),
        ),
        _P(name="L128-N16", overrides={"L": 128, "N": 16}, role="cross", seeds=(0, 1, 2)),
        _P(
            name="lr0.2-L16-N13",
            overrides={"lr": 0.2, "L": 16, "N": 13},
            role="cross",
            budget=20_000,
            seeds=(0, 1, 2),
        ),
        _P(name="K512", overrides={"K": 512}, seeds=(0, 1, 2, 3)),
        _P(name="N9", overrides={"N": 9}, seeds=(0, 1, 2, 3)),
        _P(name="lr0.07", overrides={"lr": 0.07}, seeds=(0, 1, 2, 3)),
        _P(name="B2-N10", overrides={"B": 2, "N": 10}, role="cross", seeds=(0, 1, 2, 3)),
        _P(name="B2-L16-N8", overrides={"B": 2, "L": 16}, role="cross", seeds=(0, 1, 2, 3)),
        _P(
            name="pC0.65-eps0.15",
            overrides={"p_C": 0.65, "eps": 0.15},
            role="sub",
            seeds=(0, 1, 2, 3),
        ),
        _P(name="L64-N6", overrides={"L": 64, "N": 6}, role="cross", seeds=(0, 1, 2, 3)),
        _P(name="lr0.15-N12", overrides={"lr": 0.15, "N": 12}, role="cross", seeds=(0, 1, 2, 3)),
        _P(name="B3-N15", overrides={"B": 3, "N": 15}, role="cross", seeds=(0, 1, 2, 3)),
        _P(name="L16-N11", overrides={"L": 16, "N": 11}, role="cross", seeds=(0, 1, 2)),
        _P(name="L16-N7", overrides={"L": 16, "N": 7}, role="cross", seeds=(0, 1, 2)),
        _P(name="lr0.15-N15", overrides={"lr": 0.15, "N": 15}, role="cross", seeds=(0, 1, 2)),
        _P(name="L64-N7", overrides={"L": 64, "N": 7}, role="cross", seeds=(0, 1, 2)),
        _P(
            name="lr0.15-L64-N12",
            overrides={"lr": 0.15, "L": 64, "N": 12},
            role="cross",
            seeds=(0, 1, 2),
        ),
        _P(name="N14", overrides={"N": 14}, seeds=(0, 1, 2)),
        _P(name="B2-N14", overrides={"B": 2, "N": 14}, role="cross", seeds=(0, 1, 2)),
    ),
    seeds=(0, 1, 2, 3, 4, 5),
    budget=16_000,
    chunk=1000,
)
"""Six seeds a point (the first three trained first; three more measure the seeds' scatter, which
bounds any law, better), except N 24, whose three 60,000-step runs took 1.4 h and did not
transition, the long or uncertain points declared after the second law (three seeds each), the
points declared after the fourth (four seeds each) and those declared after the law (three
each). The points from ``B2-N16`` on are :data:`LATER`."""

LATER = DECLARED_AFTER
"""The points declared after each law's form was fixed and fitted on the points before them,
by the law's name (:mod:`phenomenology.transition_law`). After the first law (``drive``):
crosses of B with N (does the context enter through ``n = N / B`` alone, as the drive says?), of
L with N (the drive's ``1/L``, which the L axis alone left flat; ``L16-N12`` is near the drive's
zero at ``n = L``, with a longer budget), N 10 between the N axis's points and L 128 beyond the L
axis (L must divide the novel pool of 128 classes). After the law: the points where the two laws
and the free power law disagree most that a run of minutes reaches (L with N near and far from
``n = L``, ``B = 3``, the learning rate with N, K with L; ``L16-N14``, nearest ``n = L``, with
three seeds and a 32k budget). After the third law (``flow``): where it and the second law part
most within a run of minutes (L 8 with n 6 and 7, where the second law's threshold and the third
law's label term differ most; n 3 and 4 at B 3 and 4; lr 0.2 at N 18 and at L16-N13, where the
third law's finite-step stretch is largest; L 64 at N 4 and L 128 at N 16). After the fourth
(``fourth``, the third plus its correction): points inside the data's range, where a user's
forecast falls (K 512, N 9, lr 0.07 and 0.15, B 2 and 3 at new N, L 16 and 64 at new N, p_C and
eps together). After the law (``law``, the fourth fitted for the median): where it and
the fourth part most within a run of minutes (L 16 at N 7 and 11, L 64 at N 7 and, at lr 0.15,
N 12, lr 0.15 at N 15, N 14), and B 2 at N 14. The page scores each
law fitted without its later points on them: a forecast made before they were trained."""

QUICK_GRID = TransitionGrid(
    preset="tiny",
    base={
        "optimizer": "sgd",
        "hidden_bias": "per_unit",
        "eval_every": 25,
        "num_threads": 1,
        "live_forecast": False,
    },
    points=(_P(name="lr0.3", overrides={"lr": 0.3}), _P(name="lr0.6", overrides={"lr": 0.6})),
    seeds=(0, 1),
    budget=1500,
    chunk=500,
)
"""The quick tier: the machinery on the ``tiny`` task (too few configurations for the law)."""

GRIDS = {"quick": QUICK_GRID, "full": GRID}


def _produce(experiment, tier: str, runs: Path, workers, log, out: Path | None = None):
    from experiments.transition_grid import collect, run_grid

    grid = GRIDS[tier]
    grid.validate()
    kept, kept_curves = _committed(grid, tier, out, log)
    skip = frozenset(f"{p}-seed{s}" for p, s in zip(kept["point"], kept["seed"], strict=True))
    run_grid(grid, runs, workers=workers or 2, log=log, skip=skip)
    new, new_curves = collect(grid, runs, skip=skip)
    rows, curves = _in_grid_order(grid, kept, new), _in_grid_order(grid, kept_curves, new_curves)
    forecasts = _curve_forecasts(rows, curves, log)
    companions = {CURVES: curves, **score_tables(rows, curves, log=log, forecasts=forecasts)}
    if rows["transitioned"].astype(bool).groupby(rows["point"]).any().sum() >= 8:
        companions[LAW_JSON] = fit_law_record(rows, curves, forecasts=forecasts)
    return rows, companions


def _curve_forecasts(rows: pd.DataFrame, curves: pd.DataFrame, log) -> pd.DataFrame | None:
    """Every transitioned run's partial-curve forecasts, computed once for the scores and the
    calibration (None when too few configurations transitioned to score)."""
    from experiments.transition_scores import curve_forecasts

    if rows.loc[rows["transitioned"].astype(bool), "point"].nunique() < 8:
        return None
    log("scoring: the partial-curve forecasts of every run")
    return curve_forecasts(rows, curves)


def _committed(grid, tier: str, out: Path | None, log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows and curves of ``tier`` committed in ``out`` that are still the grid's (their runs
    are not trained again); none when ``out`` has no table yet."""
    from experiments.catalog.transition_law_table import check_table
    from experiments.transition_grid import kept_runs
    from interp.experiments.core import META, read_rows, read_table

    csv = None if out is None else Path(out) / f"{NAME}.csv"
    if csv is None or not csv.exists():
        return pd.DataFrame(columns=["point", "seed"]), pd.DataFrame(columns=["point", "seed"])
    rows = read_rows(csv, META)
    if not (Path(out) / CURVES).exists():
        log(f"{Path(out) / CURVES} is missing: the runs of {csv} are trained again")
        return rows.iloc[:0], pd.DataFrame(columns=["point", "seed"])
    curves = read_table(Path(out) / CURVES)
    for path, table in ((csv, rows), (Path(out) / CURVES, curves)):
        try:  # a damaged row is refused by name before anything trains
            check_table(path.name, table)
        except ValueError as err:
            raise ValueError(str(err).replace(path.name, str(path), 1)) from None
    rows = rows[rows["tier"] == tier]
    kept, kept_curves, dropped = kept_runs(grid, rows, curves)
    more = f"; and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    log(
        f"{len(kept)} runs kept from {csv}"
        + (f"; not kept: {'; '.join(dropped[:5])}{more}" if dropped else "")
    )
    return kept, kept_curves


def _in_grid_order(grid, *frames: pd.DataFrame) -> pd.DataFrame:
    """Frames of rows or curves joined, their runs in the grid's order (a curve's steps kept in
    order within its run)."""
    nonempty = [f for f in frames if len(f)]
    if not nonempty:
        return frames[-1]
    both = pd.concat(nonempty, ignore_index=True)
    order = {(p.name, s): i for i, (p, s) in enumerate(grid.jobs())}
    rank = [order[(str(p), int(s))] for p, s in zip(both["point"], both["seed"], strict=True)]
    both = both.assign(_rank=rank).sort_values("_rank", kind="stable")
    return both.drop(columns="_rank").reset_index(drop=True)


def score_tables(
    rows: pd.DataFrame, curves: pd.DataFrame, log=print, forecasts: pd.DataFrame | None = None
) -> dict[str, pd.DataFrame]:
    """The held-out score tables of the page, from the rows and curves alone (deterministic;
    ``forecasts``: their partial-curve forecasts, when the caller has them already)."""
    from experiments.transition_scores import combined_scores, early_warning, warning_signals
    from phenomenology.transition_law import leave_one_out

    points = rows.loc[rows["transitioned"].astype(bool), "point"].nunique()
    if points < 8:  # too few to hold one out and fit the rest (least squares: the minimum-norm
        # coefficients where the configurations leave a term undetermined)
        log(f"{points} configurations transitioned: too few to fit and score the law")
        return {LOO: pd.DataFrame(), COMBINED: pd.DataFrame(), WARNING: pd.DataFrame()}
    log("scoring: leave one configuration out")
    loo = leave_one_out(rows)
    log("scoring: before and during training combined")
    combined = combined_scores(rows, curves, forecasts=forecasts)
    log("scoring: early warning")
    warning = early_warning(warning_signals(rows, curves))
    return {LOO: loo.round(6), COMBINED: combined.round(6), WARNING: warning.round(6)}


def fit_law_record(
    rows: pd.DataFrame, curves: pd.DataFrame, forecasts: pd.DataFrame | None = None
) -> dict:
    """What ``induction-cliff forecast`` and the live forecast read: the law fitted on every
    run, the combination's calibration (every run's partial-curve forecasts against its prior from
    the law fitted without its configuration), the grid's range of each field (its runs that did
    not transition included: the law's forecast of none is tested there) and the fields held
    fixed."""
    from experiments.transition_scores import _priors, calibration_rows, curve_forecasts
    from interp.train.overrides import build_configs
    from phenomenology.prior import calibrate
    from phenomenology.transition_law import (
        FIELDS,
        LAW,
        _transitioned,
        law_inputs,
        observed_configurations,
    )

    fitted = LAW.fit(rows)
    ok = rows[_transitioned(rows)]
    if forecasts is None:
        forecasts = curve_forecasts(rows, curves)
    errs = calibration_rows(forecasts, _priors(rows, LAW))
    _, settings = law_inputs(*build_configs(GRID.preset, GRID.overrides(GRID.points[0]), 0)[:3])
    return {
        "law": fitted.to_dict(),
        "calibration": calibrate(errs),
        "ranges": {f: [float(rows[f].min()), float(rows[f].max())] for f in FIELDS},
        "fixed": settings,
        "runs": int(len(rows)),
        "transitioned": int(len(ok)),
        "data": f"docs/results/{NAME}.csv",
        "observed": observed_configurations(rows),
    }


def _full_tier_note(grid) -> str:
    """The full tier's size, seeds and budgets, counted from the grid."""
    counts: dict[int, list[str]] = {}
    budgets: dict[int, list[str]] = {}
    for p in grid.points:
        if p.seeds is not None and len(p.seeds) != len(grid.seeds):
            counts.setdefault(len(p.seeds), []).append(p.name)
        if p.budget is not None and p.budget != grid.budget:
            budgets.setdefault(p.budget, []).append(p.name)
    fewer = "; ".join(f"{', '.join(names)}: {n}" for n, names in sorted(counts.items()))
    seeds = f"{len(grid.seeds)} seeds" + (f" ({fewer})" if fewer else "")
    other = "; ".join(f"{b // 1000}k at {', '.join(names)}" for b, names in sorted(budgets.items()))
    return (
        f"{len(grid.points)} configurations of paper-fig3 x {seeds}, {len(grid.jobs())} "
        "runs, each run until its IC accuracy has transitioned (margin max(800, 15%, the "
        f"rise's width)) or its budget ({grid.budget // 1000}k steps; {other})."
    )


from experiments.catalog.transition_law_page import render_page as _render  # noqa: E402

EXPERIMENT = register_experiment(
    Experiment(
        name=NAME,
        title="The transition step across configurations: a law, forecast before training",
        question=(
            "Can a run's transition step be forecast from its configuration alone, before "
            "training, as well as its own seeds agree with each other?"
        ),
        tiers={
            "quick": Tier(
                cost="about 30 s on 2 cores",
                cost_s=30,
                hidden_bias=QUICK_GRID.base["hidden_bias"],
                note="the `tiny` task at two learning rates, two seeds: the machinery only "
                "(too few configurations to fit the law).",
            ),
            "full": Tier(
                cost="about 6.5 h on 2 cores",
                cost_s=23400,
                hidden_bias=BASE["hidden_bias"],
                note=_full_tier_note(GRID),
            ),
        },
        columns=(),
        produce=_produce,
        companions=COMPANIONS,
        page=_render,
        deviations=(
            "Per-unit hidden biases (`hidden_bias=per_unit`) instead of the author's scalar ones: "
            "with scalar biases plain SGD collapses on some seeds (docs/results/hidden-bias.md), "
            "at lr 0.1 within 500 steps.",
            "Learning rates 0.03-0.2 beside lr 0.01 (the author's code), so that a run ends in "
            "minutes.",
            "1024 sequences per evaluation set (paper-fig3: 2048), an evaluation every 100 steps.",
            "Runs stop after their cliff (or at their budget) instead of training the toolkit's "
            "default 1e5 steps.",
            "The task is paper-fig3's, a third-party script's guess at Fig 3 (K=256, B=1, "
            "p_C=0.8) at the centre.",
        ),
        headline=lambda r: __import__(
            "experiments.catalog.transition_law_page", fromlist=["headline"]
        ).headline(r),
        meta=(
            "source",
            "tier",
            "commit",
            "format_version",
            "date",
            "wall_s",
            "machine",
            "command",
        ),
        sort=(),
    )
)
