"""Tiny training runs for the report, explorer and comparison tests (about a second each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.model.network import ModelConfig

FAST_SWEEP = {
    "steps": "40",
    "eval_every": "10",
    "n_eval": "64",
    "batch_size": "32",
    "checkpoint_every": "20",
    "n_log_checkpoints": "2",
}
"""The ``tiny`` preset shortened for sweeps, as ``--set`` text: 40 steps, 5 evaluations (enough
for transition detection)."""


def tiny_run(out: Path, *, K: int = 64, seed: int = 0, steps: int = 40) -> Path:
    """Train a tiny run (Adam, a few dozen steps, checkpoints every 10 steps) into ``out``."""
    task = TaskConfig(D=15, K=K, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
    cfg = TrainConfig(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=steps,
        eval_every=10,
        checkpoint_every=10,
        n_log_checkpoints=0,
        seed=seed,
        num_threads=1,
    )
    train(task, ModelConfig.from_task(task, d_mlp=32), cfg, out, progress=False)
    return out


def logistic_metrics(mid: float, n: int = 101, last: int = 1000) -> pd.DataFrame:
    """A clean logistic IC-accuracy curve from 0.1 to 0.95 with its midpoint at ``mid``."""
    steps = np.linspace(0, last, n)
    acc = 0.1 + 0.85 / (1 + np.exp(-(steps - mid) / 20.0))
    return pd.DataFrame({"step": steps.astype(int), "train_loss": 2 - acc, "ic_acc": acc})
