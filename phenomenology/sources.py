"""The curves ``induction-cliff fit PATH...`` fits: run directories and CSV files, each opened and
checked (curve, task, optimiser, where its result goes) before any fit starts.

:func:`open_fit_sources` returns one :class:`FitSource` per path, or raises one ``ValueError``
line naming the path and what is wrong with it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["FitSource", "open_fit_sources", "display_source", "parse_number"]


@dataclasses.dataclass
class FitSource:
    """One curve to fit.

    Attributes:
        source: where the curve comes from (``RUN_DIR/metrics.csv`` or the CSV), as given.
        curve: the curve, one row per evaluation with a ``step`` column.
        task: the task parameters the fit uses (``L``, ``N``, ``B``).
        task_note: where the task came from (the run's config, ``--set`` or the paper's defaults).
        out: where the fit's JSON goes.
        run_dir: the run directory, or None for a CSV.
        optimizer: the optimiser that trained the curve (picks the forecast's calibration).
        prior: the transition law's forecast of a run directory's configuration, when it lies
            inside the law's data (:func:`phenomenology.transition_law.law_prior`), else None.
        calibration: the combination's calibration that goes with ``prior``.
        budget: a run directory's step budget (its ``steps``), None for a CSV.
    """

    source: str
    curve: pd.DataFrame
    task: dict
    task_note: str
    out: Path
    run_dir: str | None
    optimizer: str
    prior: object = None
    calibration: dict = dataclasses.field(default_factory=dict)
    budget: int | None = None


def parse_number(flag: str, value: str | None, *, integer: bool = False):
    """``value`` as a finite number (an int with ``integer``), None for None; one line naming
    ``flag`` otherwise (NaN and infinity included)."""
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{flag}={value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{flag}={value!r} is invalid: must be a finite number")
    if integer:
        if number != int(number):
            raise ValueError(f"{flag}={value!r} must be an integer")
        return int(number)
    return number


def display_source(source: str | Path) -> str:
    """How a figure names a curve's file: relative to the working directory when it lies under
    it, else its last three path parts; never an absolute path of this machine."""
    path = Path(source)
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(Path(*path.parts[-3:]))


def _run_source(path: Path, task_set: Mapping[str, str], optimizer: str | None) -> FitSource:
    from interp.io.rundir import load_run
    from phenomenology.fit import read_run

    if not (path / "config.json").exists():
        raise ValueError(f"{path}: not a run directory (no config.json) and not a CSV")
    if task_set:
        raise ValueError(
            f"--set {','.join(task_set)}: {path} is a run directory, its task comes from "
            f"{path / 'config.json'}"
        )
    if optimizer is not None:
        raise ValueError(
            f"--optimizer: {path} is a run directory, its optimiser comes from "
            f"{path / 'config.json'}"
        )
    from phenomenology.transition_law import law_prior

    run = load_run(path)  # opened once: its curve, task and optimiser
    curve, task = read_run(run)
    prior, calibration, _ = law_prior(run.task, run.model_config, run.train_config)
    return FitSource(
        source=str(path / "metrics.csv"),
        curve=curve,
        task=task,
        task_note=f"from {path / 'config.json'}",
        out=path / "fit.json",
        run_dir=str(path),
        optimizer=run.train_config.optimizer,
        prior=prior,
        calibration=dict(calibration),
        budget=int(run.train_config.steps),
    )


def _csv_source(path: Path, task_set: Mapping[str, str], optimizer: str | None) -> FitSource:
    from interp.io.inputs import read_csv
    from phenomenology.fit import PAPER_TASK

    curve = read_csv(path)  # limits checked before parsing; damaged: one line (exit 3)
    task = dict(PAPER_TASK)
    for key, value in task_set.items():
        task[key] = parse_number(f"--set {key}", value, integer=key != "L")
    defaults = [k for k in PAPER_TASK if k not in task_set]
    note = (
        "from --set"
        if not defaults
        else (
            f"{', '.join(defaults)}: the paper's default{'s' if len(defaults) > 1 else ''}"
            + (f"; {', '.join(task_set)} from --set" if task_set else "")
        )
    )
    return FitSource(
        source=str(path),
        curve=curve,
        task=task,
        task_note=note,
        out=path.with_name(f"{path.stem}.fit.json"),
        run_dir=None,
        optimizer=optimizer or "sgd",
    )


def open_fit_sources(
    paths: Sequence[str],
    *,
    task_set: Mapping[str, str],
    optimizer: str | None,
    json_out: str | None,
    model: str,
    column: str,
    target: str | None,
    aux: Sequence[str],
    options: Mapping[str, Any],
    method: str,
    progress_column: str,
) -> list[FitSource]:
    """Every path opened and checked before any fit (the arguments are ``fit``'s options).

    Raises:
        ValueError: a path that is neither a run directory nor a readable CSV, ``--set`` or
            ``--optimizer`` given for a run directory, a task key other than ``L``, ``N``, ``B``,
            or a curve the model or the forecast method cannot use.
    """
    from phenomenology.fit import PAPER_TASK, check_curve, check_forecast_method

    for key in task_set:
        if key not in PAPER_TASK:
            raise ValueError(f"--set {key}: fit takes only the task parameters L, N and B")
    sources = []
    for spec in paths:
        path = Path(spec)
        from interp.io.curves import check_curve as check_rows

        if path.is_dir():
            src = _run_source(path, task_set, optimizer)
            # metrics.csv: empty where not evaluated, but not throughout; nothing infinite or huge
            check_rows(src.curve, [column, *aux], src.source, gaps=True)
        elif path.is_file():
            src = _csv_source(path, task_set, optimizer)
            check_rows(src.curve, [column, *aux], src.source)  # steps out of order, NaN, inf
        else:
            raise ValueError(f"{path}: no such run directory or CSV file")
        if json_out:
            src.out = Path(json_out)
        check_curve(
            src.curve,
            task=src.task,
            model=model,
            column=column,
            target=target,
            aux=tuple(aux),
            options=options,
            source=src.source,
        )
        check_forecast_method(
            src.curve,
            method=method,
            progress_column=progress_column,
            optimizer=src.optimizer,
            source=src.source,
        )
        sources.append(src)
    return sources
