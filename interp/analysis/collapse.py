"""When is the classifier dead? A rule on the dead-unit measure, and ``train`` reporting it.

Under plain SGD the author's scalar hidden biases can silence the classifier's last hidden layer:
its units stop firing on (almost) every input, the logits become constant and the loss sits at
``log L``. A dip is not a death: a recovery has been reported (outside the committed data) of a
last layer at about 1% of its units firing that came back to a quarter of them thousands of steps
later at lr 0.03, its loss within 1e-3 of ``log L`` nearly all that time. The loss cannot tell the
two apart; the rule reads the last hidden layer's share of firing units (``active_h{k}``,
:mod:`interp.analysis.dead_units`), and waits:

    **dead** at the first evaluation where the last hidden layer's share of firing units has been
    below :data:`THRESHOLD` at every evaluation over the last :data:`SPAN_LR_STEPS` / ``lr``
    steps (plain SGD; other optimisers: :data:`SPAN_STEPS_OTHER` steps).

The threshold and span are provisional, the toolkit's choice: the threshold (2%) lies above the
share that reported recovery went down to, and the span (7500 steps at lr 0.03, counted in
``lr x steps`` because SGD's drift per step scales with the learning rate) is longer than that
recovery's silence can have lasted. The committed data (``docs/results/collapse-rate.md``, its
section on silences that ended) list every silence a run recovered from, with the span at its
learning rate; a recovery after a longer silence would disprove the rule. A run judged dead is
not proof that it would never have recovered, only that no run measured so far came back from
there. For optimisers other than SGD nothing is measured.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from interp.analysis.dead_units import MAX_LAYERS, active_column

__all__ = [
    "SPAN_LR_STEPS",
    "SPAN_STEPS_OTHER",
    "THRESHOLD",
    "CollapseWatch",
    "collapse_step",
    "last_layer_column",
    "span_steps",
]

THRESHOLD = 0.02
"""Share of the last hidden layer's units firing below which a run counts as silent."""

SPAN_LR_STEPS = 225.0
"""How long (``lr x steps``, plain SGD) a run must stay silent to be judged dead."""

SPAN_STEPS_OTHER = 7500
"""The span in steps for optimisers other than plain SGD (unmeasured: the toolkit's choice)."""


def span_steps(optimizer: str, lr: float) -> int:
    """Steps a run must stay below :data:`THRESHOLD` to be judged dead."""
    if optimizer == "sgd" and lr > 0:
        return max(1, round(SPAN_LR_STEPS / lr))
    return SPAN_STEPS_OTHER


def last_layer_column(n_mlp_layers: int) -> str | None:
    """The ``metrics.csv`` column of the last hidden layer, or ``None`` when it has no measure."""
    return active_column(n_mlp_layers) if 1 <= n_mlp_layers <= MAX_LAYERS else None


def collapse_step(
    steps: Sequence[float], active: Sequence[float], span: int, threshold: float = THRESHOLD
) -> tuple[int, int] | None:
    """Apply the rule to a run's evaluations.

    Args:
        steps: evaluation steps, increasing.
        active: the last hidden layer's share of firing units at each (NaN counts as firing).
        span: steps a run must stay below ``threshold`` (:func:`span_steps`).
        threshold: see :data:`THRESHOLD`.

    Returns:
        ``(since, judged)``: the first evaluation of the silent stretch and the evaluation at which
        it has lasted ``span`` steps; ``None`` when the run is not judged dead.
    """
    since = None
    for step, value in zip(steps, active):
        if value < threshold:  # NaN compares False: an evaluation without the measure fires
            since = step if since is None else since
            if step - since >= span:
                return int(since), int(step)
        else:
            since = None
    return None


class CollapseWatch:
    """A callback of the training loop (:class:`interp.train.training.EvalCallback`): at every
    evaluation, apply the rule to the run's rows so far; at the evaluation where the run is first
    judged dead, print one line with its step, and with ``TrainConfig.stop_on_collapse`` ask the
    loop to stop there (the run's ``stop_reason``). Adds no column."""

    def __call__(self, run, row) -> dict[str, float]:
        n_layers = getattr(getattr(run.model, "cfg", None), "n_mlp_layers", None)
        column = last_layer_column(n_layers) if isinstance(n_layers, int) else None
        if column is None or column not in row:
            return {}
        rows = [*run.rows, row]
        span = span_steps(run.cfg.optimizer, run.cfg.lr)
        found = collapse_step(
            [r["step"] for r in rows], [_value(r.get(column)) for r in rows], span
        )
        if found is None:
            return {}
        since, judged = found
        stop = run.cfg.stop_on_collapse
        where = f" ({run.out})" if getattr(run, "out", None) is not None else ""
        if judged == row["step"] or stop:  # the judgement, or a resumed dead run asked to stop
            print(
                f"collapsed at step {judged}{where}: hidden layer {n_layers} below "
                f"{THRESHOLD:.0%} of its units firing at every evaluation since step {since} "
                f"({span} steps; rule in interp.analysis.collapse)"
                + ("; stopping (stop_on_collapse)" if stop else ""),
                file=sys.stderr,
                flush=True,
            )
        if stop:
            run.stop_reason = f"collapsed at step {judged}"
        return {}


def _value(v) -> float:
    return float("nan") if v is None else float(v)
