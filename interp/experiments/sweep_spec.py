"""A sweep's spec and points (a base preset, a grid, overrides and seeds; every point's
configs validated before anything trains) and its folder's ``sweep.json`` and ``status.json``
(:mod:`interp.experiments.sweep` runs them, :mod:`interp.experiments.sweep_summary` summarises
and draws them)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.io.errors import ResourceError
from interp.io.paths import check_no_links
from interp.io.rundir import (
    RunDirectoryError,
)
from interp.model.network import ModelConfig
from interp.model.positional import positional_parameters

BACKENDS = ("process", "serial", "ray", "submitit")
MANIFEST = "sweep.json"
STATUS = "status.json"
SUMMARY = "summary.csv"
SUMMARY_OVER_SEEDS = "summary_over_seeds.csv"
MAX_SEEDS = 10_000  # seeds of one sweep
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


__all__ = [
    "SweepSpec",
    "SweepPoint",
    "SweepDirectoryError",
    "BACKENDS",
    "load_manifest",
    "parse_grid",
    "parse_seeds",
    "point_dir",
]


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


def _refuse_clash(grid: Mapping, overrides: Mapping, grid_name: str, set_name: str) -> None:
    """A ValueError naming both when a grid axis and an override set one field."""
    fixed = {_bare(k): k for k in overrides}
    for key, values in grid.items():
        if _bare(key) in fixed:
            other = fixed[_bare(key)]
            shown = ",".join(map(str, values)) if isinstance(values, Sequence) else values
            raise ValueError(
                f"{grid_name} {key}={shown} and {set_name} {other}={overrides[other]} both set "
                f"{_bare(key)}: sweep it or fix it, not both"
            )


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
        _refuse_clash(grid, overrides, "SweepSpec.grid", "SweepSpec.overrides")
        whole = all(_is_whole(s) for s in self.seeds)  # 1.5 is refused, never read as 1
        seeds = tuple(int(s) for s in self.seeds) if whole else ()
        if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) < len(seeds):
            raise ValueError(
                f"SweepSpec.seeds={list(self.seeds)} is invalid: "
                "non-negative integers, distinct, at least one"
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
        unless ``seeds`` is given. An axis of the preset whose field ``overrides`` sets is dropped
        (the override fixes it); an axis in ``grid`` whose field ``overrides`` sets too is refused
        (which of the two the user meant is not known)."""
        from interp.train.presets import get_preset

        p = get_preset(preset)
        grid = dict(grid or {})
        overrides = dict(overrides or {})
        # The preset's own axes give way to an override; an axis the user asks for does not.
        _refuse_clash(grid, overrides, "--grid", "--set")
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
                except ResourceError as err:  # the machine's limit, not the point's: exit 5
                    raise ResourceError(
                        f"sweep of preset {self.preset!r}, {where}: {err}"
                    ) from None
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
        if key.strip() in grid:
            raise ValueError(
                f"--grid {key.strip()} is given twice: give all its values once "
                f"(--grid {key.strip()}=a,b,...)"
            )
        grid[key.strip()] = items
    return grid


def _is_whole(value) -> bool:
    """Whether ``value`` is an integer or a float with no fractional part (not a bool, not text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return float(value).is_integer()


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0,1"``, ``"0-5"`` or ``"0-2,7"`` -> a tuple of seeds (at most :data:`MAX_SEEDS`)."""
    seeds: list[int] = []
    too_many = ValueError(f"--seeds {text!r} is invalid: a sweep has at most {MAX_SEEDS} seeds")
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            if dash:
                if int(hi) < int(lo):
                    raise ValueError
                if len(seeds) + int(hi) - int(lo) + 1 > MAX_SEEDS:
                    raise too_many  # before the range is built
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError as err:
        if err is too_many:
            raise
        raise ValueError(
            f"--seeds {text!r} is invalid: expected e.g. 0,1 or 0-5 or 0-2,7"
        ) from None
    if len(seeds) > MAX_SEEDS:
        raise too_many
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
    from interp.io.inputs import read_json

    manifest = read_json(path)  # limits checked first; damaged: one line naming it (exit 3)
    points = manifest.get("points") if isinstance(manifest, dict) else None
    if not isinstance(points, list) or not isinstance(manifest.get("spec"), dict):
        raise SweepDirectoryError(f"{path}: the fields 'spec' and 'points' are missing or invalid")
    if not points:  # every sweep has a point: none is a damaged manifest, not an empty result
        raise SweepDirectoryError(f"{path}: field points is empty (a sweep has at least one)")
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


def _read_status(out: Path) -> dict:
    path = out / STATUS
    from interp.io.inputs import read_json

    return read_json(path, missing={})


# ---------------------------------------------------------------------------------------------
# the driver
