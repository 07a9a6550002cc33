"""Stage 9, orchestration, above every other stage but the command line (stage 10).

- The standard run (:mod:`interp.experiments.standard`: the one training loop with the standard
  evaluation and the live forecast handed in), and sweeps that train, summarise and draw one run
  per point of a grid (:mod:`interp.experiments.sweep`).
- Declared experiments: an :class:`~interp.experiments.core.Experiment` registered with
  :func:`register_experiment` is found through :data:`EXPERIMENTS` (``induction-cliff list
  experiments``; ``induction-cliff reproduce NAME``); a plugin (``--plugin my_experiment.py``)
  registers its own. The project's own experiments (one module each) are not part of the
  installed package: they are the folder ``experiments/`` at the root of a checkout of the
  repository, next to this package, which :func:`load_catalogue` loads by its path. Nothing here
  imports the command line, nor that folder by name.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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
from interp.registry import Registry

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
    "load_catalogue",
    "require_catalogue",
    "read_rows",
    "register_experiment",
    "render",
    "render_page",
    "reproduce",
]

EXPERIMENTS: Registry[Experiment] = Registry(
    "experiment",
    field="experiment",
    entry="Experiment",
    hint="(a plugin's experiment needs --plugin PATH_OR_MODULE)",
    sort=True,
)
"""Name -> :class:`Experiment` (:class:`interp.registry.Registry`)."""


def register_experiment(experiment: Experiment, *, replace: bool = False) -> Experiment:
    """Add ``experiment`` to :data:`EXPERIMENTS` (a name taken is refused unless ``replace``)."""
    if not isinstance(experiment, Experiment):
        raise TypeError(f"register_experiment takes an Experiment, got {type(experiment).__name__}")
    return EXPERIMENTS.declare(experiment.name, experiment, replace=replace)


# A checkout of the repository: the folder holding this package (interp/) and pyproject.toml.
CHECKOUT = Path(__file__).resolve().parents[2]
CATALOGUE = CHECKOUT / "experiments"
NO_CHECKOUT = (
    "the project's declared experiments are the folder experiments/ of a checkout, not part of "
    "the installed package: clone the repository and run `pip install -e .` in it"
)


def load_catalogue() -> bool:
    """Register the project's declared experiments: the package ``experiments`` at the root of
    the checkout this package runs from (``experiments/__init__.py`` imports every module of
    ``experiments/catalog/``), loaded once by its path. ``False`` when there is none (the
    package installed from a wheel)."""
    init = CATALOGUE / "__init__.py"
    if not (init.is_file() and (CHECKOUT / "pyproject.toml").is_file()):
        return False
    loaded = sys.modules.get(CATALOGUE.name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() != init.resolve():
            raise ValueError(
                f"a module named {CATALOGUE.name!r} is already loaded from "
                f"{getattr(loaded, '__file__', None)}, not {init}"
            )
        return True
    spec = importlib.util.spec_from_file_location(
        CATALOGUE.name, init, submodule_search_locations=[str(CATALOGUE)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[CATALOGUE.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(CATALOGUE.name, None)
        raise
    return True


def require_catalogue(command: str) -> None:
    """Load the checkout's experiments; a ``ValueError`` saying what ``command`` needs when
    there is no checkout and no plugin registered an experiment."""
    if not load_catalogue() and not EXPERIMENTS:
        raise ValueError(f"{command} needs a checkout of the repository: {NO_CHECKOUT}")


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name`` (a checkout's own experiments loaded when it is not
    registered yet), or a ``ValueError`` listing the names."""
    if name not in EXPERIMENTS and not load_catalogue():
        raise ValueError(f"{EXPERIMENTS.unknown(name)} ({NO_CHECKOUT})")
    return EXPERIMENTS.require(name)


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

One page per declared experiment (`experiments/catalog/`), rendered from its CSV by
`induction-cliff reproduce NAME --render-only`; `induction-cliff reproduce NAME --tier quick|full`
reruns it. Each page says its tier, commit, defaults version, command and wall time, and marks
rows transcribed from runs that are no longer kept. This index is written by `induction-cliff
reproduce all --render-only`.

"""


def results_index(results_dir=None) -> str:
    """``docs/results/README.md``: the experiments table, linked from inside the folder."""
    return INDEX_HEAD + experiments_table(results_dir, prefix="") + "\n"
