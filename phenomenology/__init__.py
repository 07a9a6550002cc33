"""Stage 7, phenomenological models of the induction cliff [docs/science.md section 4,
reconstruction]: above the analysis of trained networks, below the figures that draw them.

- :mod:`phenomenology.landscape`: the nested-logit loss in ``(beta1, alpha, xi)``, its gradient,
  gradient flow / descent trajectories, plateau and cliff detection, landscape grids.
- :mod:`phenomenology.models`: the registry of dynamics models (:func:`register_model`).
- :mod:`phenomenology.fit`: :class:`DynamicsFit`, fitting any registered model to a run's curves
  (:class:`NestedLogitFit` for the nested-logit model); :func:`fit_curve` and :func:`fit_run`
  (``induction-cliff fit PATH``) and :func:`forecast_transition`.
- :mod:`phenomenology.predictions`: plateau length versus ``L``; the stuck ``L = n`` case.
- :mod:`phenomenology.minimal`: the minimal induction head trained on the task (imports torch and
  TransformerLens, so it is not imported here).
"""

from __future__ import annotations

import importlib
import importlib.util

# name -> module that defines it; imported on first use, so that importing one submodule (the
# training loop's live forecast) does not load scipy.optimize and scikit-learn with the fitters.
_LAZY = {
    **dict.fromkeys(
        ("DynamicsFit", "NestedLogitFit", "fit_curve", "fit_run", "forecast_transition"),
        "phenomenology.fit",
    ),
    **dict.fromkeys(
        (
            "detect_cliff",
            "gradient",
            "gradient_descent",
            "gradient_flow",
            "landscape_grid",
            "loss",
            "quantities",
        ),
        "phenomenology.landscape",
    ),
    **dict.fromkeys(
        ("DynamicsModel", "get_model", "model_names", "register_model"), "phenomenology.models"
    ),
    **dict.fromkeys(
        ("origin_stuck", "plateau_length", "plateau_lengths"), "phenomenology.predictions"
    ),
}


# The built-in dynamics model registers itself when its module loads: loaded with the package, so
# that every lookup of the registry (``fit --model``, ``list models``) finds it (0.1 s: numpy and
# pandas, no fitter).
importlib.import_module("phenomenology.nested_logit")


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if importlib.util.find_spec(f"phenomenology.{name}") is not None:  # a submodule
        return importlib.import_module(f"phenomenology.{name}")
    raise AttributeError(f"module 'phenomenology' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "DynamicsFit",
    "DynamicsModel",
    "NestedLogitFit",
    "fit_curve",
    "get_model",
    "model_names",
    "register_model",
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
