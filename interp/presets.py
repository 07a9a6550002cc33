"""Named settings for the CLI and notebooks: the paper's runs and a fast demo.

Each preset is a ``(TaskConfig, model overrides, TrainConfig)`` triple. Deviations from the paper's
settings are said in the preset's ``note`` and recorded in ``config.json`` through the configs.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from interp.task import TaskConfig
from interp.training import TrainConfig

__all__ = ["Preset", "PRESETS", "get_preset", "NotebookSetting", "notebook_setting"]


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named experiment setting.

    Attributes:
        name: preset name, as given to ``--preset``.
        task: the task.
        model: overrides of :class:`~interp.model.ModelConfig` fields (the rest from the task).
        train: optimiser and schedule.
        note: what the preset reproduces, and how it deviates from the paper.
    """

    name: str
    task: TaskConfig
    train: TrainConfig
    model: dict = field(default_factory=dict)
    note: str = ""


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="paper-fig1d",
            task=TaskConfig(K=512, L=32, N=8, B=2, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.0),
            train=TrainConfig(
                optimizer="sgd", lr=0.01, weight_decay=1e-6, batch_size=128, steps=100_000
            ),
            note="Reddy 2024 Fig 1d: K=512, B=2, plain SGD lr 0.01, batch 128, 1e5 steps.",
        ),
        Preset(
            name="paper-fig3",
            task=TaskConfig(K=256, L=32, N=8, B=1, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8),
            train=TrainConfig(
                optimizer="sgd", lr=0.01, weight_decay=1e-6, batch_size=128, steps=100_000
            ),
            note="Reddy 2024 Fig 3: K=256, B=1, p_C=0.8, plain SGD lr 0.01, batch 128, 1e5 steps.",
        ),
        Preset(
            name="demo",
            task=TaskConfig(
                K=256, L=32, N=8, B=1, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8, n_eval=1024
            ),
            train=TrainConfig(
                optimizer="adam",
                lr=2e-4,
                weight_decay=1e-6,
                batch_size=128,
                steps=3500,
                eval_every=50,
                checkpoint_every=500,
                n_log_checkpoints=12,
            ),
            note=(
                "Fast demo of the paper-fig3 task. DEVIATION: Adam lr 2e-4 for 3500 steps instead of "
                "the paper's SGD lr 0.01 for 1e5 steps, and 1024 sequences per evaluation set."
            ),
        ),
        Preset(
            name="tiny",
            task=TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=256),
            train=TrainConfig(
                optimizer="adam",
                lr=3e-3,
                batch_size=64,
                steps=200,
                eval_every=50,
                checkpoint_every=100,
                n_log_checkpoints=4,
            ),
            model=dict(d_mlp=32),
            note="Tiny smoke-test setting (seconds). DEVIATION: much smaller task and network, Adam.",
        ),
    ]
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``, or a ``ValueError`` listing the allowed names."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r} is invalid: allowed values are {sorted(PRESETS)}")
    return PRESETS[name]


@dataclass(frozen=True, kw_only=True)
class NotebookSetting:
    """The preset, configs and run folder a notebook works with.

    Attributes:
        small: whether ``INDUCTION_CLIFF_SMALL`` asked for the small (CI) setting.
        preset: ``tiny`` (small) or ``demo``.
        train: the preset's train config (700 steps, evaluations every 25, when small: the tiny
            preset's transition comes after ~500 steps).
        model: the model config of the preset's task.
        runs: folder of the notebook runs (``INDUCTION_CLIFF_RUNS``, default ``../runs/notebooks``).
    """

    small: bool
    preset: Preset
    train: TrainConfig
    model: object
    runs: Path

    def ensure_run(self, seed: int = 0, intervention: str | None = None) -> Path:
        """Train the run (or resume or reuse it if it is there) and return its directory."""
        from interp.training import train

        name = f"{self.preset.name}-seed{seed}" + (f"-{intervention}" if intervention else "")
        cfg = dataclasses.replace(self.train, seed=seed, intervention=intervention)
        train(
            self.preset.task,
            self.model,
            cfg,
            self.runs / name,
            resume=True,
            progress=not self.small,
        )
        return self.runs / name


def notebook_setting() -> NotebookSetting:
    """What the notebooks run: the ``demo`` preset, or ``tiny`` when ``INDUCTION_CLIFF_SMALL`` is
    set (CI), with runs under ``INDUCTION_CLIFF_RUNS``. The small setting uses one torch thread."""
    import torch

    from interp.model import ModelConfig

    small = os.environ.get("INDUCTION_CLIFF_SMALL", "0") not in ("", "0")
    if small:
        torch.set_num_threads(1)
    preset = get_preset("tiny" if small else "demo")
    train_cfg = (
        dataclasses.replace(preset.train, steps=700, eval_every=25) if small else preset.train
    )
    return NotebookSetting(
        small=small,
        preset=preset,
        train=train_cfg,
        model=ModelConfig.from_task(preset.task, **preset.model),
        runs=Path(os.environ.get("INDUCTION_CLIFF_RUNS", "../runs/notebooks")),
    )
