"""The names of the jump: one name per number, the same in the command line, the figures and the
report.

- **observed transition**: the midpoint of the logistic fitted to a run's IC accuracy
  (:func:`interp.analysis.transition.detect_run_transition`); ``step`` in
  ``induction-cliff transition``, the dashed line of the training-dynamics and progress figures,
  ``step`` in the report's transition table.
- **IC-loss cliff**: the steepest drop of the IC loss in log-step
  (:func:`interp.analysis.cliff.detect_cliff`), seen on the whole curve: ``cliff_step`` in
  ``induction-cliff transition``, the step every forecast is scored against.
- **fitted transition**: the transition of a dynamics model fitted to the whole curve (a
  description of the curve, never a forecast).
- **forecast**: the IC-loss cliff step predicted from a part of the plateau (a fraction of it, or
  the steps up to a cut-off), with its interval and the forecaster that made it.
"""

from __future__ import annotations

OBSERVED = "observed transition"
OBSERVED_DEFINITION = "IC-accuracy midpoint"
CLIFF = "IC-loss cliff"
FITTED = "fitted transition"
FORECAST = "forecast"

__all__ = ["OBSERVED", "OBSERVED_DEFINITION", "CLIFF", "FITTED", "FORECAST", "observed_name"]


def observed_name(column: str) -> str:
    """The name of the transition seen on a whole curve of ``column``: the IC-loss cliff on
    ``ic_loss``, the observed transition on ``ic_acc``, ``"<column> transition"`` otherwise."""
    if column == "ic_loss":
        return CLIFF
    if column == "ic_acc":
        return OBSERVED
    return f"{column} transition"
