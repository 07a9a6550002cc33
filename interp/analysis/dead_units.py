"""The dead-unit measure: the share of the classifier's ReLU units that fire, per hidden layer.

``active_h{k}`` is the fraction of (sequence, unit) pairs of hidden layer ``k`` (1-based, as in
docs/science.md) whose ReLU output is positive, on the IC evaluation set (a fixed probe batch: the
same sequences at every evaluation of a run). A freshly initialised layer reads about 0.5; a layer
whose pre-activations are negative on every probe sequence reads 0, and then passes no gradient to
anything before it. A measure per layer for the paper's three hidden layers; a model with fewer
has fewer columns (the measures are ``optional``).

Registered with the other progress measures by :mod:`interp.analysis.measures` (this module
imports nothing of it): a column of ``metrics.csv`` at every evaluation, a row of the
progress-measure figure. Reading the classifier's
hooks makes evaluation run the hooked forward instead of the hook-free fast path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "ACTIVE_COLUMNS",
    "COLORS",
    "MAX_LAYERS",
    "PANEL",
    "active_column",
    "active_fraction",
    "hidden_hook",
]

MAX_LAYERS = 3
"""Hidden layers with a measure (the paper's classifier has three)."""

PANEL = "active units (IC set)"
"""The row of the progress-measure figure the measures are drawn in."""

# Paul Tol's muted scheme (colour-blind safe; the Okabe & Ito colours are the other measures'):
# wine, olive and indigo, apart from every other measure's colour (no teal or green beside TILA2)
COLORS = ("#882255", "#999933", "#332288")


def hidden_hook(k: int) -> str:
    """The hook of hidden layer ``k`` (1-based): its post-ReLU activations ``[batch, d_mlp]``."""
    return f"classifier.hook_hidden_{k - 1}"


def active_column(k: int) -> str:
    """The ``metrics.csv`` column of hidden layer ``k`` (1-based)."""
    return f"active_h{k}"


ACTIVE_COLUMNS = tuple(active_column(k) for k in range(1, MAX_LAYERS + 1))


def active_fraction(post_relu: Tensor) -> float:
    """Share of the entries of a post-ReLU activation tensor that are positive (units firing),
    over every sequence (and position) and unit."""
    return float((post_relu > 0).double().mean())
