"""induction-cliff: Reddy's in-context classification task, its network, probes and figures.

``import interp`` imports nothing heavy; the registries are reached lazily (loaded on first use,
so that ``import interp.cli`` stays light)::

    from interp import register_measure, MEASURES            # progress measures
    from interp import register_positional, PositionalEncoding  # positional encodings
"""

from __future__ import annotations

import importlib

# name -> module that defines it
_LAZY = {
    "MEASURES": "interp.analysis.measures",
    "get_measure": "interp.analysis.measures",
    "register_measure": "interp.analysis.measures",
    "register_positional": "interp.model.positional",
    "PositionalEncoding": "interp.model.positional",
    "POSITIONAL_ENCODINGS": "interp.model.positional",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
