"""Stage 11, the project's own experiments: the declared experiments behind every page of
docs/results (one module each in :mod:`experiments.catalog`), the transition-law grid and its
scores, and the helpers their pages share. A checkout's folder, not part of the installed
package: it imports the package, never the reverse. ``induction-cliff reproduce`` and
``induction-cliff list experiments`` load it by its path (:func:`interp.experiments.load_catalogue`:
the folder ``experiments/`` next to ``interp/``); importing it registers every experiment of the
catalogue.
"""

from __future__ import annotations

import importlib
import pkgutil

from experiments import catalog


def _load_catalogue() -> None:
    for info in sorted(pkgutil.iter_modules(catalog.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{catalog.__name__}.{info.name}")


_load_catalogue()
