"""induction-cliff: the induction-head cliff of Reddy (2024), trained, probed and modelled.

The registries are importable from the package itself (loaded on first use, so that
``import interp.cli`` stays light)::

    from interp import PositionalEncoding, register_positional
"""

from __future__ import annotations

import importlib

# name -> module that defines it
_LAZY = {
    "register_positional": "interp.positional",
    "PositionalEncoding": "interp.positional",
    "POSITIONAL_ENCODINGS": "interp.positional",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")
