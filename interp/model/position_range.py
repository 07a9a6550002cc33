"""Positions known to lie in an encoding's table: inside :func:`positions_in_range` the range
checks of the encodings and of the fast and stacked paths (each a read of the positions on the
host, a device synchronisation on a GPU) are skipped."""

from __future__ import annotations

import contextlib
import threading

__all__ = ["positions_in_range", "positions_trusted"]

_TRUST = threading.local()


@contextlib.contextmanager
def positions_in_range():
    """Inside, the positions given to an encoding (and the fast and stacked paths) are known to
    lie in its table: the caller has shown it once, from how they are drawn (the training loop,
    from its sampler's offsets and the table's size). The range checks, each a read of the
    positions on the host (a device synchronisation on a GPU), are then skipped."""
    before = getattr(_TRUST, "on", False)
    _TRUST.on = True
    try:
        yield
    finally:
        _TRUST.on = before


def positions_trusted() -> bool:
    """Whether the caller is inside :func:`positions_in_range`."""
    return getattr(_TRUST, "on", False)
