"""Training the token network (:class:`interp.model.token_net.TokenNet`) on CoPE's token tasks
(:mod:`interp.data.cope_tasks`) through the one training loop, and comparing encodings on them."""

from __future__ import annotations

import warnings

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from interp.config.train_config import TrainConfig
from interp.data.cope_tasks import IGNORE, TokenBatch
from interp.model.network import ModelConfig
from interp.model.positional import UntrainedPositionWarning
from interp.model.token_net import TokenNet, token_model_config
from interp.train.training import TrainingDiverged, run_training_loop

__all__ = ["InMemoryRun", "token_accuracy", "train_token_task", "compare_encodings"]


@torch.no_grad()
def token_accuracy(model: TokenNet, batch: TokenBatch) -> dict[str, float]:
    """Accuracy on the answer positions, and the fraction of sequences with every answer right."""
    logits = model(batch.tokens)
    scored = batch.targets != IGNORE
    right = (logits.argmax(-1) == batch.targets) | ~scored
    return {
        "acc": float(right[scored].float().mean()) if scored.any() else float("nan"),
        "seq_acc": float(right.all(dim=1).float().mean()),
    }


def train_token_task(
    task,
    cfg: ModelConfig,
    *,
    steps: int = 1500,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    eval_every: int = 250,
    n_test: int = 512,
    progress: bool = False,
) -> tuple[TokenNet, pd.DataFrame]:
    """Train a :class:`TokenNet` on one of the tasks with Adam; evaluate on its test sets.

    Returns:
        The trained model and a DataFrame with one row per evaluation: ``step, train_loss`` and
        ``{set}_acc, {set}_seq_acc`` for each test set of ``task.test_sets``. Positions past the
        absolute table in the long sets raise an
        :class:`~interp.model.positional.UntrainedPositionWarning` (callers decide whether to
        silence it).
    """
    run = _TokenRun(
        task,
        TokenNet(cfg, seed=seed),
        TrainConfig(
            optimizer="adam",
            lr=lr,
            weight_decay=0.0,
            batch_size=batch_size,
            steps=steps,
            eval_every=eval_every,
            seed=seed,
        ),
        tests=task.test_sets(n_test, seed=seed + 2_000_003),
        stream=torch.Generator().manual_seed(seed + 1_000_003),
    )
    # The toolkit's one training loop: schedule, Ctrl-C/SIGTERM at a step boundary, divergence
    # check and progress bar are the network's; this task brings its batches, loss and accuracy.
    run_training_loop(run, progress=progress)
    return run.model, pd.DataFrame(run.rows)


class InMemoryRun:
    """What :func:`interp.train.training.run_training_loop` needs of a run kept in memory (no
    run directory, no resume state): the step and loss bookkeeping, the evaluation schedule and
    the divergence message. A subclass brings ``model``, ``sample``, ``batch_loss`` and
    ``evaluate_if_due`` (which calls :meth:`due` and :meth:`record`)."""

    progress_columns: dict[str, str] = {}

    def __init__(self, model, cfg) -> None:
        self.model, self.cfg = model, cfg
        self.hooks: list = []
        self.out = None
        self.optimizer_state = None
        self.step, self.loss_sum, self.loss_count = 0, 0.0, 0
        self.rows: list[dict] = []
        self._last_eval = -1

    def due(self) -> bool:
        """Whether this step is an evaluation step not yet evaluated."""
        step = self.step
        at = step % self.cfg.eval_every == 0 or step == self.cfg.steps
        return at and step > self._last_eval

    def mean_loss(self) -> float:
        return self.loss_sum / self.loss_count if self.loss_count else float("nan")

    def record(self, row: dict) -> dict:
        """Keep an evaluation's row and start the next loss average."""
        self.rows.append(row)
        self.loss_sum, self.loss_count, self._last_eval = 0.0, 0, self.step
        return row

    def save_resume(self) -> None:
        """In memory: nothing to save."""

    def diverged(self, value: float) -> Exception:
        return TrainingDiverged(
            f"training loss became {value} at step {self.step + 1} (token task, seed "
            f"{self.cfg.seed}); stopped. Try a smaller lr."
        )


class _TokenRun(InMemoryRun):
    """A token-task run as :func:`interp.train.training.run_training_loop` drives it (in memory)."""

    progress_columns = {"train_loss": "loss", "id_acc": "id"}

    def __init__(self, task, model: TokenNet, cfg, tests: dict, stream: torch.Generator) -> None:
        super().__init__(model, cfg)
        self.task, self.tests, self.stream = task, tests, stream

    def sample(self) -> TokenBatch:
        return self.task.sample(self.cfg.batch_size, self.stream)

    def batch_loss(self, batch: TokenBatch) -> Tensor:
        logits = self.model(batch.tokens)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1), ignore_index=IGNORE
        )

    def evaluate_if_due(self) -> dict | None:
        if not self.due():
            return None
        was_training = self.model.training
        self.model.eval()
        row = {"step": self.step, "train_loss": self.mean_loss()}
        for name, batch in self.tests.items():
            row.update({f"{name}_{k}": v for k, v in token_accuracy(self.model, batch).items()})
        self.model.train(was_training)
        return self.record(row)


def compare_encodings(
    task,
    positionals=("learned", "cope"),
    seeds=(0, 1),
    *,
    steps: int = 1500,
    **train_kw,
) -> pd.DataFrame:
    """Train one :class:`TokenNet` per encoding and seed; the final row of each, side by side.

    Untrained-position warnings of the long test sets are silenced here: the table is the report.

    Returns:
        One row per ``(positional, seed)`` with the final test accuracies of
        :func:`train_token_task` (``id_acc``, ``ood_sparse_acc``, ``ood_long_acc``, ...).
    """
    rows = []
    for positional in positionals:
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UntrainedPositionWarning)
                _, df = train_token_task(
                    task, token_model_config(task, positional), steps=steps, seed=seed, **train_kw
                )
            rows.append({"positional": positional, "seed": seed, **df.iloc[-1].to_dict()})
    return pd.DataFrame(rows)
