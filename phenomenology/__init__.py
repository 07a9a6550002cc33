"""Phenomenological models of the induction cliff [docs/science.md section 4, reconstruction].

- :mod:`phenomenology.landscape`: the nested-logit loss in ``(beta1, alpha, xi)``, its gradient,
  gradient flow / descent trajectories, plateau and cliff detection, landscape grids.
- :mod:`phenomenology.fit`: :class:`NestedLogitFit`, fitting that model to a run's curves;
  :func:`fit_run` (``induction-cliff fit RUN_DIR``) and :func:`forecast_transition`.
- :mod:`phenomenology.predictions`: plateau length versus ``L``; the stuck ``L = n`` case.
- :mod:`phenomenology.minimal`: the minimal induction head trained on the task (imports torch and
  TransformerLens, so it is not imported here).
"""

from phenomenology.fit import NestedLogitFit, fit_run, forecast_transition
from phenomenology.landscape import (
    detect_cliff,
    gradient,
    gradient_descent,
    gradient_flow,
    landscape_grid,
    loss,
    quantities,
)
from phenomenology.predictions import origin_stuck, plateau_length, plateau_lengths

__all__ = [
    "NestedLogitFit",
    "detect_cliff",
    "fit_run",
    "forecast_transition",
    "gradient",
    "gradient_descent",
    "gradient_flow",
    "landscape_grid",
    "loss",
    "origin_stuck",
    "plateau_length",
    "plateau_lengths",
    "quantities",
]
