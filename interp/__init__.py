"""induction-cliff: Reddy's in-context classification task, its network, probes and figures.

``import interp`` imports nothing heavy; the registries are reached lazily:
``interp.register_measure``, ``interp.get_measure`` and ``interp.MEASURES`` come from
:mod:`interp.measures` (which itself imports torch only when a measure is computed).
"""

from __future__ import annotations

import importlib

__all__ = ["MEASURES", "get_measure", "register_measure"]

_LAZY = {
    "MEASURES": "interp.measures",
    "get_measure": "interp.measures",
    "register_measure": "interp.measures",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
