"""The standard run: the one training loop (:mod:`interp.train.training`) with what every run of
the toolkit evaluates handed in as callbacks: accuracy and loss on the IC / IC2 / IW sets with the
registered progress measures, the per-class IW accuracies, (``TrainConfig.live_forecast``)
the live forecast of the transition, and the collapse watch (:mod:`interp.analysis.collapse`).
What ``induction-cliff train`` runs."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from interp.analysis.collapse import CollapseWatch
from interp.analysis.evaluation import EvaluateSets, PerClassIW
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.train import training
from interp.train.training import EvalCallback
from phenomenology.live import LiveForecast

__all__ = ["standard_callbacks", "train", "train_many"]


def standard_callbacks(train_config: TrainConfig | None = None) -> list[EvalCallback]:
    """What a standard run evaluates, in order (the columns of ``metrics.csv`` follow it)."""
    cfg = train_config or TrainConfig()
    live = [LiveForecast()] if cfg.live_forecast else []
    return [EvaluateSets(), PerClassIW(), *live, CollapseWatch()]


def train(
    task: TaskConfig,
    model_config=None,
    train_config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    callbacks: Sequence[EvalCallback] | None = None,
    **kwargs,
) -> pd.DataFrame:
    """:func:`interp.train.training.train` with :func:`standard_callbacks` (or ``callbacks``);
    the other arguments are that function's."""
    callbacks = standard_callbacks(train_config) if callbacks is None else callbacks
    return training.train(task, model_config, train_config, out_dir, callbacks=callbacks, **kwargs)


def train_many(
    task: TaskConfig,
    model_config=None,
    train_config: TrainConfig | None = None,
    seeds: Sequence[int] = (0,),
    out_dirs=None,
    *,
    callbacks: Sequence[EvalCallback] | None = None,
    **kwargs,
) -> list[pd.DataFrame]:
    """:func:`interp.train.training.train_many` with :func:`standard_callbacks` (or
    ``callbacks``)."""
    callbacks = standard_callbacks(train_config) if callbacks is None else callbacks
    return training.train_many(
        task, model_config, train_config, seeds, out_dirs, callbacks=callbacks, **kwargs
    )
