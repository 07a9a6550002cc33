"""Sweeps: one run per point of a grid of task, model and training parameters, times seeds.

A sweep is a base preset, a grid (config field -> values, fields addressed as ``--set`` addresses
them: ``K``, ``B``, ``eps``, ``lr``, ``task.N``, ...), overrides applied to every point, and seeds.
Its points are the Cartesian product of the grid's values and the seeds. Every point is validated
before any training starts, and trains into its own run directory under the sweep's folder::

    sweep/
      sweep.json              the sweep: spec and every point's configs (a rerun must match it)
      status.json             how each point last ended (done / failed with the error / interrupted)
      summary.csv             one row per point: grid values, seed, final accuracies, transition
      summary_over_seeds.csv  mean and std over seeds for each grid point
      figures/phase_diagram.{png,pdf,html,csv}
      K=128_B=0_seed=0/       a run directory (docs/CONTRACT.md), one per point
      ...

Running a sweep again resumes it: finished points are skipped, interrupted ones continue from
their resume state (``train(..., resume=True)``), the rest start.

Two conventions of the grid:

- A value that names another config field is a reference: ``{"N": (2, 4, 8), "L": ("N", 32)}``
  gives the points with ``L = N`` and those with ``L = 32`` (the paper's L = N experiment). The
  point's name and the summary keep the name (``L=N``).
- ``B = 0`` means no bursty sequences (docs/science.md section 1): such a point gets
  ``p_B = p_C = 0`` unless the grid itself sets them.

Backends: ``process`` (a local process pool, the default), ``serial`` (in this process, for
debugging) and ``ray`` (a Ray cluster, or a local Ray instance; ``pip install
'induction-cliff[ray]'``). With Ray on several machines the sweep folder must be on a file system
that every node sees, and the package must be installed on every node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from interp.data.task import TaskConfig
from interp.io import checkpoints
from interp.io.paths import check_no_links
from interp.io.rundir import (
    LOCK_NAME,
    RunDirectoryError,
    RunLock,
    classify,
    read_config,
    read_metrics,
    remove_run_files,
)
from interp.model.network import ModelConfig, canonical_model_dict
from interp.model.positional import positional_parameters
from interp.train.sweep_backends import (
    import_ray,
    run_job,
    run_point,
    run_process,
    run_ray,
    run_serial,
    stack_jobs,
    steps_done,
)
from interp.train.training import TrainConfig

_log = logging.getLogger(__name__)

__all__ = [
    "SweepSpec",
    "SweepPoint",
    "SweepDirectoryError",
    "BACKENDS",
    "run_sweep",
    "run_point",
    "run_job",
    "stack_jobs",
    "summarize_sweep",
    "aggregate_seeds",
    "write_summary",
    "write_sweep_figures",
    "load_manifest",
    "parse_grid",
    "parse_seeds",
]

BACKENDS = ("process", "serial", "ray")
MANIFEST = "sweep.json"
STATUS = "status.json"
SUMMARY = "summary.csv"
SUMMARY_OVER_SEEDS = "summary_over_seeds.csv"
FORMAT_VERSION = 1
# Train fields that may differ between two runs of one sweep, as between a run and its resumption
# (interp.train.training lets exactly these change when resuming): more steps extend every point.
_FREE_TRAIN_FIELDS = ("steps", "device", "num_threads")
# Final metrics reported per point, and the transition of IC accuracy (interp.analysis.transition).
_FINAL_METRICS = ("ic_acc", "ic2_acc", "iw_acc")
_TRANSITION_COLUMNS = (
    "transition_step",
    "transition_width",
    "plateau_level",
    "plateau_measured",
    "plateau_length",
)


class SweepDirectoryError(RunDirectoryError):
    """The sweep folder holds a different sweep (or a run directory with another config), is not
    a sweep folder, or is being written by another process."""


# ---------------------------------------------------------------------------------------------
# the spec and its points


def _config_fields() -> dict[str, dict]:
    """Field name -> default value, per config group, as ``--set`` addresses them."""
    derived = {"n_positions", "n_ctx_train"}  # the model's D and L follow the task
    return {
        "task": {f.name: f.default for f in dataclasses.fields(TaskConfig)},
        "train": {f.name: f.default for f in dataclasses.fields(TrainConfig)},
        "model": {
            f.name: f.default
            for f in dataclasses.fields(ModelConfig)
            if f.name not in derived | {"D", "L", "positional_config"}
        }
        | {flat: default for flat, (_, _, default) in positional_parameters().items()},
    }


def _check_field(key: str, where: str) -> None:
    """A ValueError unless ``key`` names a config field as ``--set`` does (and is not the seed)."""
    groups = _config_fields()
    group, _, name = key.rpartition(".")
    if name == "seed":
        raise ValueError(f"SweepSpec.{where} cannot hold 'seed': give the seeds as seeds=")
    allowed = sorted(set().union(*groups.values()) - {"seed"})
    if (group and (group not in groups or name not in groups[group])) or name not in allowed:
        raise ValueError(
            f"SweepSpec.{where} field {key!r} is unknown: allowed fields are {allowed}"
        )


def _bare(key: str) -> str:
    """``"task.K"`` -> ``"K"``."""
    return key.rpartition(".")[2]


def _config_value(configs: tuple, key: str):
    """The value of ``key`` in ``(task, model, train)``, found as ``--set`` finds it."""
    task, model, train = configs
    group, _, name = key.rpartition(".")
    by_group = {"task": task, "train": train, "model": model}
    for g in [by_group[group]] if group else [task, train, model]:
        if hasattr(g, name):
            return getattr(g, name)
    raise KeyError(key)


def _fmt(value) -> str:
    """A value as it appears in a point's directory name."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return "".join(c if c.isalnum() or c in ".+-" else "-" for c in text)


def _plain(value):
    """numpy scalars -> Python scalars (for JSON and stable comparison)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep: grid values, seed and the configs to train.

    Attributes:
        name: the run directory's name, e.g. ``K=128_B=0_seed=0``.
        values: grid field -> value at this point (a reference keeps its name: ``{"L": "N"}``).
        seed: the run's seed.
        task: the task.
        model: the network.
        train: optimiser and schedule.
    """

    name: str
    values: dict
    seed: int
    task: TaskConfig
    model: ModelConfig
    train: TrainConfig

    def configs_dict(self) -> dict:
        """The point's configs as ``config.json`` writes them."""
        return {
            "task": self.task.to_dict(),
            "model": self.model.to_dict(),
            "train": dataclasses.asdict(self.train),
        }


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A sweep: a base preset, a grid over config fields, overrides for every point, and seeds.

    Attributes:
        preset: name of the base preset (:data:`interp.train.presets.PRESETS`).
        grid: config field -> values; fields are addressed as ``--set`` addresses them (``K``,
            ``train.lr``). A value that names another config field is a reference (``"L": ("N",
            32)``). An empty grid sweeps the seeds of the preset's one config.
        overrides: ``--set`` overrides applied to every point, as strings (``{"steps": "3000"}``).
        seeds: the seeds; every grid point runs once per seed.
    """

    preset: str
    grid: Mapping[str, Sequence] = field(default_factory=dict)
    overrides: Mapping[str, str] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        grid = {}
        for key, values in dict(self.grid).items():
            _check_field(str(key), "grid")
            if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
                raise ValueError(
                    f"SweepSpec.grid[{key!r}]={values!r} is invalid: must be a list of values"
                )
            values = tuple(_plain(v) for v in values)
            if not values:
                raise ValueError(f"SweepSpec.grid[{key!r}] is empty: give at least one value")
            if len(set(map(repr, values))) < len(values):
                raise ValueError(f"SweepSpec.grid[{key!r}]={list(values)} repeats a value")
            grid[str(key)] = values
        bare = [_bare(k) for k in grid]
        if len(set(bare)) < len(bare):
            raise ValueError(f"SweepSpec.grid names a field twice: {list(grid)}")
        overrides = {str(k): str(v) for k, v in dict(self.overrides).items()}
        for key in overrides:
            _check_field(key, "overrides")
        seeds = tuple(int(s) for s in self.seeds)
        if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) < len(seeds):
            raise ValueError(
                f"SweepSpec.seeds={list(self.seeds)} is invalid: non-negative, distinct, at least one"
            )
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "overrides", overrides)
        object.__setattr__(self, "seeds", seeds)

    @classmethod
    def from_preset(
        cls,
        preset: str,
        grid: Mapping[str, Sequence] | None = None,
        overrides: Mapping[str, str] | None = None,
        seeds: Sequence[int] | None = None,
    ) -> SweepSpec:
        """The sweep of a preset: its grid with the axes in ``grid`` replaced or added, its seeds
        unless ``seeds`` is given. An axis whose field ``overrides`` sets is dropped (the override
        fixes it)."""
        from interp.train.presets import get_preset

        p = get_preset(preset)
        grid = dict(grid or {})
        overrides = dict(overrides or {})
        given = {_bare(k): (k, v) for k, v in grid.items()}
        # The preset's axes keep their order (the figure's x and y); new ones come after.
        merged = dict(given.pop(_bare(k), (k, v)) for k, v in p.grid.items())
        merged.update(dict(given.values()))
        fixed = set(map(_bare, overrides))
        merged = {k: v for k, v in merged.items() if _bare(k) not in fixed}
        return cls(
            preset=preset,
            grid=merged,
            overrides=overrides,
            seeds=tuple(seeds) if seeds is not None else p.seeds,
        )

    @property
    def fields(self) -> list[str]:
        """The grid's fields (bare names), in grid order: the summary's columns and the axes."""
        return [_bare(k) for k in self.grid]

    def to_dict(self) -> dict:
        """JSON-serialisable form (``sweep.json``)."""
        return {
            "preset": self.preset,
            # pairs, not a mapping: the order of the fields is the figure's x and y
            "grid": [[k, list(v)] for k, v in self.grid.items()],
            "overrides": dict(self.overrides),
            "seeds": list(self.seeds),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> SweepSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(
            preset=d["preset"],
            grid=dict(d.get("grid", [])),
            overrides=d.get("overrides", {}),
            seeds=tuple(d.get("seeds", (0,))),
        )

    def points(self) -> list[SweepPoint]:
        """Every point's configs, validated, in grid order (the last field varies fastest, seeds
        innermost).

        Raises:
            ValueError: the base preset and overrides are invalid, or some points are (the
                message names each such point, the field and the allowed values).
        """
        from interp.train.overrides import build_configs

        # The preset's own configs: the type of each field, and what a reference falls back to.
        base = build_configs(self.preset, {}, None)[:3]
        groups = _config_fields()
        every_field = set().union(*groups.values())
        points, errors = [], []
        keys = list(self.grid)
        for combo in itertools.product(*self.grid.values()):
            assigned = dict(zip(keys, combo))
            label = ", ".join(f"{_bare(k)}={_fmt(v)}" for k, v in assigned.items())
            try:
                overrides = self._point_overrides(assigned, base, every_field)
            except ValueError as err:
                errors.append(f"point {label or '(base)'}: {err}")
                continue
            for seed in self.seeds:
                where = f"point {label + ', ' if label else ''}seed={seed}"
                try:
                    task, model, train, _ = build_configs(self.preset, overrides, seed)
                except ValueError as err:
                    errors.append(f"{where}: {err}")
                    continue
                configs = (task, model, train)
                values = {
                    _bare(k): v
                    if self._is_reference(k, v, base, every_field)
                    else _plain(_config_value(configs, k))
                    for k, v in assigned.items()
                }
                name = "_".join([*(f"{k}={_fmt(v)}" for k, v in values.items()), f"seed={seed}"])
                points.append(SweepPoint(name, values, seed, task, model, train))
        if errors:
            # One line (the CLI shows one line per failure): the first points' errors, joined.
            shown = "; ".join(errors[:3])
            more = f"; ... and {len(errors) - 3} more" if len(errors) > 3 else ""
            raise ValueError(
                f"sweep of preset {self.preset!r}: {len(errors)} invalid point(s), nothing was "
                f"trained: {shown}{more}"
            )
        names = [p.name for p in points]
        if len(set(names)) < len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"sweep grid gives several points the same values: {dup[:5]}")
        return points

    @staticmethod
    def _is_reference(key: str, value, base: tuple, every_field: set) -> bool:
        """A string value naming a config field, for a field that does not hold strings."""
        if not isinstance(value, str) or value.rpartition(".")[2] not in every_field:
            return False
        return not isinstance(_config_value(base, key), str)

    def _point_overrides(self, assigned: dict, base: tuple, every_field: set) -> dict[str, str]:
        """The ``--set`` overrides of one grid point: references resolved, B = 0 made consistent."""
        by_bare = {_bare(k): v for k, v in assigned.items()}
        overrides = dict(self.overrides)
        for key, value in assigned.items():
            if self._is_reference(key, value, base, every_field):
                ref = value
                if _bare(ref) == _bare(key):
                    raise ValueError(f"{key}={ref!r} refers to itself")
                if _bare(ref) in by_bare:
                    value = by_bare[_bare(ref)]
                    if self._is_reference(ref, value, base, every_field):
                        raise ValueError(f"{key}={ref!r} refers to another reference ({value!r})")
                else:
                    over = {_bare(k): v for k, v in self.overrides.items()}
                    value = over.get(_bare(ref), _config_value(base, ref))
            overrides[key] = str(value)
        fixed = set(map(_bare, self.grid))
        effective_b = {_bare(k): v for k, v in overrides.items()}.get("B", base[0].B)
        if _is_zero(effective_b):
            # docs/science.md section 1: B = 0 means "no bursty sequences" (p_B = 0); novel
            # sequences are bursty too.
            for name in ("p_B", "p_C"):
                if name not in fixed:
                    overrides = {k: v for k, v in overrides.items() if _bare(k) != name}
                    overrides[name] = "0"
        return overrides


def _is_zero(value) -> bool:
    try:
        return float(value) == 0
    except (TypeError, ValueError):
        return False


def parse_grid(pairs: Sequence[str]) -> dict[str, list[str]]:
    """``["K=128,256", "L=N,32"]`` -> ``{"K": ["128", "256"], "L": ["N", "32"]}``.

    Values stay strings; each point converts them to the field's type as ``--set`` does.
    """
    grid = {}
    for pair in pairs:
        key, sep, values = pair.partition("=")
        items = [v.strip() for v in values.split(",")]
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"--grid {pair!r} is invalid: expected field=value1,value2,...")
        if "" in items:
            raise ValueError(f"--grid {pair!r} is invalid: value {items.index('') + 1} is empty")
        if len(set(items)) != len(items):
            raise ValueError(f"--grid {pair!r} is invalid: a value is repeated")
        grid[key.strip()] = items
    return grid


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0,1"``, ``"0-5"`` or ``"0-2,7"`` -> a tuple of seeds."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            if dash:
                if int(hi) < int(lo):
                    raise ValueError
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise ValueError(
            f"--seeds {text!r} is invalid: expected e.g. 0,1 or 0-5 or 0-2,7"
        ) from None
    if not seeds:
        raise ValueError(f"--seeds {text!r} is invalid: no seed given")
    return tuple(seeds)


# ---------------------------------------------------------------------------------------------
# the sweep folder


def _manifest(spec: SweepSpec, points: Sequence[SweepPoint]) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "spec": spec.to_dict(),
        "points": [
            {"name": p.name, "values": p.values, "seed": p.seed, **p.configs_dict()} for p in points
        ],
    }


def load_manifest(out_dir: str | os.PathLike) -> dict:
    """The ``sweep.json`` of a sweep folder.

    Raises:
        SweepDirectoryError: the folder holds no sweep.
    """
    path = Path(out_dir) / MANIFEST
    if not path.exists():
        raise SweepDirectoryError(f"{out_dir} is not a sweep folder (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SweepDirectoryError(f"{path} is not valid JSON ({err})") from None
    points = manifest.get("points") if isinstance(manifest, dict) else None
    if not isinstance(points, list) or not isinstance(manifest.get("spec"), dict):
        raise SweepDirectoryError(f"{path}: the fields 'spec' and 'points' are missing or invalid")
    for i, p in enumerate(points):
        name = p.get("name") if isinstance(p, dict) else None
        point_dir(Path(out_dir), name, where=f"{path}: points[{i}].name")
    return manifest


_POINT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+,-]*$")


def point_dir(out: Path, name, where: str = "point name") -> Path:
    """The run directory of the point ``name`` inside the sweep folder ``out``.

    Names are read from disk (``sweep.json``), so each is checked to be one plain path component
    that stays inside ``out``: a name such as ``../victim`` or ``/home/x`` is refused, never
    followed.

    Raises:
        SweepDirectoryError: the name is not a plain point name.
    """
    if not isinstance(name, str) or not _POINT_NAME.match(name) or name in (".", ".."):
        raise SweepDirectoryError(
            f"{where}={name!r} is invalid: a point name is one plain folder name inside the sweep"
        )
    path = out / name
    if path.resolve().parent != out.resolve():
        raise SweepDirectoryError(f"{where}={name!r} resolves outside {out}; refused")
    check_no_links(out, name)  # a point folder that is a link would take writes elsewhere
    return path


def _comparable(configs: Mapping) -> dict:
    train = {k: v for k, v in configs.get("train", {}).items() if k not in _FREE_TRAIN_FIELDS}
    model = canonical_model_dict(configs.get("model"))  # an old config.json's flat rope_* too
    return {"task": configs.get("task"), "model": model, "train": train}


def _first_difference(a: Mapping, b: Mapping) -> str:
    for group in ("task", "model", "train"):
        ga, gb = a.get(group) or {}, b.get(group) or {}
        for k in sorted(set(ga) | set(gb)):
            if ga.get(k) != gb.get(k):
                return f"{group}.{k} {ga.get(k)!r} there, {gb.get(k)!r} here"
    return "the same configs"


def _check_manifest(out: Path, old: dict, new: dict) -> None:
    old_points = {p["name"]: p for p in old.get("points", [])}
    new_points = {p["name"]: p for p in new["points"]}
    spec = old.get("spec", {})
    grid = dict(spec.get("grid", []))
    said = (
        f"{out} holds a different sweep (preset {spec.get('preset')!r}, grid {grid}, "
        f"seeds {spec.get('seeds')}, --set {spec.get('overrides')})"
    )
    hint = (
        "rerun that sweep's command (or `induction-cliff sweep --out DIR`) to resume it, choose "
        "another --out, or pass --overwrite to delete its runs and start again"
    )
    if list(old_points) != list(new_points):
        gone = [n for n in old_points if n not in new_points]
        added = [n for n in new_points if n not in old_points]
        raise SweepDirectoryError(
            f"{said}: its points differ (only there: {gone[:3]}, only here: {added[:3]}); {hint}"
        )
    for name, p in new_points.items():
        if _comparable(old_points[name]) != _comparable(p):
            diff = _first_difference(_comparable(old_points[name]), _comparable(p))
            raise SweepDirectoryError(f"{said}: point {name} differs ({diff}); {hint}")


def _check_run_dirs(out: Path, points: Sequence[SweepPoint]) -> None:
    """Existing run directories must hold the point's run (a resumption changes nothing else)."""
    for p in points:
        run_dir = point_dir(out, p.name)
        what = classify(run_dir)
        if what in ("absent", "empty"):
            continue
        if what != "run":
            raise SweepDirectoryError(
                f"{run_dir} is not a run directory of this sweep ({what}); move it away, or pass "
                "--overwrite to delete the sweep's runs"
            )
        there, _ = read_config(run_dir / "config.json")
        if _comparable(there) != _comparable(p.configs_dict()):
            raise SweepDirectoryError(
                f"{out / p.name} holds a run with a different config "
                f"({_first_difference(_comparable(there), _comparable(p.configs_dict()))}); "
                "pass --overwrite to start the sweep again, or choose another --out"
            )


def _remove_sweep(out: Path, names: Sequence[str]) -> None:
    """Delete what a sweep wrote into ``out``: the run files of its points' run directories (a
    point directory that is not a run is left alone), its own files and its figures. Every name
    is checked by :func:`point_dir` first, so nothing outside ``out`` is touched."""
    dirs = [point_dir(out, name) for name in names]  # all checked before anything is deleted
    for name in (MANIFEST, STATUS, SUMMARY, SUMMARY_OVER_SEEDS, "figures"):
        check_no_links(out, name)  # a link is refused, never followed nor deleted
    for run_dir in dirs:
        if classify(run_dir) in ("run", "broken"):
            remove_run_files(run_dir)
            with contextlib.suppress(OSError):
                if (run_dir / LOCK_NAME).is_file():
                    (run_dir / LOCK_NAME).unlink()
                run_dir.rmdir()  # only if nothing else is left in it
    for name in (MANIFEST, STATUS, SUMMARY, SUMMARY_OVER_SEEDS):
        path = out / name
        if path.is_symlink() or path.is_file():
            path.unlink()
    figures = out / "figures"
    if figures.is_dir() and not figures.is_symlink():
        for p in figures.iterdir():
            if p.name.startswith("phase_diagram") and (p.is_file() or p.is_symlink()):
                p.unlink()
        with contextlib.suppress(OSError):
            figures.rmdir()


def _prepare(out: Path, spec: SweepSpec, points: Sequence[SweepPoint], overwrite: bool) -> None:
    new = _manifest(spec, points)
    if out.exists() and not (out / MANIFEST).exists():
        _prepare_check_foreign(out, points)
    if overwrite and (out / MANIFEST).exists():
        old_names = [p["name"] for p in load_manifest(out).get("points", [])]
        _remove_sweep(out, [*old_names, *(p.name for p in points)])
    elif (out / MANIFEST).exists():
        _check_manifest(out, load_manifest(out), new)
    _check_run_dirs(out, points)
    out.mkdir(parents=True, exist_ok=True)
    checkpoints.write_text_atomic(out / MANIFEST, json.dumps(new, indent=1) + "\n")


def _read_status(out: Path) -> dict:
    path = out / STATUS
    return json.loads(path.read_text()) if path.exists() else {}


# ---------------------------------------------------------------------------------------------
# the driver


def run_sweep(
    spec: SweepSpec,
    out_dir: str | os.PathLike,
    *,
    backend: str = "process",
    workers: int | None = None,
    threads_per_worker: int = 1,
    stack: int = 1,
    ray_address: str | None = None,
    overwrite: bool = False,
    figures: bool = True,
    formats: Sequence[str] = ("png", "pdf", "html"),
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run every point of a sweep that is not finished, then write the summary and the figure.

    Args:
        spec: the sweep.
        out_dir: the sweep folder (one run directory per point inside).
        backend: ``process`` (local process pool), ``serial`` (this process) or ``ray``.
        workers: concurrent runs (default ``os.cpu_count() // threads_per_worker``); with Ray,
            the CPUs of the local instance it starts (ignored on an existing cluster).
        threads_per_worker: torch CPU threads of each run (Ray: CPUs reserved per task).
        stack: train up to this many seeds of one config together in one worker
            (:func:`interp.train.training.train_many`; the run directories are the same). On a 2-core
            CPU it adds ~5-8% to one-model-per-process workers; on a GPU it is the main lever
            (``benchmarks/bench_many.py``). Configs that cannot stack train alone.
        ray_address: address of a running Ray cluster (default: the one this process is connected
            to, or a new local instance).
        overwrite: delete what a previous sweep wrote into ``out_dir`` and start again.
        figures: write the phase-diagram figure into ``out_dir/figures``.
        formats: figure formats (static ones fall back to HTML, with a warning, without Chromium).
        log: where progress lines go (default: the ``interp.train.sweep`` logger at INFO, which the
            command line shows on standard error).

    Returns:
        The summary (see :func:`summarize_sweep`), also written to ``summary.csv``.

    Raises:
        ValueError: an invalid point (before anything is trained) or argument.
        SweepDirectoryError: ``out_dir`` holds a different sweep and ``overwrite`` is False.
        KeyboardInterrupt: on Ctrl-C, after every running point saved its state and the summary
            was written; running the sweep again resumes it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: allowed values are {BACKENDS}")
    if not (isinstance(threads_per_worker, int) and threads_per_worker >= 1):
        raise ValueError(f"threads_per_worker={threads_per_worker!r} is invalid: must be >= 1")
    if not (isinstance(stack, int) and stack >= 1):
        raise ValueError(f"stack={stack!r} is invalid: must be an integer >= 1")
    if workers is not None and not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is invalid: must be >= 1 or None")
    if backend == "ray":
        import_ray()  # fail before writing anything
    log = log or _log.info  # the CLI shows interp's INFO lines on stderr
    out = Path(out_dir)
    points = spec.points()  # validates every point before any work
    if backend != "ray":  # a Ray cluster's workers may have a device this driver lacks
        from interp.train.training import check_device

        for train in {p.train.device: p.train for p in points}.values():  # one per device
            check_device(train)
    if out.exists() and not out.is_dir():
        raise SweepDirectoryError(f"{out} exists and is not a directory")
    if out.is_dir() and not (out / MANIFEST).exists():
        _prepare_check_foreign(out, points)  # refused before even the lock file is made
    out.mkdir(parents=True, exist_ok=True)
    # One sweep driver per folder; each point's run directory has its own lock too.
    with RunLock(out):
        return _run_sweep_locked(
            spec,
            out,
            points,
            backend,
            workers,
            threads_per_worker,
            stack,
            ray_address,
            overwrite,
            figures,
            formats,
            log,
        )


def _prepare_check_foreign(out: Path, points: Sequence[SweepPoint] = ()) -> None:
    """Refuse a non-empty folder that is not a sweep: only the lock file and this sweep's own
    point directories (checked by :func:`_check_run_dirs`) may be there already."""
    mine = {p.name for p in points}
    others = sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME and p.name not in mine)
    if others:
        raise SweepDirectoryError(
            f"{out} is not empty and is not a sweep folder (no {MANIFEST}; it holds "
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); nothing was "
            "written: choose a new or empty --out"
        )


def _run_sweep_locked(
    spec,
    out,
    points,
    backend,
    workers,
    threads_per_worker,
    stack,
    ray_address,
    overwrite,
    figures,
    formats,
    log,
) -> pd.DataFrame:
    _prepare(out, spec, points, overwrite)

    todo, n_resume = [], 0
    for p in points:
        if steps_done(out / p.name) >= p.train.steps:
            continue
        todo.append(p)
        n_resume += (out / p.name / "checkpoints" / checkpoints.RESUME_NAME).exists()
    status = _read_status(out)
    for p in points:
        if p not in todo:
            status[p.name] = {"status": "done", "action": "skipped", "error": ""}
    jobs = stack_jobs(todo, stack)
    workers = max(1, workers or (os.cpu_count() or 1) // threads_per_worker)
    if backend == "process":
        workers = min(workers, max(1, len(jobs)))
    where = {
        "process": f"{workers} worker process(es) x {threads_per_worker} thread(s)",
        "serial": "this process",
        "ray": f"Ray ({ray_address or 'local or connected'}), {threads_per_worker} CPU(s) per run",
    }[backend]
    log(
        f"sweep {out}: {len(points)} point(s); {len(points) - len(todo)} finished (skipped), "
        f"{n_resume} to resume, {len(todo) - n_resume} to train; on {where}"
        + (f", in {len(jobs)} job(s) of up to {stack} stacked seeds" if stack > 1 else "")
    )

    done_count = 0

    def on_result(result: dict) -> None:
        nonlocal done_count
        done_count += 1
        status[result["name"]] = {k: result[k] for k in ("status", "action", "error", "seconds")}
        checkpoints.write_json_atomic(out / STATUS, status)
        said = {"done": "done", "failed": "FAILED", "interrupted": "interrupted"}[result["status"]]
        extra = f": {result['error']}" if result["error"] else ""
        seconds = result["seconds"]
        took = (
            f" in {seconds:.0f} s" if isinstance(seconds, float) and math.isfinite(seconds) else ""
        )
        if result["status"] == "interrupted":
            said = f"interrupted, state saved (metrics up to step {result['steps_done']})"
        else:
            said = f"{result['action']}, {said} at step {result['steps_done']}{took}{extra}"
        log(f"[{done_count}/{len(todo)}] {result['name']}: {said}")

    checkpoints.write_json_atomic(out / STATUS, status)
    interrupted = False
    if todo:
        if backend == "serial":
            interrupted = run_serial(jobs, out, threads_per_worker, on_result)
        elif backend == "process":
            interrupted = run_process(jobs, out, workers, threads_per_worker, on_result)
        else:
            interrupted = run_ray(jobs, out, workers, threads_per_worker, ray_address, on_result)
    summary = summarize_sweep(out)
    written = write_summary(out, summary)
    log(f"wrote {', '.join(str(p) for p in written)}")
    if interrupted:
        log(
            f"interrupted: every running point saved its state. Resume with the same command "
            f"(or `induction-cliff sweep --out {out}`); finished points are skipped."
        )
        raise KeyboardInterrupt
    failed = summary[summary["status"] == "failed"]
    if len(failed):
        log(f"{len(failed)} point(s) failed (the others went on): {list(failed['point'])}")
    if figures:
        for path in write_sweep_figures(out, summary, formats, log=log):
            log(f"wrote {path}")
    return summary


# ---------------------------------------------------------------------------------------------
# summary and figure


def summarize_sweep(out_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per point of the sweep in ``out_dir``, from what is on disk.

    Returns:
        Columns ``point``, the grid fields, ``seed``, ``steps`` (configured), ``steps_done``,
        final ``ic_acc``, ``ic2_acc``, ``iw_acc``, the transition of IC accuracy
        (:func:`interp.analysis.transition.detect_transition`): ``transition_step``, ``transition_width``,
        ``plateau_level`` (the logistic's floor), ``plateau_measured`` (median IC accuracy over the
        last 20% of the plateau), ``plateau_length`` (NaN without a transition) and
        ``transition_reason`` (why not, else empty), then ``status`` (``done``, ``failed``,
        ``interrupted``, ``partial`` or ``pending``) and ``error``.
    """
    from interp.analysis.transition import detect_transition

    out = Path(out_dir)
    manifest = load_manifest(out)
    fields = SweepSpec.from_dict(manifest["spec"]).fields
    status = _read_status(out)
    rows = []
    for p in manifest["points"]:
        run_dir = point_dir(out, p["name"])
        steps = int(p["train"]["steps"])
        row = {"point": p["name"], **{f: p["values"].get(f) for f in fields}, "seed": p["seed"]}
        row |= {"steps": steps, "steps_done": 0}
        row |= {m: float("nan") for m in (*_FINAL_METRICS, *_TRANSITION_COLUMNS)}
        row["transition_reason"] = "no metrics yet"
        metrics = read_metrics(run_dir / "metrics.csv").frame
        if len(metrics):
            last = metrics.iloc[-1]
            row["steps_done"] = int(metrics["step"].max())
            row |= {m: float(last[m]) for m in _FINAL_METRICS if m in metrics}
            r = detect_transition(metrics["step"], metrics["ic_acc"])
            row["transition_reason"] = r.reason
            if r.transitioned:
                row |= {
                    "transition_step": r.step,
                    "transition_width": r.width,
                    "plateau_level": r.plateau_level,
                    "plateau_measured": r.plateau_measured,
                    "plateau_length": r.plateau_length,
                }
        said = status.get(p["name"], {})
        if row["steps_done"] >= steps:
            row["status"], row["error"] = "done", ""
        elif said.get("status") in ("failed", "interrupted"):
            row["status"], row["error"] = said["status"], said.get("error", "")
        else:
            row["status"], row["error"] = ("partial" if len(metrics) else "pending"), ""
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate_seeds(summary: pd.DataFrame, fields: Sequence[str]) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each grid point of a :func:`summarize_sweep`.

    Args:
        summary: the per-point summary.
        fields: the grid fields (the grouping columns; none: one row over all seeds).

    Returns:
        The fields, ``n_seeds``, ``n_done``, ``n_transitioned``, then ``<metric>_mean`` and
        ``<metric>_std`` for ``steps_done``, the final accuracies and the transition columns
        (std is NaN for one seed; transition columns average the seeds that transitioned).
    """
    fields = list(fields)
    numeric = ["steps_done", *_FINAL_METRICS, *_TRANSITION_COLUMNS]
    groups = summary.groupby(fields, sort=False, dropna=False) if fields else [((), summary)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(fields, key))
        row |= {
            "n_seeds": len(g),
            "n_done": int((g["status"] == "done").sum()),
            "n_transitioned": int(g["transition_step"].notna().sum()),
        }
        for m in numeric:
            values = pd.to_numeric(g[m], errors="coerce")
            row[f"{m}_mean"] = float(values.mean()) if values.notna().any() else float("nan")
            row[f"{m}_std"] = float(values.std()) if values.notna().sum() > 1 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def write_summary(out_dir: str | os.PathLike, summary: pd.DataFrame | None = None) -> list[Path]:
    """Write ``summary.csv`` and ``summary_over_seeds.csv`` (rebuilt from disk if not given)."""
    out = Path(out_dir)
    summary = summarize_sweep(out) if summary is None else summary
    fields = SweepSpec.from_dict(load_manifest(out)["spec"]).fields
    paths = [out / SUMMARY, out / SUMMARY_OVER_SEEDS]
    checkpoints.write_text_atomic(paths[0], summary.to_csv(index=False))
    checkpoints.write_text_atomic(paths[1], aggregate_seeds(summary, fields).to_csv(index=False))
    return paths


def _figure_note(out: Path, manifest: dict, summary: pd.DataFrame) -> tuple[str, str]:
    """Title and note (deviations from the paper) of a sweep's figure."""
    from interp.train.training import load_run
    from interp.viz.figures import run_note

    spec = manifest["spec"]
    notes = []
    for p in manifest["points"]:
        if (out / p["name"] / "config.json").exists():
            note = run_note(load_run(out / p["name"]))
            if note and note not in notes:
                notes.append(note)
    steps = sorted({int(p["train"]["steps"]) for p in manifest["points"]})
    steps_text = f"{steps[0]} steps" if len(steps) == 1 else "steps per grid point"
    from interp.train.presets import PAPER_TRAIN

    if max(steps) < PAPER_TRAIN.steps:  # every point stopped before the paper's length
        steps_text += f" (paper: {PAPER_TRAIN.steps:.0e})".replace("e+0", "e")
    seeds = spec.get("seeds", [])
    seeds_text = f"mean over {len(seeds)} seeds" if len(seeds) > 1 else f"seed {seeds[0]}"
    unfinished = int((summary["status"] != "done").sum())
    title = f"{spec['preset']}: final accuracy after {steps_text}, {seeds_text}"
    if unfinished:
        title += f" ({unfinished} of {len(summary)} runs unfinished)"
    if len(notes) > 2:
        notes = ["optimiser or encoding varies over the grid"]
    return title, "; ".join(notes)


def write_sweep_figures(
    out_dir: str | os.PathLike,
    summary: pd.DataFrame | None = None,
    formats: Sequence[str] = ("png", "pdf", "html"),
    *,
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the sweep's phase-diagram figure(s) into ``out_dir/figures`` (and their CSV).

    A 2-D grid gives heatmaps of final IC and IW accuracy; a 1-D grid, IC / IC2 / IW accuracy
    against the field with the spread over seeds; a larger grid, one 2-D diagram per value of the
    other fields. A grid of seeds only has no diagram. Without Chromium, static formats are
    skipped with a warning and HTML is written instead.

    Returns:
        The paths written.
    """
    from interp.viz.export import export_figure
    from interp.viz.sweep_plots import plot_sweep

    log = log or _log.info  # the CLI shows interp's INFO lines on stderr
    out = Path(out_dir)
    manifest = load_manifest(out)
    summary = summarize_sweep(out) if summary is None else summary
    fields = SweepSpec.from_dict(manifest["spec"]).fields
    # each field's values in grid order, as the points hold them (typed; references by name)
    order = {f: list(dict.fromkeys(p["values"][f] for p in manifest["points"])) for f in fields}
    have = summary[summary["ic_acc"].notna()]
    if not fields or have.empty:
        log("no phase diagram: " + ("the grid has no field" if not fields else "no metrics yet"))
        return []
    title, note = _figure_note(out, manifest, summary)
    panels = [((), have)]
    if len(fields) > 2:
        rest = fields[2:]
        panels = [
            (key if isinstance(key, tuple) else (key,), g)
            for key, g in have.groupby(rest, sort=False, dropna=False)
        ]
    written = []
    for key, part in panels:
        suffix = "".join(f"_{f}={_fmt(v)}" for f, v in zip(fields[2:], key))
        where = ", ".join(f"{f}={v}" for f, v in zip(fields[2:], key))
        fig = plot_sweep(
            part,
            fields[:2],
            order=order,
            title=f"{title}{' at ' + where if where else ''}",
            note=note or None,
        )
        stem = out / "figures" / f"phase_diagram{suffix}"
        check_no_links(out, stem.relative_to(out))  # a linked figures/ is refused, not followed
        try:
            written += export_figure(fig, stem, formats)
        except RunDirectoryError:
            raise
        except RuntimeError as err:  # no Chromium for static formats: keep the interactive one
            log(f"warning: {err}; writing HTML only")
            written += export_figure(fig, stem, ("html",))
    return written
