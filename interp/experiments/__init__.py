"""Stage 9, orchestration, above every other stage but the command line (stage 10).

- The standard run (:mod:`interp.experiments.standard`: the one training loop with the standard
  evaluation and the live forecast handed in), and sweeps that train, summarise and draw one run
  per point of a grid (:mod:`interp.experiments.sweep`).
- The declared experiments: one module per experiment in :mod:`interp.experiments.catalog`, found
  through :data:`EXPERIMENTS` (``induction-cliff list experiments``; ``induction-cliff reproduce
  NAME``). Each module defines one :class:`~interp.experiments.core.Experiment` and registers it
  with :func:`register_experiment`; a plugin (``--plugin my_experiment.py``) registers its own the
  same way. Nothing here imports the command line.
"""

from __future__ import annotations

import importlib
import pkgutil

from interp.experiments.core import (
    META,
    TIERS,
    Check,
    Column,
    Experiment,
    PaperValue,
    Sweep,
    Tier,
    check_rows,
    page_text,
    read_rows,
    render,
    render_page,
    reproduce,
)

__all__ = [
    "EXPERIMENTS",
    "META",
    "TIERS",
    "Check",
    "Column",
    "Experiment",
    "PaperValue",
    "Sweep",
    "Tier",
    "check_rows",
    "page_text",
    "experiments_table",
    "results_index",
    "get_experiment",
    "read_rows",
    "register_experiment",
    "render",
    "render_page",
    "reproduce",
]

EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(experiment: Experiment, *, replace: bool = False) -> Experiment:
    """Add ``experiment`` to :data:`EXPERIMENTS` (a name taken is refused unless ``replace``)."""
    if not isinstance(experiment, Experiment):
        raise TypeError(f"register_experiment takes an Experiment, got {type(experiment).__name__}")
    if experiment.name in EXPERIMENTS and not replace:
        raise ValueError(f"experiment {experiment.name!r} is already registered")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``, or a ``ValueError`` listing the names."""
    if name not in EXPERIMENTS:
        raise ValueError(
            f"experiment {name!r} is unknown: allowed values are {sorted(EXPERIMENTS)}"
        )
    return EXPERIMENTS[name]


def _load_builtin() -> None:
    from interp.experiments import catalog

    for info in sorted(pkgutil.iter_modules(catalog.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{catalog.__name__}.{info.name}")


_load_builtin()


def experiments_table(results_dir=None, prefix: str = "docs/results/") -> str:
    """The markdown table of the experiments that have data (question, headline result computed
    from the CSV, link to the page): what README.md includes, checked by a test."""
    from pathlib import Path

    from interp.experiments.core import RESULTS_DIR

    results = Path(results_dir) if results_dir is not None else RESULTS_DIR
    lines = ["| experiment | question | headline result |", "| --- | --- | --- |"]
    for name in sorted(EXPERIMENTS):
        e = EXPERIMENTS[name]
        csv = results / f"{name}.csv"
        if not csv.exists():
            continue
        rows = read_rows(csv, e.meta)
        headline = e.headline(rows) if e.headline else ""
        lines.append(f"| [{name}]({prefix}{name}.md) | {e.question} | {headline} |")
    return "\n".join(lines)


INDEX_HEAD = """# Results

One page per declared experiment (`interp/experiments/catalog/`), rendered from its CSV by
`induction-cliff reproduce NAME --render-only`; `induction-cliff reproduce NAME --tier quick|full`
reruns it. Each page says its tier, commit, defaults version, command and wall time, and marks
rows transcribed from runs that are no longer kept. This index is written by `induction-cliff
reproduce all --render-only`.

"""


def results_index(results_dir=None) -> str:
    """``docs/results/README.md``: the experiments table, linked from inside the folder."""
    return INDEX_HEAD + experiments_table(results_dir, prefix="") + "\n"
