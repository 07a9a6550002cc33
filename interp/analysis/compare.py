"""Group runs by config, so that seeds are aggregated and different settings are compared.

Two run directories belong to one config when everything in their ``config.json`` agrees except
the seed (and the fields that do not change the mathematics of a run: ``train.device`` and
``train.num_threads``). Runs of one config are seeds of one experiment and may be averaged; runs
of different configs are drawn side by side, each labelled by the fields in which the configs
differ (``K=256`` against ``K=512``), and are never averaged together.

Used by ``induction-cliff figures``, ``transition`` and ``report`` (the comparison figures are
:mod:`interp.viz.compare_plots`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = [
    "IGNORED_FIELDS",
    "RunGroup",
    "config_fields",
    "group_runs",
    "group_mean",
]

logger = logging.getLogger(__name__)

# Fields that never split runs into different configs: the seed (that is what seeds of one config
# differ in) and fields that change where or how fast a run computes, not what it computes.
IGNORED_FIELDS = frozenset({"train.seed", "train.device", "train.num_threads"})


def config_fields(run) -> dict[str, object]:
    """A run's config as flat ``section.field`` -> value pairs (``task.K``, ``train.lr``, ...).

    Args:
        run: a :class:`interp.io.rundir.Run`.

    Returns:
        Every field of the task, model and train configs except :data:`IGNORED_FIELDS`.
    """
    sections = {
        "task": run.task.to_dict(),
        "model": run.model_config.to_dict(),
        "train": dataclasses.asdict(run.train_config),
    }
    flat = {}
    for section, values in sections.items():
        for name, value in values.items():
            key = f"{section}.{name}"
            if key not in IGNORED_FIELDS:
                flat[key] = value
    return flat


def _key(fields: Mapping[str, object]) -> str:
    return json.dumps(fields, sort_keys=True, default=str)


def _short_names(keys: Sequence[str]) -> dict[str, str]:
    """``task.K`` -> ``K`` unless two sections share the field name (then keep the section)."""
    bare = [k.rpartition(".")[2] for k in keys]
    return {k: (b if bare.count(b) == 1 else k) for k, b in zip(keys, bare, strict=True)}


def _format(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, kw_only=True)
class RunGroup:
    """Runs that share one config (seeds of one experiment).

    Attributes:
        label: the fields that differ from the other groups, e.g. ``"K=512, B=2"``; when all runs
            share one config, ``"one config"``.
        differing_fields: ``section.field`` -> this group's value, for the fields in which the
            groups differ (empty when there is one group).
        runs: the runs, in the order they were given.
        config: this group's flat config (:func:`config_fields`).
    """

    label: str
    differing_fields: dict
    runs: tuple
    config: dict

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("RunGroup.runs is empty: a group holds at least one run")

    @property
    def seeds(self) -> list[int]:
        """The seeds of the group's runs."""
        return [int(r.train_config.seed) for r in self.runs]

    @property
    def names(self) -> list[str]:
        """The run directories' names."""
        return [Path(r.path).name for r in self.runs]


def _differing_fields(configs: list[dict]) -> list[str]:
    """The fields, sorted, whose value is not the same in every config (absent counts as None)."""
    all_keys = sorted(set().union(*(c.keys() for c in configs)))
    return [k for k in all_keys if len({_key({k: c.get(k)}) for c in configs}) > 1]


def group_runs(runs: Sequence) -> list[RunGroup]:
    """Group runs by config (everything in ``config.json`` except the seed).

    Args:
        runs: :class:`interp.io.rundir.Run` objects (from :func:`interp.io.rundir.load_run`).

    Returns:
        One :class:`RunGroup` per distinct config, in order of first appearance; each labelled by
        the fields in which the configs differ.
    """
    if not runs:
        raise ValueError("runs is empty: pass at least one run")
    configs: dict[str, dict] = {}
    members: dict[str, list] = {}
    for run in runs:
        fields = config_fields(run)
        key = _key(fields)
        configs.setdefault(key, fields)
        members.setdefault(key, []).append(run)
    differing = _differing_fields(list(configs.values()))
    short = _short_names(differing)
    groups = []
    for key, fields in configs.items():
        diff = {k: fields.get(k) for k in differing}
        label = ", ".join(f"{short[k]}={_format(v)}" for k, v in diff.items()) or "one config"
        groups.append(
            RunGroup(label=label, differing_fields=diff, runs=tuple(members[key]), config=fields)
        )
    if len(groups) > 1:
        logger.info(
            "%d runs in %d configs (differing in %s)", len(runs), len(groups), ", ".join(differing)
        )
    return groups


def group_mean(group: RunGroup) -> pd.DataFrame:
    """The mean ``metrics.csv`` of a group's seeds, at every step any seed evaluated.

    Args:
        group: one config's runs.

    Returns:
        A DataFrame with ``step`` and the mean of every numeric metrics column.
    """
    frames = [r.metrics for r in group.runs if len(r.metrics)]
    if not frames:
        raise ValueError(f"no run of the group {group.label!r} has metrics")
    both = pd.concat(frames, ignore_index=True)
    numeric = [c for c in both.columns if c != "step" and pd.api.types.is_numeric_dtype(both[c])]
    return both.groupby("step", sort=True)[numeric].mean().reset_index()
