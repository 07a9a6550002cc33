"""What the notebooks run: a preset's configs, the folder of their runs, and the training (the
standard run of :mod:`interp.experiments.standard`) or reuse of a finished run."""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.train.presets import Preset, get_preset

__all__ = ["NotebookSetting", "notebook_setting", "repository_root", "runs_root"]

logger = logging.getLogger(__name__)

# Where the runs live when neither a checkout nor the working directory says (an installed wheel).
RUNS_ENV = "INDUCTION_CLIFF_RUNS_ROOT"


def repository_root() -> Path | None:
    """The checkout this package was imported from (a clone, an editable install), or ``None``
    when it runs from an installed wheel (``site-packages`` holds no ``pyproject.toml``)."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "interp" / "__init__.py").is_file():
        return root
    return None


def runs_root() -> Path:
    """The folder that holds ``runs/demo`` and the notebooks' runs.

    In order: ``INDUCTION_CLIFF_RUNS_ROOT``; the ``runs`` folder of the checkout this package runs
    from (where ``bash scripts/demo.sh`` writes ``runs/demo``); for an installed wheel, the first
    ``runs`` folder holding a ``demo`` run in the working directory or a folder above it; else
    ``runs`` in the working directory.
    """
    configured = os.environ.get(RUNS_ENV)
    if configured:
        return Path(configured)
    root = repository_root()
    if root is not None:
        return root / "runs"
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "runs" / "demo" / "config.json").is_file():
            return folder / "runs"
    return here / "runs"


@dataclass(frozen=True, kw_only=True)
class NotebookSetting:
    """The preset, configs and run folder a notebook works with.

    Attributes:
        small: whether ``INDUCTION_CLIFF_SMALL`` asked for the small (CI) setting.
        preset: ``tiny`` (small) or ``demo``.
        train: the preset's train config (700 steps, evaluations every 25, when small: the tiny
            preset's transition comes after ~500 steps).
        model: the model config of the preset's task.
        runs: folder of the notebook runs and of what the notebooks write (fits, figures):
            ``INDUCTION_CLIFF_RUNS``, default ``notebooks`` in :func:`runs_root`.
        demo_run: a finished run of the same setting to reuse instead of training seed 0 again
            (``INDUCTION_CLIFF_DEMO_RUN``, default ``demo`` in :func:`runs_root`: the
            ``runs/demo`` that ``scripts/demo.sh`` trains; not used in the small setting). It is
            only read: what a notebook writes about it goes under :attr:`runs`.
    """

    small: bool
    preset: Preset
    train: TrainConfig
    model: object
    runs: Path
    demo_run: Path | None = None

    def ensure_run(self, seed: int = 0, intervention: str | None = None) -> Path:
        """Train the run (or resume or reuse it if it is there) and return its directory.

        Seed 0 without intervention is :attr:`demo_run` when that is a finished run of exactly
        this setting; nothing is written into it. Training shows no progress bar (a notebook
        would keep every update as output).
        """
        from interp.experiments.standard import train

        cfg = dataclasses.replace(self.train, seed=seed, intervention=intervention)
        if self.demo_run is not None and seed == 0 and intervention is None:
            if _finished_run_of(self.demo_run, self.preset.task, self.model, cfg):
                logger.info("reusing the finished run %s", self.demo_run)
                return self.demo_run
            logger.warning(
                "no finished demo run at %s (bash scripts/demo.sh trains it): training seed 0 "
                "under %s",
                self.demo_run,
                self.runs,
            )
        name = f"{self.preset.name}-seed{seed}" + (f"-{intervention}" if intervention else "")
        train(self.preset.task, self.model, cfg, self.runs / name, resume=True, progress=False)
        return self.runs / name


# Train-config fields that do not change what a run computes (where and how fast it ran).
_EXECUTION_FIELDS = ("device", "num_threads", "backend")


def _finished_run_of(path: Path, task: TaskConfig, model, train_cfg: TrainConfig) -> bool:
    """Whether ``path`` holds a run of this task, model and training, trained to the end."""
    from interp.io.rundir import load_run

    if not (Path(path) / "config.json").is_file():
        return False
    try:
        run = load_run(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        logger.info("not reusing %s: %s", path, err)
        return False
    ignore = {name: getattr(train_cfg, name) for name in _EXECUTION_FIELDS}
    same = (
        run.task == task
        and run.model_config == model
        and dataclasses.replace(run.train_config, **ignore) == train_cfg
    )
    done = len(run.metrics) > 0 and int(run.metrics["step"].iloc[-1]) >= train_cfg.steps
    if not (same and done):
        logger.info("not reusing %s: another setting, or not trained to the end", path)
    return same and done


def notebook_setting() -> NotebookSetting:
    """What the notebooks run: the ``demo`` preset, or ``tiny`` when ``INDUCTION_CLIFF_SMALL`` is
    set (CI), with runs under ``INDUCTION_CLIFF_RUNS``. The small setting uses one torch thread.
    The demo setting reuses ``runs/demo`` (or ``INDUCTION_CLIFF_DEMO_RUN``) for seed 0."""
    import torch

    from interp.model.network import ModelConfig

    small = os.environ.get("INDUCTION_CLIFF_SMALL", "0") not in ("", "0")
    if small:
        torch.set_num_threads(1)
    preset = get_preset("tiny" if small else "demo")
    train_cfg = (
        dataclasses.replace(preset.train, steps=700, eval_every=25) if small else preset.train
    )
    runs = os.environ.get("INDUCTION_CLIFF_RUNS")
    demo = os.environ.get("INDUCTION_CLIFF_DEMO_RUN")
    return NotebookSetting(
        small=small,
        preset=preset,
        train=train_cfg,
        model=ModelConfig.from_task(preset.task, **preset.model),
        runs=Path(runs) if runs else runs_root() / "notebooks",
        demo_run=None if small else Path(demo) if demo else runs_root() / "demo",
    )
