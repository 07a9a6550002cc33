"""A grid of configurations trained until each run's transition, or its budget.

The data of the transition-time law (:mod:`phenomenology.transition_law`): for every point of a
declared :class:`TransitionGrid` and every seed, one run of the grid's preset with the point's
``--set`` overrides, trained in chunks of :attr:`TransitionGrid.chunk` steps (each chunk resumes
the last, bit for bit, so a run equals one uninterrupted run of as many steps) until its IC
accuracy has transitioned with a margin after it, or the budget (``steps``) is spent.

Layout under the grid's folder (``runs/experiments/transition-law/full`` by default)::

    POINT-seedS/            a run directory (docs/run-format.md)
    POINT-seedS.done.json   written once the run has ended: wall time, commit, date, machine
    POINT-seedS.wall.json   while it trains: the seconds of its chunks so far (an interrupted
                            call's time counts in the run's wall time)

A second call skips runs with a ``.done.json`` and resumes the others. :func:`collect` reads the
folder (nothing is trained) and returns one summary row per ended run and its curve.
:func:`kept_runs` picks, from rows and curves committed earlier, the runs that are still the
grid's, so that a grid grown by new points trains only those (its old runs' folders may be gone).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = [
    "CURVE_COLUMNS",
    "GridPoint",
    "SUMMARY_COLUMNS",
    "TransitionGrid",
    "collect",
    "kept_runs",
    "run_grid",
    "stop_rule",
    "train_run",
]

CONFIG_COLUMNS = ("K", "L", "N", "B", "eps", "p_C", "lr", "batch_size")
SUMMARY_COLUMNS = (
    "point",
    "role",
    "seed",
    *CONFIG_COLUMNS,
    "budget",
    "steps",
    "status",
    "transitioned",
    "transition_step",
    "cliff_step",
    "plateau_end",
    "final_ic_loss",
    "final_ic_acc",
)
"""One row per run: its point, role and seed, the configuration, the budget and the steps trained,
``status`` (``ended``, or ``diverged``: the loss became
non-finite, the last good evaluation kept), whether IC accuracy transitioned within the budget
and where (``transition_step``: the logistic midpoint of
:func:`interp.analysis.transition.detect_transition`, what ``induction-cliff transition``
reports; ``plateau_end``: its 10% point), the IC-loss cliff of
:func:`phenomenology.curves.observed_transition` where it has one (``cliff_step``; a curve with no
plateau before its fall has none), and the last IC loss and accuracy."""
CURVE_COLUMNS = ("point", "seed", "step", "train_loss", "ic_loss", "ic_acc", "tila2")
"""The curves kept beside the summary: what the partial-curve forecasters read."""


@dataclass(frozen=True, kw_only=True)
class GridPoint:
    """One configuration: ``name`` (the run folders' prefix), its ``--set`` overrides of the grid's
    base and its ``role`` in the design (``axis``: one field moved from the centre; ``sub``: the
    smaller sub-grid; ``cross``: two fields moved; ``negative``: chosen to test runs expected not
    to transition within the budget; the label is measured, never assumed)."""

    name: str
    overrides: Mapping[str, object] = field(default_factory=dict)
    role: str = "axis"
    budget: int | None = None
    """Steps this point's runs may take (None: the grid's budget)."""
    seeds: tuple[int, ...] | None = None
    """This point's seeds (None: the grid's seeds)."""


@dataclass(frozen=True, kw_only=True)
class TransitionGrid:
    """A declared grid: a preset, the overrides every point shares (``base``), the points, the
    seeds, the step budget of a run and the chunk between checks of the stopping rule."""

    preset: str
    base: Mapping[str, object]
    points: tuple[GridPoint, ...]
    seeds: tuple[int, ...] = (0, 1, 2)
    budget: int = 16_000
    chunk: int = 1000
    to_budget: bool = False
    """Train every run to its budget, not stopping after its transition (long runs)."""
    curve_columns: tuple[str, ...] = CURVE_COLUMNS
    """The columns of the metrics kept as each run's curve."""
    plugins: tuple[str, ...] = ()
    """Plugins loaded before a run trains (their measures are then columns of ``metrics.csv``)."""

    def __post_init__(self) -> None:
        names = [p.name for p in self.points]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"TransitionGrid.points: the names {dup} are used twice")
        for name, seeds in [("seeds", self.seeds)] + [
            (f"points[{p.name}].seeds", p.seeds) for p in self.points if p.seeds is not None
        ]:
            if (
                not seeds
                or len(set(seeds)) < len(seeds)
                or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
            ):
                raise ValueError(
                    f"TransitionGrid.{name}={list(seeds)} is invalid: non-negative, distinct, "
                    "at least one"
                )

    def budget_of(self, point: GridPoint) -> int:
        return self.budget if point.budget is None else point.budget

    def seeds_of(self, point: GridPoint) -> tuple[int, ...]:
        return self.seeds if point.seeds is None else point.seeds

    def overrides(self, point: GridPoint) -> dict[str, str]:
        """The ``--set`` overrides of one point's runs (the budget as ``steps``)."""
        merged = {**self.base, **point.overrides, "steps": self.budget_of(point)}
        return {k: _text(v) for k, v in merged.items()}

    def jobs(self) -> list[tuple[GridPoint, int]]:
        """Every (point, seed), points in their declared order, then seeds."""
        return [(p, s) for p in self.points for s in self.seeds_of(p)]

    def validate(self) -> None:
        """Build every point's configs (an invalid field fails here, naming it, before training)."""
        from interp.train.overrides import build_configs

        for p in self.points:
            try:
                build_configs(self.preset, self.overrides(p), self.seeds_of(p)[0])
            except ValueError as err:
                raise ValueError(f"grid point {p.name}: {err}") from None


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def run_name(point: GridPoint, seed: int) -> str:
    return f"{point.name}-seed{seed}"


def stop_rule(metrics: pd.DataFrame, budget: int, to_budget: bool = False) -> bool:
    """Whether a run may end: its budget is spent, or (unless ``to_budget``) its IC accuracy has
    transitioned (the
    logistic midpoint of :func:`interp.analysis.transition.detect_transition`, what
    ``induction-cliff transition`` reports) and the curve reaches ``max(800, 0.15 x step, the
    rise's width)`` steps beyond it."""
    from interp.analysis.transition import detect_transition

    if not len(metrics):
        return False
    last = float(metrics["step"].iloc[-1])
    if last >= budget:
        return True
    if to_budget or len(metrics) < 5:
        return False
    acc = detect_transition(metrics["step"], metrics["ic_acc"])
    if not acc.transitioned:
        return False
    return last >= acc.step + max(800.0, 0.15 * acc.step, acc.width or 0.0)


def train_run(grid: TransitionGrid, point: GridPoint, seed: int, run_dir: Path) -> dict:
    """Train (or resume) one run until :func:`stop_rule`; returns its ``.done.json`` record."""
    from interp.experiments.core import _commit, _machine
    from interp.experiments.standard import train
    from interp.io.atomic import write_text_atomic
    from interp.io.plugins import load_plugins
    from interp.train.overrides import build_configs
    from interp.train.training import TrainingDiverged

    load_plugins(grid.plugins)
    task, model, cfg, _ = build_configs(grid.preset, grid.overrides(point), seed)
    done = run_dir.with_name(run_dir.name + ".done.json")
    clock = run_dir.with_name(run_dir.name + ".wall.json")  # seconds of earlier, cut calls
    earlier = json.loads(clock.read_text())["wall_s"] if clock.exists() else 0.0
    t0 = time.perf_counter()
    metrics = pd.DataFrame()
    start = _steps_done(run_dir)
    status = "ended"
    budget = grid.budget_of(point)
    while not stop_rule(metrics, budget, grid.to_budget):
        target = min(budget, (start // grid.chunk + 1) * grid.chunk)
        try:
            metrics = train(
                task, model, cfg, run_dir, resume=True, progress=False, stop_after=target
            )
        except TrainingDiverged:  # an outcome of the configuration, kept as such
            status = "diverged"
            start = _steps_done(run_dir)
            break
        start = int(metrics["step"].iloc[-1])
        wall = {"wall_s": round(earlier + time.perf_counter() - t0, 1)}
        write_text_atomic(clock, json.dumps(wall))
    record = {
        "status": status,
        "steps": start,
        "wall_s": round(earlier + time.perf_counter() - t0, 1),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": _machine(cfg.device),
    }
    write_text_atomic(done, json.dumps(record, indent=1, sort_keys=True))
    clock.unlink(missing_ok=True)
    return record


def _steps_done(run_dir: Path) -> int:
    metrics = run_dir / "metrics.csv"
    if not metrics.exists():
        return 0
    try:
        m = pd.read_csv(metrics)
    except (pd.errors.EmptyDataError, OSError):
        return 0
    return int(m["step"].iloc[-1]) if len(m) else 0


def _worker(grid: TransitionGrid, point: GridPoint, seed: int, run_dir: str) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import contextlib
    import io

    from interp.io.pool import check_start

    check_start()  # in a pool worker: its parent alive and no stop asked, before any folder
    with contextlib.redirect_stderr(io.StringIO()):
        return train_run(grid, point, seed, Path(run_dir))


def run_grid(
    grid: TransitionGrid,
    out: str | os.PathLike,
    *,
    workers: int = 2,
    log: Callable[[str], None] = print,
    skip: frozenset[str] = frozenset(),
) -> int:
    """Train every run of ``grid`` not yet ended into ``out``, ``workers`` one-thread processes
    (a :class:`interp.io.pool.WorkerPool`) at a time (in the declared order), but those named in
    ``skip`` (runs kept from committed data: :func:`kept_runs`). Returns how many runs were
    trained now."""
    grid.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [
        (p, s)
        for p, s in grid.jobs()
        if run_name(p, s) not in skip and not (out / f"{run_name(p, s)}.done.json").exists()
    ]
    kept = f" ({len(skip)} kept from committed data)" if skip else ""
    log(
        f"{len(grid.jobs()) - len(todo)} of {len(grid.jobs())} runs ended already{kept}; "
        f"{len(todo)} to go"
    )
    if not todo:
        return 0
    failed = []
    if workers <= 1:
        for p, s in todo:
            rec = _worker(grid, p, s, str(out / run_name(p, s)))
            log(f"{run_name(p, s)}: {rec['steps']} steps, {rec['wall_s']:.0f} s")
        return len(todo)
    from interp.experiments import load_catalogue
    from interp.io.pool import WorkerPool

    # Ctrl-C or SIGTERM: the running runs save their state, the command exits 130 or 143. Each
    # worker loads this checkout's experiments by their path, as the command did (_worker's).
    with WorkerPool(workers, initializer=load_catalogue) as pool:
        futures = {
            pool.submit(_worker, grid, p, s, str(out / run_name(p, s))): (p, s) for p, s in todo
        }
        for fut in as_completed(futures):
            p, s = futures[fut]
            try:
                rec = fut.result()
            except Exception as err:  # noqa: BLE001 - reported now, raised once the rest ran
                failed.append(run_name(p, s))
                log(f"{run_name(p, s)}: failed: {str(err).splitlines()[0] if str(err) else err!r}")
                continue
            log(f"{run_name(p, s)}: {rec['steps']} steps, {rec['wall_s']:.0f} s")
    if failed:
        raise RuntimeError(f"{len(failed)} runs failed ({', '.join(failed)}); the others ended")
    return len(todo)


def collect(
    grid: TransitionGrid, out: str | os.PathLike, skip: frozenset[str] = frozenset()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary rows (:data:`SUMMARY_COLUMNS` plus ``wall_s, commit, date, machine,
    format_version``) and the curves (:data:`CURVE_COLUMNS`) of the runs of ``grid`` in ``out``
    that have ended, but those named in ``skip``."""
    from interp.analysis.transition import detect_transition
    from interp.io.rundir import load_run
    from phenomenology.curves import observed_transition

    out = Path(out)
    rows, curves = [], []
    for p, s in grid.jobs():
        done = out / f"{run_name(p, s)}.done.json"
        if run_name(p, s) in skip or not done.exists():
            continue
        rec = json.loads(done.read_text())
        run = load_run(out / run_name(p, s))
        m = run.metrics
        t, c = run.task, run.train_config
        cliff = observed_transition(m, column="ic_loss")["transition_step"]
        acc = detect_transition(m["step"], m["ic_acc"])
        rows.append(
            {
                "point": p.name,
                "role": p.role,
                "seed": s,
                **{k: getattr(t, k) for k in ("K", "L", "N", "B", "eps", "p_C")},
                "lr": c.lr,
                "batch_size": c.batch_size,
                "budget": grid.budget_of(p),
                "steps": int(m["step"].iloc[-1]),
                "status": rec.get("status", "ended"),
                "transitioned": bool(acc.transitioned),
                "transition_step": _round(acc.step if acc.transitioned else None),
                "cliff_step": _round(cliff),
                "plateau_end": _round(acc.plateau_end),
                "final_ic_loss": round(float(m["ic_loss"].iloc[-1]), 4),
                "final_ic_acc": round(float(m["ic_acc"].iloc[-1]), 4),
                **{k: rec[k] for k in ("wall_s", "commit", "date", "machine")},
                "format_version": _format_version(out / run_name(p, s)),
            }
        )
        cols = [k for k in grid.curve_columns if k in m.columns]
        curve = m[cols].copy()
        curve.insert(0, "seed", s)
        curve.insert(0, "point", p.name)
        curves.append(curve.round(5))
    extra = ["wall_s", "commit", "date", "machine", "format_version"]
    summary = pd.DataFrame(rows, columns=[*SUMMARY_COLUMNS, *extra])
    empty = pd.DataFrame(columns=["point", "seed", *grid.curve_columns[2:]])
    curve = pd.concat(curves, ignore_index=True) if curves else empty
    return summary, curve


KEY_COLUMNS = (*CONFIG_COLUMNS, "budget")
"""What a committed row must still say of its point for :func:`kept_runs` to keep it (its role,
a label, is brought up to date instead)."""


def kept_runs(
    grid: TransitionGrid, rows: pd.DataFrame, curves: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Of rows and curves committed earlier (the experiment's CSVs), those still the grid's.

    A row is kept when its point and seed are declared, its :data:`KEY_COLUMNS` equal what the
    point now sets (a point whose fields or budget changed is trained again) and its curve is
    there; its ``role`` is set to the point's. The grid's ``base`` beyond those columns
    (``n_eval``, ``eval_every``, ...) is not in the rows: after a change there, remove the CSV to
    train every run again.

    Returns:
        The kept rows and their curves (in their committed order), and one line per committed
        row that is not kept, saying why.
    """
    from interp.train.overrides import build_configs

    want, roles, dropped = {}, {}, []
    for p in grid.points:
        task, _, train = build_configs(grid.preset, grid.overrides(p), grid.seeds_of(p)[0])[:3]
        key = {
            **{k: getattr(task, k) for k in CONFIG_COLUMNS[:6]},
            "lr": train.lr,
            "batch_size": train.batch_size,
            "budget": grid.budget_of(p),
        }
        want.update({(p.name, s): key for s in grid.seeds_of(p)})
        roles[p.name] = p.role
    have = set(zip(curves["point"].astype(str), curves["seed"].astype(int), strict=True))
    keep = []
    for i, r in rows.iterrows():
        job = (str(r["point"]), int(r["seed"]))
        if job not in want:
            dropped.append(f"{job[0]}-seed{job[1]}: no longer declared")
        elif any(not _same(r[k], v) for k, v in want[job].items()):
            bad = [k for k, v in want[job].items() if not _same(r[k], v)]
            dropped.append(f"{job[0]}-seed{job[1]}: its {', '.join(bad)} changed")
        elif job not in have:
            dropped.append(f"{job[0]}-seed{job[1]}: its curve is missing")
        else:
            keep.append(i)
    kept = rows.loc[keep].reset_index(drop=True)
    kept["role"] = kept["point"].astype(str).map(roles)
    names = set(zip(kept["point"].astype(str), kept["seed"].astype(int), strict=True))
    mask = [(p, int(s)) in names for p, s in zip(curves["point"], curves["seed"], strict=True)]
    return kept, curves[mask].reset_index(drop=True), dropped


def _same(a, b) -> bool:
    if isinstance(b, str):
        return str(a) == b
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    except (TypeError, ValueError):
        return False


def _format_version(run_dir: Path) -> int:
    """The format version a run was trained under (its ``config.json``, before migration)."""
    return int(json.loads((run_dir / "config.json").read_text()).get("format_version", 1))


def _round(v) -> float:
    return math.nan if v is None or not math.isfinite(float(v)) else round(float(v), 1)
