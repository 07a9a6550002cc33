"""A declared grid of CoPE token-task runs (task x encoding x seed), trained and measured.

:class:`TokenGrid` declares arms (a task of :mod:`interp.data.cope_tasks` with its fields and a
step budget), the positional encodings and the seeds. :func:`run_token_grid` trains every run not
yet ended, ``workers`` one-thread processes at a time, each with
:func:`interp.train.token_runs.train_token_run` in chunks (an interrupted call resumes where its
runs stopped), then measures the trained network on fresh test sets (:func:`final_errors`).
:func:`collect` reads the folder back: one row per run and test set.

Layout under the grid's folder (``runs/experiments/cope-tasks/TIER`` by default)::

    ARM-ENCODING-seedS/             the run folder (resume.pt, spec.json, model.pt, curve.csv)
    ARM-ENCODING-seedS.done.json    once measured: the error counts of each test set, the
                                    measurement's settings, wall time, commit, date, machine

The grid's folder is the root of every write: a run folder (or a file of it) that is a symbolic
link, or a damaged or foreign ``resume.pt``, is refused in one line naming it before any run
trains.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = ["ROW_COLUMNS", "TokenArm", "TokenGrid", "collect", "final_errors", "run_token_grid"]

ROW_COLUMNS = (
    "arm",
    "task",
    "n_vars",
    "positional",
    "seed",
    "steps",
    "set",
    "answers",
    "errors",
    "error_pct",
    "sequences",
    "seq_errors",
    "seq_error_pct",
    "per_10k",
    "upper95_per_10k",
    "final_train_loss",
)
"""One row per run and test set: the arm, its task and (counting) number of variables, the
encoding, seed and steps, the set (``id``, ``ood_sparse``, ``ood_long``), the answers and wrong
answers, the error rate in percent, the sequences with an answer and those with a wrong one, the
errors per 10^4 answers and their 95% upper bound, and the training loss at the last evaluation."""


@dataclass(frozen=True, kw_only=True)
class TokenArm:
    """One task setting: ``name`` (the run folders' prefix), the registered ``task`` name, the
    task config's ``fields`` and the run length ``steps``."""

    name: str
    task: str
    fields: Mapping[str, object] = field(default_factory=dict)
    steps: int

    def config(self):
        from interp.data.tasks import TASKS

        if self.task not in TASKS or TASKS[self.task].layout != "tokens":
            tokens = sorted(n for n, t in TASKS.items() if t.layout == "tokens")
            raise ValueError(f"TokenArm {self.name}: task={self.task!r} is not one of {tokens}")
        try:
            return TASKS[self.task].config(**self.fields)
        except TypeError as err:
            raise ValueError(f"TokenArm {self.name}: fields {dict(self.fields)}: {err}") from None


@dataclass(frozen=True, kw_only=True)
class TokenGrid:
    """Arms x encodings x seeds, and how each run is trained and measured.

    Attributes:
        chunk: steps between saved states (an interrupted run loses at most this many).
        eval_every, n_test: the learning curve's evaluations (``curve.csv``).
        n_final: sequences per test set of the final measurement (fresh ones, seeded apart
            from training and from the curve's sets).
        min_answers: the final measurement draws more sequences until every set holds this many
            answers (flip-flop's sparse set has few reads per sequence): the rare-error tail.
    """

    arms: tuple[TokenArm, ...]
    positionals: tuple[str, ...]
    seeds: tuple[int, ...] = (0, 1)
    lr: float = 3e-3
    batch_size: int = 64
    chunk: int = 500
    eval_every: int = 500
    n_test: int = 256
    n_final: int = 2048
    min_answers: int = 0
    first: tuple[str, ...] = ()
    """Arms trained before the others, in this order (the rows keep the declared order)."""

    def jobs(self) -> list[tuple[TokenArm, str, int]]:
        return [(a, p, s) for a in self.arms for p in self.positionals for s in self.seeds]

    def model_config(self, arm: TokenArm, positional: str):
        from interp.model.token_net import token_model_config

        return token_model_config(arm.config(), positional)

    def validate(self) -> None:
        """Build every arm's task and network (an invalid one fails here, before training)."""
        names = [a.name for a in self.arms]
        if len(set(names)) < len(names):
            raise ValueError(f"TokenGrid.arms: names {names} are not distinct")
        for arm in self.arms:
            for p in self.positionals:
                try:
                    self.model_config(arm, p)
                except ValueError as err:
                    raise ValueError(f"TokenArm {arm.name}, positional={p}: {err}") from None

    def measurement(self) -> dict:
        """The final measurement's settings (kept in each ``.done.json``)."""
        return {"n_final": self.n_final, "min_answers": self.min_answers, "seed_offset": FINAL}


_SET_ORDER = {"id": 0, "ood_sparse": 1, "ood_long": 2}
FINAL = 7_000_003  # seeds of the final test sets: seed + FINAL + 1000 k (apart from training's)


def run_name(arm: TokenArm, positional: str, seed: int) -> str:
    return f"{arm.name}-{positional}-seed{seed}"


def final_errors(model, task, n: int, seed: int, min_answers: int = 0, max_rounds: int = 400):
    """Error counts of ``model`` on each of ``task``'s test sets: ``n`` fresh sequences per set,
    and more (``n`` at a time, at most ``max_rounds`` times) until a set holds ``min_answers``
    answers. Returns ``{set: ErrorCounts}``."""
    from interp.analysis.token_errors import ErrorCounts, model_errors
    from interp.model.positional import UntrainedPositionWarning

    totals: dict[str, ErrorCounts] = {}
    for k in range(max_rounds):
        short = [s for s, c in totals.items() if c.answers < min_answers]
        if k and not short:
            break
        sets = task.test_sets(n, seed=seed + FINAL + 1000 * k)
        for name, batch in sets.items():
            if k and name not in short:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UntrainedPositionWarning)
                got = model_errors(model, batch)
            totals[name] = totals.get(name, ErrorCounts(0, 0, 0, 0)) + got
    return totals


def train_and_measure(grid: TokenGrid, arm: TokenArm, positional: str, seed: int, out: Path):
    """Train (or resume) one run in chunks, measure it and write its ``.done.json``."""
    from interp.experiments.core import _commit, _machine
    from interp.io.atomic import write_text_atomic
    from interp.train.token_runs import load_token_model, train_token_run

    name = run_name(arm, positional, seed)
    run_dir, done = out / name, out / f"{name}.done.json"
    clock = out / f"{name}.wall.json"  # seconds of earlier, cut calls
    from interp.io.inputs import read_json_object

    earlier = read_json_object(clock)["wall_s"] if clock.exists() else 0.0
    t0 = time.perf_counter()
    task, cfg = arm.config(), grid.model_config(arm, positional)
    kw = dict(
        steps=arm.steps,
        batch_size=grid.batch_size,
        lr=grid.lr,
        seed=seed,
        eval_every=grid.eval_every,
        n_test=grid.n_test,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untrained positions of the long sets: the rows say so
        for target in range(grid.chunk, arm.steps + grid.chunk, grid.chunk):
            curve = train_token_run(
                task, cfg, run_dir, stop_after=min(target, arm.steps), root=out, **kw
            )
            wall = {"wall_s": round(earlier + time.perf_counter() - t0, 1)}
            write_text_atomic(clock, json.dumps(wall), root=out)
    model, _ = load_token_model(run_dir)
    counts = final_errors(model, task, grid.n_final, seed, grid.min_answers)
    record = {
        "counts": {s: vars(c) for s, c in counts.items()},
        "measurement": grid.measurement(),
        "steps": int(curve["step"].iloc[-1]),
        "final_train_loss": float(curve["train_loss"].iloc[-1]),
        "wall_s": round(earlier + time.perf_counter() - t0, 1),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": _machine("cpu"),
    }
    write_text_atomic(done, json.dumps(record, indent=1, sort_keys=True) + "\n", root=out)
    clock.unlink(missing_ok=True)
    return record


def _check_run(out: Path, name: str) -> None:
    """Refuse, in one line naming it, a link among a run's folder and files in the grid's folder
    ``out``, and a ``resume.pt`` there that is damaged or foreign."""
    from interp.io.paths import check_no_links
    from interp.train.token_runs import RESUME, check_run_folder, read_resume_state

    check_run_folder(out / name, out)
    for extra in (f"{name}.done.json", f"{name}.wall.json"):
        check_no_links(out, extra)
    if os.path.lexists(out / name / RESUME):
        read_resume_state(out / name / RESUME)


def _worker(grid, arm, positional, seed, out: str) -> dict:
    import torch

    from interp.io.pool import check_start

    torch.set_num_threads(1)
    check_start()  # in a pool worker: its parent alive and no stop asked, before any folder
    return train_and_measure(grid, arm, positional, seed, Path(out))


def run_token_grid(
    grid: TokenGrid,
    out: str | os.PathLike,
    *,
    workers: int = 1,
    log: Callable[[str], None] = print,
) -> int:
    """Train and measure every run of ``grid`` not yet ended into ``out`` (in the declared
    order, ``workers`` processes of a :class:`interp.io.pool.WorkerPool` at a time). Returns how
    many runs ended now."""
    grid.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rank = {name: i for i, name in enumerate(grid.first)}
    jobs = sorted(grid.jobs(), key=lambda j: rank.get(j[0].name, len(rank)))  # stable
    todo = [j for j in jobs if not (out / f"{run_name(*j)}.done.json").exists()]
    for job in todo:  # before any run trains
        _check_run(out, run_name(*job))
    n = len(grid.jobs())
    log(f"{n - len(todo)} of {n} runs ended already; {len(todo)} to go")
    failed, errors = [], []
    if workers <= 1:
        for job in todo:
            rec = _worker(grid, *job, str(out))
            log(f"{run_name(*job)}: {rec['steps']} steps, {rec['wall_s']:.0f} s")
        return len(todo)
    from interp.io.pool import WorkerPool

    # Ctrl-C or SIGTERM: the running runs save their state, the command exits 130 or 143.
    with WorkerPool(workers) as pool:
        futures = {pool.submit(_worker, grid, *job, str(out)): job for job in todo}
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                rec = fut.result()
            except Exception as err:  # noqa: BLE001 - reported now, raised once the rest ran
                failed.append(run_name(*job))
                errors.append(err)
                log(f"{run_name(*job)}: failed: {str(err).splitlines()[0] if str(err) else err!r}")
                continue
            log(f"{run_name(*job)}: {rec['steps']} steps, {rec['wall_s']:.0f} s")
    if failed:
        from interp.io.errors import EXIT_UNUSABLE, RunDirectoryError, exit_code

        said = f"{len(failed)} runs failed ({', '.join(failed)}); the others ended"
        if all(exit_code(err) == EXIT_UNUSABLE for err in errors):  # damaged or foreign files
            raise RunDirectoryError(said)
        raise RuntimeError(said)
    return len(todo)


def collect(grid: TokenGrid, out: str | os.PathLike) -> pd.DataFrame:
    """One row per ended run of ``grid`` in ``out`` and test set (:data:`ROW_COLUMNS` plus
    ``wall_s, commit, date, machine, format_version``), in the grid's order. A run measured
    under other settings than the grid's is refused, naming its file."""
    from interp.analysis.token_errors import per_10k, upper_per_10k
    from interp.experiments.core import current_format_version
    from interp.io.inputs import read_json_object

    out = Path(out)
    rows = []
    for arm, positional, seed in grid.jobs():
        done = out / f"{run_name(arm, positional, seed)}.done.json"
        if not done.exists():
            continue
        rec = read_json_object(done)  # limits checked before parsing
        if rec["measurement"] != grid.measurement():
            raise ValueError(
                f"{done} was measured with {rec['measurement']}, the grid says "
                f"{grid.measurement()}: remove it to measure the run again"
            )
        for name, c in sorted(rec["counts"].items(), key=lambda kv: _SET_ORDER.get(kv[0], 9)):
            rows.append(
                {
                    "arm": arm.name,
                    "task": arm.task,
                    "n_vars": arm.fields.get("n_vars", math.nan)
                    if arm.task == "counting"
                    else math.nan,
                    "positional": positional,
                    "seed": seed,
                    "steps": rec["steps"],
                    "set": name,
                    **c,
                    "error_pct": round(100 * c["errors"] / c["answers"], 4)
                    if c["answers"]
                    else math.nan,
                    "seq_error_pct": round(100 * c["seq_errors"] / c["sequences"], 4)
                    if c["sequences"]
                    else math.nan,
                    "per_10k": round(per_10k(c["errors"], c["answers"]), 3),
                    "upper95_per_10k": round(upper_per_10k(c["errors"], c["answers"]), 3),
                    "final_train_loss": round(rec["final_train_loss"], 5),
                    "wall_s": round(rec["wall_s"] / len(rec["counts"]), 2),  # a run's, shared
                    **{k: rec[k] for k in ("commit", "date", "machine")},
                    "format_version": current_format_version(),
                }
            )
    extra = ["wall_s", "commit", "date", "machine", "format_version"]
    return pd.DataFrame(rows, columns=[*ROW_COLUMNS, *extra])
