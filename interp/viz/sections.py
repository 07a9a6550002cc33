"""The one registry of figures and report sections: ``induction-cliff figures`` writes the figures
of every registered section, ``induction-cliff report`` renders the sections in order on one page.

A section is one :func:`register_section` call (a module of the package, or a plugin file loaded
with ``--plugin``): a title, ``figures(context) -> [Drawn, ...]`` (what ``figures`` writes, and by
default what the report shows), optionally ``html(context) -> str`` (the report's own body for
it), an ``order`` on the page, and whether it belongs to the figure set and to the report. The
built-in sections are registered by :mod:`interp.viz.figures` (dynamics, attention, fit overlay,
LLC, quanta) and :mod:`interp.viz.report` (config, transition, fit and forecast, explorer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, no_type_check

import plotly.graph_objects as go

from interp.registry import Check, Registry

__all__ = ["Drawn", "Context", "Section", "SECTIONS", "register_section", "sections"]

STYLES = ("single", "double")


@dataclass(frozen=True)
class Drawn:
    """One figure of a section: written as ``{stem}.{format}`` with a CSV of its data.

    Attributes:
        stem: the file name without extension (letters, digits, ``-``, ``_``, ``.``).
        figure: the plotly figure.
        style: ``double`` (two columns wide) or ``single``.
        formats: the formats to write it in (None: the ones asked for).
    """

    stem: str
    figure: go.Figure
    style: str = "double"
    formats: tuple[str, ...] | None = None


@dataclass
class Context:
    """What every section sees: the runs (opened once), their display names and metrics, the
    detected transitions of IC accuracy, the config groups, the deviations note, and the options
    of the command (``figures``: slider checkpoints, averaged sequences, the attention run;
    ``report``: its :class:`~interp.viz.report.ReportConfig`)."""

    runs: list
    names: list[str]
    metrics: dict[str, Any]
    transitions: list
    groups: list
    note: str | None
    options: dict = field(default_factory=dict)

    @property
    def found(self) -> list[float]:
        """The transitions that were found."""
        return [t for t in self.transitions if t is not None]


@dataclass(frozen=True)
class Section:
    """One registered section (see the module docstring)."""

    name: str
    title: str
    figures: Callable[[Context], Sequence[Drawn]] | None
    html: Callable[[Context], str] | None
    order: float
    in_figures: bool
    in_report: bool
    source: str


SECTIONS: Registry[Section] = Registry(
    "section",
    field="section",
    entry="Section",
    pattern=r"^[a-z][a-z0-9_]*$",
    pattern_says="lower case, digits and '_'",
    hint="(a plugin's section needs --plugin PATH_OR_MODULE)",
)
"""Name -> :class:`Section`, in registration order (:func:`sections` sorts them by ``order``;
:class:`interp.registry.Registry`)."""


def _function_or_none(fn) -> bool:
    return fn is None or callable(fn)


_CHECKS: tuple[Check, ...] = (
    ("title", lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    ("figures", _function_or_none, "a function of the Context"),
    ("html", _function_or_none, "a function of the Context"),
)


# Self-validating (one-line errors naming the field): the test run's runtime type checker would
# pre-empt them with a traceback, so it skips this function.
@no_type_check
def register_section(
    name: str,
    *,
    title: str,
    figures: Callable[[Context], Sequence[Drawn]] | None = None,
    html: Callable[[Context], str] | None = None,
    order: float = 100.0,
    in_figures: bool = True,
    in_report: bool = True,
    replace: bool = False,
) -> Section:
    """Register a section; returns it.

    Raises:
        ValueError: one line naming the field: a malformed or taken name, no title, neither
            ``figures`` nor ``html``, a section in the figure set without ``figures``.
    """
    SECTIONS.check_name(name)
    if name in SECTIONS and not replace:
        raise SECTIONS.taken(name)
    SECTIONS.check_fields({"title": title, "figures": figures, "html": html}, _CHECKS)
    if figures is None and html is None:
        raise ValueError("Section.figures=None is invalid: give figures, html or both")
    if in_figures and figures is None:
        raise ValueError("Section.figures=None is invalid for the figure set: in_figures=False")
    fn = figures or html
    section = Section(
        name=name,
        title=title,
        figures=figures,
        html=html,
        order=float(order),
        in_figures=bool(in_figures),
        in_report=bool(in_report),
        source=getattr(fn, "__module__", "?") or "?",
    )
    return SECTIONS.declare(name, section, replace=replace)


def sections(*, report: bool = False) -> list[Section]:
    """The sections of the figure set (or of the report), in page order."""
    chosen = [s for s in SECTIONS.values() if (s.in_report if report else s.in_figures)]
    return sorted(chosen, key=lambda s: s.order)  # stable: registration order breaks ties


def safe_stem(name: str) -> str:
    """A run's name as part of a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
