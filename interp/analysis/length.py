"""Length generalisation: evaluate a trained network on sequences with more pairs than training.

The task generator builds evaluation sets with ``n_pairs`` pairs (``N_test = 2N, 4N, ...``); this
module runs them through a trained network and returns, at each length, the IC, IC2 and IW accuracy
and the progress measures of :func:`interp.analysis.evaluation.evaluate`.

Positions past the encoding's table (one-hot or learned absolute beyond ``P = 2 N_max + 1``) are
reported in the ``untrained_positions`` column (tokens of the IC set with such a position) and by an
:class:`~interp.model.positional.UntrainedPositionWarning`; they do not crash. Relative encodings
(RoPE, CoPE, none) have no such positions. A RoPE model can be re-evaluated with an eval-time
rescaling (:func:`rescale_rope`) without retraining.

Example::

    df = evaluate_lengths("runs/pe-rope-s0", n_pairs=(8, 16, 32), rope_scaling="ntk")
    df[["n_pairs", "ic_acc", "ila1", "tila2"]]
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import pandas as pd
import torch

from interp.analysis.evaluation import evaluate
from interp.analysis.transition import detect_transition
from interp.config.train_config import derive_seed
from interp.data.task import TaskGenerator
from interp.io.rundir import Run, load_run
from interp.model.positional import ROPE_SCALINGS, get_positional

__all__ = [
    "evaluate_lengths",
    "length_table",
    "rescale_rope",
    "parse_n_pairs",
    "encoding_table",
    "query_row_attention",
]


def rescale_rope(model, scaling: str, scale: float = 1.0, mix_b: float | None = None):
    """Switch a RoPE model's eval-time rescaling in place (no retraining) and return it.

    Args:
        model: an :class:`~interp.model.network.InductionNet` (or any model with ``.positional``)
            whose encoding supports rescaling (``supports_rescaling``: ``rope``).
        scaling: ``"none"``, ``"pi"``, ``"ntk"`` or ``"mixed"`` (see
            :func:`interp.model.positional.rope_frequencies`).
        scale: the length ratio ``s``.
        mix_b: exponent of the ``mixed`` rescaling (``None`` keeps the current one).
    """
    if not _rescalable(model):
        raise ValueError(
            f"rope_scaling needs an encoding that supports rescaling (positional='rope'); this "
            f"model's is {model.cfg.positional!r}"
        )
    model.positional.set_scaling(scaling, scale, mix_b)
    model.cfg = dataclasses.replace(model.cfg, positional_config=model.positional.config)
    return model


@torch.no_grad()
def query_row_attention(model, batch, *, chunk: int = 256) -> dict[str, float]:
    """Entropy (nats) and effective number of keys ``1 / sum_j a_j^2`` of the last layer's query
    row, both absolute (not divided by the row's length), averaged over sequences and heads.

    An attention that stays as sharp at any length keeps both where they were at the training
    length; one that spreads over the longer context lets them grow (the entropy towards
    ``log n``). The entropy-invariant ``log_n`` scale is meant to keep them put.
    """
    last = model.cfg.n_layers - 1
    name = f"blocks.{last}.attn.hook_pattern"
    entropy = n_eff = 0.0
    for i in range(0, len(batch), chunk):
        part = batch[i : i + chunk]
        _, cache = model.run_with_cache(part.tokens, part.positions, names_filter=[name])
        a = cache[name][:, :, -1, :].double()  # [batch, head, key]: the query row
        entropy += float((-(a * torch.log(a.clamp(min=1e-300))).sum(-1)).mean(-1).sum())
        n_eff += float((1.0 / (a * a).sum(-1)).mean(-1).sum())
    return {"l2_query_entropy": entropy / len(batch), "l2_query_neff": n_eff / len(batch)}


def _rescalable(model) -> bool:
    return getattr(model.positional, "supports_rescaling", False)


def parse_n_pairs(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> ``(8, 16, 32)``, with a clear error if malformed."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise ValueError(f"--n-pairs {text!r} is invalid: expected integers like 8,16,32") from err
    if not values or min(values) < 1:
        raise ValueError(f"--n-pairs {text!r} is invalid: expected positive integers like 8,16,32")
    return values


@torch.no_grad()
def length_table(
    model,
    generator: TaskGenerator,
    eval_seed: int,
    n_pairs: Sequence[int] = (8, 16, 32),
    *,
    n: int | None = None,
    rope_scaling: str | None = None,
    rope_scale: float | str = "auto",
    rope_mix_b: float | None = None,
    sets: Sequence[str] = ("ic", "ic2", "iw"),
) -> pd.DataFrame:
    """Accuracy and progress measures of ``model`` at several context lengths.

    Args:
        model: a trained :class:`~interp.model.network.InductionNet`.
        generator: the task generator of its run (same class means and label vectors).
        eval_seed: seed of the evaluation sets (each length draws its own sets from it).
        n_pairs: context pairs of each evaluation (each a multiple of ``B_eval`` with
            ``n_pairs / B_eval <= L``).
        n: sequences per set (default: the task's ``n_eval``).
        rope_scaling: for a RoPE model, the eval-time rescaling (``None`` leaves the model's own).
        rope_scale: the rescaling's ``s``; ``"auto"`` uses ``n_pairs / N_train`` at each length
            (so 1, i.e. plain RoPE, at the training length).
        rope_mix_b: exponent of the ``mixed`` rescaling.
        sets: which evaluation sets to run (``"ic"`` must be one; fewer is cheaper).

    Returns:
        One row per length: ``n_pairs, seq_len, max_position, untrained_positions``, the columns
        of :func:`interp.analysis.evaluation.evaluate` (``ic_acc, ic_loss, ..., ila1, tila2, ...``),
        ``l2_query_entropy, l2_query_neff`` (:func:`query_row_attention`, on the IC set) and
        ``positional, rope_scaling, rope_scale``.
    """
    if "ic" not in sets or not set(sets) <= {"ic", "ic2", "iw"}:
        raise ValueError(
            f"sets={tuple(sets)!r} is invalid: a subset of ('ic', 'ic2', 'iw') with 'ic'"
        )
    if rope_scaling is not None and rope_scaling not in ROPE_SCALINGS:
        raise ValueError(f"rope_scaling={rope_scaling!r} is invalid: allowed {ROPE_SCALINGS}")
    n_train = generator.config.N
    rows = []
    saved = None
    if _rescalable(model):
        saved = (model.positional.scaling, model.positional.scale, model.positional.mix_b)
    try:
        for n_p in n_pairs:
            batches = generator.eval_sets(eval_seed, n=n, n_pairs=int(n_p))
            batches = {k: v for k, v in batches.items() if k in sets}
            row: dict = {"n_pairs": int(n_p), "seq_len": 2 * int(n_p) + 1}
            row["max_position"] = int(batches["ic"].positions.max())
            row["untrained_positions"] = model.positional.untrained(batches["ic"].positions)
            if rope_scaling is not None:
                s = n_p / n_train if rope_scale == "auto" else float(rope_scale)
                rescale_rope(model, rope_scaling, s, rope_mix_b)
            row.update(evaluate(model, batches))
            row.update(query_row_attention(model, batches["ic"]))
            row["positional"] = model.cfg.positional
            rotary = _rescalable(model)
            row["rope_scaling"] = model.positional.scaling if rotary else None
            row["rope_scale"] = model.positional.scale if rotary else None
            rows.append(row)
    finally:
        if saved is not None:
            rescale_rope(model, *saved)
    return pd.DataFrame(rows)


def evaluate_lengths(
    run: Run | str | os.PathLike,
    n_pairs: Sequence[int] = (8, 16, 32),
    *,
    n: int | None = None,
    step: int | None = None,
    rope_scaling: str | None = None,
    rope_scale: float | str = "auto",
    rope_mix_b: float | None = None,
    sets: Sequence[str] = ("ic", "ic2", "iw"),
) -> pd.DataFrame:
    """Evaluate a trained run at several lengths (see :func:`length_table` for the columns).

    Args:
        run: a :class:`~interp.io.rundir.Run` or its directory.
        n_pairs: context pairs of each evaluation.
        n: sequences per set (default: the run's ``n_eval``).
        step: checkpoint to load (default: the last one).
        rope_scaling, rope_scale, rope_mix_b: eval-time RoPE rescaling, see :func:`length_table`.
        sets: evaluation sets to run, see :func:`length_table`.
    """
    run = run if isinstance(run, Run) else load_run(run)
    model = run.load_model(step)
    df = length_table(
        model,
        run.generator(),
        derive_seed(run.train_config.seed, "eval"),
        n_pairs,
        n=n,
        rope_scaling=rope_scaling,
        rope_scale=rope_scale,
        rope_mix_b=rope_mix_b,
        sets=sets,
    )
    df.insert(1, "step", step if step is not None else run.checkpoint_steps[-1])
    return df


def encoding_table(
    runs: Sequence[Run | str | os.PathLike],
    n_pairs: Sequence[int] = (8, 16, 32),
    *,
    n: int | None = None,
    rope_scalings: Sequence[str] = ("none", "pi", "ntk"),
    step: int | None = None,
    sets: Sequence[str] = ("ic", "ic2", "iw"),
) -> pd.DataFrame:
    """The positional-encoding comparison: whether and when the induction head forms, and IC
    accuracy at each length.

    The induction head counts as formed when TILA2 (attention from the query to the labels of its
    class) shows a transition (:func:`interp.analysis.transition.detect_transition`, rise >= 0.3);
    its step is the logistic midpoint. RoPE runs get one row per eval-time rescaling
    (``rope_scale = "auto"``: ``s = n_pairs / N``).

    Args:
        runs: run directories (or :class:`~interp.io.rundir.Run` objects).
        n_pairs: context pairs of each evaluation.
        n: sequences per evaluation set (default: each run's ``n_eval``).
        rope_scalings: eval-time rescalings of RoPE runs.
        step: compare runs at this step when they were trained for different lengths: curves are
            cut there and the last checkpoint at or before it is evaluated (``eval_step``);
            default: each run's whole curve and last checkpoint.
        sets: evaluation sets to run at each length (IC alone is enough for the table).

    Returns:
        One row per run (and rescaling): ``run, positional, rope_scaling, seed, steps`` (last step
        of the curve), ``eval_step`` (checkpoint evaluated), ``head_formed``, ``tila2_step``,
        ``ic_acc_transition_step``, then ``ic_acc_N{n}`` and ``tila2_N{n}`` for each length, and
        ``untrained_positions`` (summed over lengths).
    """
    rows = []
    for item in runs:
        run = item if isinstance(item, Run) else load_run(item)
        m = run.metrics if step is None else run.metrics[run.metrics["step"] <= step]
        head = detect_transition(m["step"], m["tila2"])
        acc = detect_transition(m["step"], m["ic_acc"])
        ckpt = None
        if step is not None:
            earlier = [s for s in run.checkpoint_steps if s <= step]
            if not earlier:
                raise ValueError(f"{run.path} has no checkpoint at or before step {step}")
            ckpt = earlier[-1]
        rescalable = get_positional(run.model_config.positional).supports_rescaling
        scalings = rope_scalings if rescalable else (None,)
        for scaling in scalings:
            df = evaluate_lengths(run, n_pairs, n=n, step=ckpt, rope_scaling=scaling, sets=sets)
            row = {
                "run": run.path.name,
                "positional": run.model_config.positional,
                "rope_scaling": scaling,
                "seed": run.train_config.seed,
                "steps": int(m["step"].max()),
                "eval_step": int(df["step"].iloc[0]),
                "head_formed": head.transitioned,
                "tila2_step": head.step,
                "ic_acc_transition_step": acc.step,
            }
            for _, r in df.iterrows():
                row[f"ic_acc_N{int(r.n_pairs)}"] = r.ic_acc
            for _, r in df.iterrows():
                row[f"tila2_N{int(r.n_pairs)}"] = r.tila2
            row["untrained_positions"] = int(df.untrained_positions.sum())
            rows.append(row)
    return pd.DataFrame(rows)
