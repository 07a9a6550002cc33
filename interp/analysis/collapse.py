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

The threshold and span are the toolkit's choice, set from data: the threshold (2%) lies above the
share that reported recovery went down to; the span is :data:`SPAN_MARGIN` times the longest
silence a run was seen to end, :data:`LONGEST_RECOVERY_LR_STEPS` (14,500 steps at lr 0.03: a run
that an earlier span of 7500 steps had judged dead), counted in ``lr x steps`` because SGD's drift
per step scales with the learning rate: 21,750 steps at lr 0.03, 65,250 at lr 0.01. Within a
budget shorter than the span no run can be judged dead. The committed data
(``docs/results/collapse-rate.md``) list every silence a run recovered from and every verdict
followed three spans further; a recovery after a longer silence would disprove the rule. A run
judged dead is not proof that it would never have recovered, only that no run measured so far
came back from there. For optimisers other than SGD nothing is measured.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import pandas as pd

from interp.analysis.dead_units import MAX_LAYERS, active_column

__all__ = [
    "FATES",
    "LONGEST_RECOVERY_LR_STEPS",
    "SPAN_LR_STEPS",
    "SPAN_MARGIN",
    "SPAN_STEPS_OTHER",
    "THRESHOLD",
    "CollapseWatch",
    "clopper_pearson",
    "collapse_step",
    "last_layer_column",
    "measured_risk",
    "measured_within",
    "rates",
    "span_steps",
]

THRESHOLD = 0.02
"""Share of the last hidden layer's units firing below which a run counts as silent."""

LONGEST_RECOVERY_LR_STEPS = 435.0
"""The longest silence (``lr x steps``) a run of the committed data came back from: 14,500 steps
at SGD lr 0.03 (``docs/results/collapse-rate.md``; a test keeps it equal to the data's)."""

SPAN_MARGIN = 1.5
"""How many times the longest recovered silence a run must stay silent to be judged dead."""

SPAN_LR_STEPS = SPAN_MARGIN * LONGEST_RECOVERY_LR_STEPS
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


# ---- death rates of runs taken to their fate (docs/results/collapse-rate.md) ----

# A run's fate: the first three count in a rate; "unfinished" (short of its budget) does not.
FATES = ("transitioned", "dead", "alive", "unfinished")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval on a rate of ``k`` in ``n`` (``(0, 1)`` when ``n == 0``)."""
    from scipy.stats import beta

    if n == 0:
        return 0.0, 1.0
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (lr, form): runs with a fate, deaths, transitions, alive, the death rate and its
    Clopper-Pearson 95% interval."""
    out = []
    for (lr, form), g in rows.groupby(["lr", "hidden_bias"], sort=True):
        counts = g["fate"].value_counts()
        n = int(sum(counts.get(f, 0) for f in FATES[:3]))
        k = int(counts.get("dead", 0))
        low, high = clopper_pearson(k, n)
        out.append(
            {
                "lr": float(lr),
                "hidden_bias": form,
                "n": n,
                "dead": k,
                "transitioned": int(counts.get("transitioned", 0)),
                "alive": int(counts.get("alive", 0)),
                "unfinished": int(counts.get("unfinished", 0)),
                "rate": k / n if n else math.nan,
                "low": low,
                "high": high,
                "seeds": sorted(int(s) for s in g.loc[g["fate"] != "unfinished", "seed"]),
            }
        )
    return pd.DataFrame(out)


def _measured_here(task, model, train) -> bool:
    """Whether the configuration is one the collapse rates were measured at: the ``paper-fig3``
    task and network (any hidden bias form), plain SGD at that preset's batch size, weight decay
    and momentum (the learning rate is matched row by row)."""
    import dataclasses

    from interp.config.model_config import ModelConfig
    from interp.train.presets import get_preset

    ref = get_preset("paper-fig3")
    ref_model = ModelConfig.from_task(ref.task, **{**ref.model, "hidden_bias": model.hidden_bias})
    fields = ("optimizer", "batch_size", "weight_decay", "weight_decay_form", "momentum")
    return (
        dataclasses.replace(task, n_eval=ref.task.n_eval) == ref.task
        and model.to_dict() == ref_model.to_dict()
        and all(getattr(train, f) == getattr(ref.train, f) for f in fields)
    )


def _same_runs(rows: pd.DataFrame | None, task, model, train) -> pd.DataFrame | None:
    """The rows of runs of this configuration (its form and learning rate), None if none."""
    if rows is None or not len(rows) or not _measured_here(task, model, train):
        return None
    lr = pd.to_numeric(rows["lr"], errors="coerce")
    hit = rows[(rows["hidden_bias"] == model.hidden_bias) & ((lr - train.lr).abs() < 1e-12)]
    return hit if len(hit) else None


def measured_risk(rows: pd.DataFrame, task, model, train) -> tuple[dict | None, str]:
    """The measured death rate of a configuration's hidden-bias form at its learning rate.

    Rates apply only where they were measured (:func:`_measured_here`) and at the same learning
    rate.

    Returns:
        ``(rate, where)``: ``rate`` as a row of :func:`rates` (``None`` when unmeasured) and
        ``where``, the configuration in words (``hidden_bias=scalar, SGD lr 0.03``).
    """
    where = f"hidden_bias={model.hidden_bias}, {train.optimizer.upper()} lr {train.lr:g}"
    hit = _same_runs(rows, task, model, train)
    if hit is None:
        return None, where
    r = rates(hit)
    if not len(r) or not r.iloc[0]["n"]:
        return None, where
    return r.iloc[0].to_dict(), where


def measured_within(rows: pd.DataFrame, task, model, train, budget: int) -> dict | None:
    """The measured share of a configuration's runs that transitioned within ``budget`` steps,
    with its Clopper-Pearson 95% interval: what the runs did, where they say it.

    Every run with a fate must have been followed to ``budget`` steps or have had its fate decided
    before (a transition or a death by then); a run stopped earlier while still undecided cannot
    say, and leaving it out would favour the runs that were quick. Then the share is not
    ``complete`` and only says what the runs did within the budget they were followed to.

    Returns:
        ``{"n", "transitioned", "share", "low", "high", "complete", "followed"}``, ``followed``
        the budget the share is of (``budget`` when complete, else the shortest one a run was
        followed to); None when the configuration has no measured run.
    """
    hit = _same_runs(rows, task, model, train)
    if hit is None or not {"fate_step", "steps_done"} <= set(hit.columns):
        return None  # a table of fates alone says nothing of when
    hit = hit[hit["fate"].astype(str).isin(FATES[:3])]  # runs with a fate
    if not len(hit):
        return None
    fate = hit["fate"].astype(str)
    at = pd.to_numeric(hit["fate_step"], errors="coerce")
    done = pd.to_numeric(hit["steps_done"], errors="coerce")
    decided = fate.isin(("transitioned", "dead")) & (at <= budget)
    complete = bool((decided | (done >= budget)).all())
    followed = budget if complete else int(min(budget, done.min()))
    k = int(((fate == "transitioned") & (at <= followed)).sum())
    n = len(hit)
    low, high = clopper_pearson(k, n)
    return {
        "n": n,
        "transitioned": k,
        "share": k / n,
        "low": low,
        "high": high,
        "complete": complete,
        "followed": followed,
    }
