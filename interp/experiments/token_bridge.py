"""Train a token model (a TransformerLens ``TransformerBridge``, any hooked model that embeds token
ids) on the discrete-token task (:mod:`interp.data.token_task`) with the toolkit's one training
loop, evaluating the registered progress measures; docs/transformerlens.md has the worked
example."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.data.task import Batch
from interp.data.token_task import TokenTaskConfig, TokenTaskGenerator
from interp.train.token_training import InMemoryRun

__all__ = ["train_token_model"]


class _TokenModelRun(InMemoryRun):
    """A token-task run of any token model, as
    :func:`interp.train.training.run_training_loop` drives it (in memory)."""

    progress_columns = {"train_loss": "loss", "ic_acc": "ic", "iw_acc": "iw"}

    def __init__(self, model, pm, gen, cfg, eval_sets, measures, stream) -> None:
        super().__init__(model, cfg)
        self.pm, self.gen = pm, gen
        self.eval_sets, self.measures, self.stream = eval_sets, measures, stream

    def sample(self) -> Batch:
        return self.gen.sample(self.cfg.batch_size, self.stream)

    def batch_loss(self, batch: Batch) -> Tensor:
        return F.cross_entropy(self.pm.logits(batch), batch.target)

    def evaluate_if_due(self) -> dict | None:
        from interp.analysis.measures import compute_measures

        if not self.due():
            return None
        was_training = self.model.training
        self.model.eval()
        row: dict[str, Any] = {"step": self.step, "train_loss": self.mean_loss()}
        with torch.no_grad():
            for name, batch in self.eval_sets.items():
                if name == "ic":
                    logits, values = compute_measures(self.pm, batch, self.measures)
                    row.update(values)
                else:
                    logits = self.pm.logits(batch)
                row[f"{name}_acc"] = float((logits.argmax(-1) == batch.target).float().mean())
                row[f"{name}_loss"] = float(F.cross_entropy(logits, batch.target))
        self.model.train(was_training)
        return self.record(row)


def train_token_model(
    model,
    task: TokenTaskConfig,
    train_config,
    *,
    eval_seed: int = 2,
    measures=None,
    progress: bool = False,
):
    """Train a token model (a ``TransformerBridge``, any hooked model that embeds token ids) on
    the token task with the toolkit's one training loop, in place.

    Args:
        model: the model; it is probed through :func:`interp.analysis.hooked.probed` (logits of
            the query over the label ids, attention patterns from its TL hooks).
        task: the token task.
        train_config: an :class:`interp.train.training.TrainConfig` (optimizer, lr,
            weight_decay, batch_size, steps, eval_every, seed: the training stream's seed).
        eval_seed: seed of the evaluation sets.
        measures: names of the registered progress measures evaluated on IC (default: every one).
        progress: show a progress bar.

    Returns:
        A DataFrame with one row per evaluation: ``step, train_loss``, ``{ic,ic2,iw}_{acc,loss}``
        and the measures (as ``metrics.csv`` has them).

    Raises:
        interp.analysis.hooked.ModelContractError: the model lacks a hook the measures read or
            is not fed token ids (before any step).
    """
    import pandas as pd

    from interp.analysis.hooked import probed
    from interp.analysis.measures import check_reads
    from interp.train.training import run_training_loop

    pm = probed(model)
    gen = TokenTaskGenerator(task, seed=train_config.seed)
    eval_sets = gen.eval_sets(eval_seed)
    check_reads(pm, measures)
    pm.check((), eval_sets["ic"][:1])
    run = _TokenModelRun(
        model,
        pm,
        gen,
        train_config,
        eval_sets,
        measures,
        torch.Generator().manual_seed(int(train_config.seed) + 1_000_003),
    )
    model.train()
    run_training_loop(run, progress=progress)
    return pd.DataFrame(run.rows)
