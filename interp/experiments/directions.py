"""Directions: predictions an experiment states before its runs, and whether its data bear them out.

A :class:`Direction` is declared beside the experiment (so the claim is fixed in the code before the
runs that test it) and judged on the rows of the committed CSV when the page is rendered. Every
direction is a predicate per seed ("this arm's value is at least that arm's value", "this arm's
head forms") that must hold on at least ``at_least`` seeds:

- ``held``: it holds on ``at_least`` seeds or more;
- ``failed``: the data have enough seeds to tell, and it holds on fewer;
- ``untestable``: fewer than ``at_least`` seeds have the values it compares.

Example::

    Direction(
        claim="NTK-mixed >= PI at 4N on at least 2 of 3 seeds",
        column="ic_acc_n32",
        where={"arm": "rope+bias", "rescaling": "mixed"},
        than={"arm": "rope+bias", "rescaling": "pi"},
        at_least=2,
    )
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from interp.experiments.core import matches

__all__ = ["Direction", "directions_table", "verdict"]

_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


@dataclass(frozen=True, kw_only=True)
class Direction:
    """A prediction about an experiment's rows, stated before the runs.

    Attributes:
        claim: the prediction in words, as the page states it.
        column: the CSV column it reads (a yes/no column reads as 1/0; a missing value as absent).
        where: column -> value: the rows of the arm the prediction is about.
        than: column -> value: the rows of the arm it is compared with, paired by ``by`` (the
            seed); None: compared with ``value`` instead.
        than_column: the column of the compared arm (default: ``column``).
        op: ``>=``, ``<=``, ``>`` or ``<`` (the arm's value ``op`` the other's, or ``value``).
        value: the fixed value compared with when ``than`` is None.
        at_least: on how many seeds it must hold.
        by: the column that pairs the two arms' rows (default ``seed``).
    """

    claim: str
    column: str
    where: Mapping[str, object] = field(default_factory=dict)
    than: Mapping[str, object] | None = None
    than_column: str | None = None
    op: str = ">="
    value: float | None = None
    at_least: int = 1
    by: str = "seed"

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(
                f"Direction.op={self.op!r} is invalid: allowed values are {list(_OPS)}"
            )
        if (self.than is None) == (self.value is None):
            raise ValueError(f"Direction {self.claim!r}: give exactly one of `than` and `value`")
        if self.at_least < 1:
            raise ValueError(f"Direction.at_least={self.at_least!r} is invalid: must be >= 1")


def _numbers(rows: pd.DataFrame, column: str) -> pd.Series:
    """A column as numbers: yes/no cells as 1/0, anything else that is not a number absent."""
    if column not in rows:
        return pd.Series(math.nan, index=rows.index)
    text = rows[column].astype(str).str.lower()
    values = pd.to_numeric(rows[column], errors="coerce")
    values = values.mask(text == "true", 1.0).mask(text == "false", 0.0)
    return values.astype(float)


def _select(rows: pd.DataFrame, where: Mapping[str, object]) -> pd.DataFrame:
    sel = rows
    for k, v in where.items():
        if k not in sel:
            return sel.iloc[0:0]
        sel = sel[matches(sel[k], v)]
    return sel


def _by_seed(rows: pd.DataFrame, column: str, where: Mapping, by: str) -> dict[str, float]:
    """Seed -> the arm's value (one row per seed is expected; more are averaged)."""
    sel = _select(rows, where)
    if not len(sel) or by not in sel:
        return {}
    vals = _numbers(sel, column)
    out = {}
    for key, v in zip(sel[by].astype(str), vals):
        out.setdefault(key, []).append(v)
    return {k: float(pd.Series(v).mean()) for k, v in out.items() if pd.Series(v).notna().all()}


def verdict(direction: Direction, rows: pd.DataFrame) -> tuple[str, str]:
    """``(held | failed | untestable, the evidence per seed)`` of ``direction`` on ``rows``."""
    d = direction
    mine = _by_seed(rows, d.column, d.where, d.by)
    if d.than is not None:
        theirs = _by_seed(rows, d.than_column or d.column, d.than, d.by)
        pairs = {k: (mine[k], theirs[k]) for k in mine if k in theirs}
    else:
        pairs = {k: (v, float(d.value)) for k, v in mine.items()}
    keys = sorted(pairs, key=lambda k: (pd.to_numeric(k, errors="coerce"), k))
    holds = {k: _OPS[d.op](*pairs[k]) for k in keys}
    n_held = sum(holds.values())
    parts = [
        f"{d.by} {_label(k)}: {_num(pairs[k][0])} {d.op} {_num(pairs[k][1])} "
        f"{'yes' if holds[k] else 'no'}"
        for k in keys
    ]
    evidence = f"{n_held} of {len(keys)} ({'; '.join(parts)})" if keys else "no data"
    if n_held >= d.at_least:
        return "held", evidence
    if len(keys) < d.at_least:
        return "untestable", evidence
    return "failed", evidence


def _label(key: str) -> str:
    number = pd.to_numeric(key, errors="coerce")
    return f"{number:.0f}" if not math.isnan(number) and float(number).is_integer() else key


def _num(value: float) -> str:
    return f"{value:.3g}"


def directions_table(directions: Sequence[Direction], rows: pd.DataFrame) -> str:
    """The page's section of directions: each claim, its verdict and the evidence."""
    if not directions:
        return ""
    lines = [
        "## Directions stated before the runs",
        "",
        "Each was declared with the experiment before its runs, and is judged here on the rows "
        "above (the numbers of each seed: the arm's value, the comparison, whether it holds).",
        "",
        "| direction | verdict | seeds where it holds |",
        "| --- | --- | --- |",
    ]
    for d in directions:
        status, evidence = verdict(d, rows)
        lines.append(f"| {d.claim} | **{status}** | {evidence} |")
    return "\n".join(lines)
