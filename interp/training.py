"""Training runs: one readable loop that samples fresh batches, trains, evaluates and checkpoints.

A run directory holds everything needed to analyse or resume a run::

    run/
      config.json          task, model and train configs (and the format version)
      metrics.csv          one row per evaluation (accuracies, losses, progress measures)
      checkpoints/
        step_00001000.safetensors   weights, on a log-spaced + regular + "where things happen" schedule
        resume.pt                   model, optimizer, RNG state, step: written atomically at every
                                    evaluation and on Ctrl-C

``train`` returns the metrics as a pandas DataFrame; :func:`load_run` reopens a finished run.

The paper's setting is plain SGD, lr 0.01, weight decay 1e-6, batch 128 of fresh sequences.
Adam (or another lr) is allowed and is recorded in ``config.json``; label it as a deviation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from interp import checkpoints
from interp.evaluation import evaluate
from interp.fast import fast_logits, supports_fast_path
from interp.interventions import INTERVENTIONS, intervention_hooks
from interp.model import InductionNet, ModelConfig, canonical_model_dict
from interp.task import TaskConfig, TaskGenerator

__all__ = [
    "TrainConfig",
    "train",
    "train_many",
    "load_run",
    "Run",
    "TrainingDiverged",
    "RunDirectoryError",
    "checkpoint_schedule",
    "derive_seed",
    "FORMAT_VERSION",
]

FORMAT_VERSION = 1
OPTIMIZERS = ("sgd", "adam")
BACKENDS = ("fast", "hooked")
# Fields added after format version 1 was first written, with the value that older runs used.
_LEGACY_TRAIN_DEFAULTS = {"backend": "hooked"}


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite. The last good checkpoint is kept."""


class RunDirectoryError(RuntimeError):
    """The run directory holds a different run (or no run, when resuming)."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How to train.

    Attributes:
        optimizer: ``sgd`` (the paper) or ``adam`` (a deviation that moves the transition earlier).
        lr: learning rate (the paper: 0.01 with SGD).
        weight_decay: L2 weight decay (the paper: 1e-6).
        momentum: SGD momentum (the paper: 0).
        batch_size: fresh sequences per step (the paper: 128).
        steps: optimisation steps (the paper: 1e5).
        eval_every: steps between evaluations (each writes a row of ``metrics.csv``).
        checkpoint_every: steps between regular weight checkpoints.
        n_log_checkpoints: extra weight checkpoints, log-spaced between step 1 and ``steps``.
        checkpoint_on_jump: also checkpoint at any evaluation where IC accuracy moved by more than
            this since the previous one (dense checkpoints around the transition); ``None`` disables.
        seed: the run's seed; class means, initial weights, the training stream and the evaluation
            sets each get their own stream derived from it (:func:`derive_seed`).
        device: torch device for training (``cpu`` by default).
        num_threads: torch CPU threads (``None`` leaves torch's default).
        intervention: a training-time intervention from :data:`interp.interventions.INTERVENTIONS`
            (``None``: plain training).
        backend: ``fast`` computes the training forward with :func:`interp.fast.fast_logits` (the
            same mathematics, equal to float rounding, ~1.4x faster on CPU), falling back to the
            hooked forward where it does not apply (interventions, RoPE/CoPE); ``hooked`` always uses
            the hooked forward. Evaluation and probes always use the hooked model.
    """

    optimizer: str = "sgd"
    lr: float = 0.01
    weight_decay: float = 1e-6
    momentum: float = 0.0
    batch_size: int = 128
    steps: int = 100_000
    eval_every: int = 500
    checkpoint_every: int = 5000
    n_log_checkpoints: int = 20
    checkpoint_on_jump: float | None = 0.02
    seed: int = 0
    device: str = "cpu"
    num_threads: int | None = None
    intervention: str | None = None
    backend: str = "fast"

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"TrainConfig.optimizer={self.optimizer!r} is invalid: allowed values are {OPTIMIZERS}"
            )
        for name in ("batch_size", "steps", "eval_every", "checkpoint_every"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(
                    f"TrainConfig.{name}={value!r} is invalid: must be a positive integer"
                )
        if not (isinstance(self.n_log_checkpoints, int) and self.n_log_checkpoints >= 0):
            raise ValueError(
                f"TrainConfig.n_log_checkpoints={self.n_log_checkpoints!r} is invalid: must be >= 0"
            )
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"TrainConfig.lr={self.lr!r} is invalid: must be a positive number")
        for name in ("weight_decay", "momentum"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"TrainConfig.{name}={value!r} is invalid: must be >= 0")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(
                f"TrainConfig.num_threads={self.num_threads!r} is invalid: >= 1 or None"
            )
        if self.backend not in BACKENDS:
            raise ValueError(
                f"TrainConfig.backend={self.backend!r} is invalid: allowed values are {BACKENDS}"
            )
        if self.intervention is not None and self.intervention not in INTERVENTIONS:
            raise ValueError(
                f"TrainConfig.intervention={self.intervention!r} is invalid: allowed values are "
                f"None or one of {tuple(INTERVENTIONS)}"
            )

    @property
    def is_paper_optimizer(self) -> bool:
        """True for the paper's optimiser: plain SGD, lr 0.01, weight decay 1e-6, no momentum."""
        return (
            self.optimizer == "sgd"
            and self.lr == 0.01
            and self.weight_decay == 1e-6
            and self.momentum == 0
        )

    def deviation_note(self) -> str:
        """A short label of how the optimiser differs from the paper's ('' if it does not)."""
        if self.is_paper_optimizer:
            return ""
        return f"{self.optimizer} lr {self.lr:g} (paper: SGD lr 0.01)"


def derive_seed(seed: int, purpose: str) -> int:
    """An independent 63-bit seed for one purpose (``"task"``, ``"init"``, ``"stream"``, ``"eval"``)."""
    purposes = {"task": 0, "init": 1, "stream": 2, "eval": 3}
    state = np.random.SeedSequence([int(seed), purposes[purpose]]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def checkpoint_schedule(cfg: TrainConfig) -> set[int]:
    """Steps at which weights are saved: 0, log-spaced, every ``checkpoint_every``, and the last."""
    steps = {0, cfg.steps}
    steps.update(range(cfg.checkpoint_every, cfg.steps + 1, cfg.checkpoint_every))
    if cfg.n_log_checkpoints:
        steps.update(int(round(s)) for s in np.geomspace(1, cfg.steps, cfg.n_log_checkpoints))
    return steps


def _configs_dict(task: TaskConfig, model: ModelConfig, train_cfg: TrainConfig) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "task": task.to_dict(),
        "model": model.to_dict(),
        "train": dataclasses.asdict(train_cfg),
    }


# Fields that may change when resuming without changing the mathematics of the run.
_RESUMABLE_TRAIN_FIELDS = {"steps", "device", "num_threads"}


def _train_fields(d: dict) -> dict:
    return {**_LEGACY_TRAIN_DEFAULTS, **d.get("train", {})}


def _same_run(a: dict, b: dict) -> bool:
    same_model = canonical_model_dict(a.get("model")) == canonical_model_dict(b.get("model"))
    if a.get("task") != b.get("task") or not same_model:
        return False
    ta = {k: v for k, v in _train_fields(a).items() if k not in _RESUMABLE_TRAIN_FIELDS}
    tb = {k: v for k, v in _train_fields(b).items() if k not in _RESUMABLE_TRAIN_FIELDS}
    return ta == tb


def _prepare_run_dir(out_dir: Path, configs: dict, resume: bool, overwrite: bool) -> bool:
    """Create or check the run directory. Returns True if there is a run to resume."""
    config_path = out_dir / "config.json"
    if config_path.exists():
        try:
            existing = json.loads(config_path.read_text())
        except json.JSONDecodeError as err:
            raise RunDirectoryError(f"{config_path} is not valid JSON ({err})") from err
        if overwrite:
            shutil.rmtree(out_dir)
        elif not resume:
            same = "the same" if _same_run(existing, configs) else "a different"
            raise RunDirectoryError(
                f"{out_dir} already holds a run with {same} config: pass resume=True (--resume) "
                "to continue it or overwrite=True (--overwrite) to start again"
            )
        elif not _same_run(existing, configs):
            raise RunDirectoryError(
                f"{out_dir} holds a run with a different config; only "
                f"{sorted(_RESUMABLE_TRAIN_FIELDS)} may change when resuming (use --overwrite to "
                "start again)"
            )
        else:
            return (out_dir / "checkpoints" / checkpoints.RESUME_NAME).exists()
    elif overwrite and out_dir.exists():
        shutil.rmtree(out_dir)
    (out_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    checkpoints.write_json_atomic(config_path, configs)
    return False


def train(
    task: TaskConfig,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
) -> pd.DataFrame:
    """Train the network on fresh batches of the task; evaluate, checkpoint and resume.

    Args:
        task: the task.
        model_config: the network (default: the paper's network for ``task``).
        train_config: optimiser and schedule (default: the paper's SGD, 1e5 steps).
        out_dir: run directory; ``None`` trains in memory without writing anything.
        resume: continue the run in ``out_dir`` from its last resume state. The result is the same
            as an uninterrupted run, bit for bit, on the same machine.
        overwrite: delete whatever ``out_dir`` holds and start again.
        progress: show a progress bar with the step, losses and accuracies.
        stop_after: stop (as if interrupted, state saved) once this many steps are done; for tests
            and for splitting a long run over sessions.

    Returns:
        The metrics, one row per evaluation (also in ``out_dir/metrics.csv``).

    Raises:
        TrainingDiverged: the training loss became NaN or infinite (metrics and the last good
            checkpoint are kept).
        RunDirectoryError: ``out_dir`` holds a different run and neither resume nor overwrite
            was asked for.
    """
    run = _RunState(task, model_config, train_config, out_dir, resume, overwrite)
    _loop([run], _single_step(run), progress, stop_after)
    return pd.DataFrame(run.rows)


def train_many(
    task: TaskConfig,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    seeds: Sequence[int] = (0,),
    out_dirs: Sequence[str | os.PathLike] | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
) -> list[pd.DataFrame]:
    """Train one run per seed, all together in this process (see :mod:`interp.stacked`).

    Each seed gets exactly what :func:`train` would give it (its own weights, data stream,
    evaluation sets and run directory, in the same format; a run started here can be resumed by
    :func:`train` and the other way round), equal to float rounding rather than bit for bit,
    because the stacked products add in another order. Faster than one process per seed when
    per-operation overhead dominates (small batches, CPU); see ``benchmarks/bench_many.py``.

    Args:
        seeds: one run per seed (``train_config.seed`` is replaced).
        out_dirs: one run directory per seed (``None``: train in memory).
        resume, overwrite, progress, stop_after: as in :func:`train`; resumed runs must all be at
            the same step (runs interrupted together are).

    Returns:
        The metrics of each run, in the order of ``seeds``.

    Raises:
        ValueError: the model cannot be stacked (:func:`interp.stacked.supports_stacking`), an
            intervention or the hooked backend is asked for, or seeds/out_dirs do not match.
    """
    from interp.stacked import ModelStack, supports_stacking

    train_config = train_config or TrainConfig()
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds!r} is invalid: give one or more distinct seeds")
    if out_dirs is not None and len(out_dirs) != len(seeds):
        raise ValueError(f"out_dirs has {len(out_dirs)} entries for {len(seeds)} seeds")
    if train_config.intervention is not None or train_config.backend != "fast":
        raise ValueError(
            "train_many needs backend='fast' and no intervention "
            f"(got backend={train_config.backend!r}, intervention={train_config.intervention!r}); "
            "train such runs one per process with train()"
        )
    probe = InductionNet(model_config or ModelConfig.from_task(task), seed=None)
    if not supports_stacking(probe):
        raise ValueError(
            "this model cannot be trained stacked (needs 2 layers, 1 head, and one-hot, learned or "
            "no positions); train it one per process with train()"
        )
    runs = [
        _RunState(
            task,
            model_config,
            dataclasses.replace(train_config, seed=seed),
            None if out_dirs is None else out_dirs[i],
            resume,
            overwrite,
        )
        for i, seed in enumerate(seeds)
    ]
    if len({r.step for r in runs}) > 1:
        raise RunDirectoryError(
            "the runs to resume stand at different steps "
            f"({ {str(r.out): r.step for r in runs} }); resume them one by one with train()"
        )
    stack = ModelStack([r.model for r in runs])
    optimizer = _make_optimizer(stack.parameters(), train_config)
    if runs[0].optimizer_state is not None:
        optimizer.load_state_dict(_stack_optimizer_states([r.optimizer_state for r in runs]))
    for i, run in enumerate(runs):
        run.optimizer_state_fn = lambda i=i: _slice_optimizer_state(optimizer.state_dict(), i)
    _loop(runs, _stacked_step(runs, stack, optimizer), progress, stop_after)
    return [pd.DataFrame(r.rows) for r in runs]


def _make_optimizer(params: list, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum
        )
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _slice_optimizer_state(state: dict, i: int) -> dict:
    """Model ``i``'s share of a stacked optimizer's state dict (a single run's format)."""
    return {
        "state": {
            k: {n: v[i].clone() if torch.is_tensor(v) and v.ndim > 0 else v for n, v in s.items()}
            for k, s in state["state"].items()
        },
        "param_groups": state["param_groups"],
    }


def _stack_optimizer_states(states: list[dict]) -> dict:
    """The inverse of :func:`_slice_optimizer_state`."""
    first = states[0]
    return {
        "state": {
            k: {
                n: torch.stack([st["state"][k][n] for st in states])
                if torch.is_tensor(v) and v.ndim > 0
                else v
                for n, v in s.items()
            }
            for k, s in first["state"].items()
        },
        "param_groups": first["param_groups"],
    }


class _RunState:
    """One run inside the training loop: its directory, data, model, schedule and progress."""

    def __init__(self, task, model_config, train_config, out_dir, resume, overwrite) -> None:
        model_config = model_config or ModelConfig.from_task(task)
        cfg = self.cfg = train_config or TrainConfig()
        if (model_config.D, model_config.L) != (task.D, task.L):
            raise ValueError(
                f"model_config (D={model_config.D}, L={model_config.L}) does not match task "
                f"(D={task.D}, L={task.L}); build it with ModelConfig.from_task(task)"
            )
        if model_config.n_positions < task.seq_len and model_config.positional != "none":
            raise ValueError(
                f"model_config.n_positions={model_config.n_positions} is too small for sequences "
                f"of {task.seq_len} tokens"
            )
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.device = device = torch.device(cfg.device)
        configs = _configs_dict(task, model_config, cfg)

        out = self.out = Path(out_dir) if out_dir is not None else None
        # A directory with a config but no resume state yet (or --resume on a new directory)
        # starts from scratch.
        can_resume = _prepare_run_dir(out, configs, resume, overwrite) if out is not None else False

        self.generator = TaskGenerator(task, seed=derive_seed(cfg.seed, "task"))
        self.eval_sets = {
            k: v.to(device)
            for k, v in self.generator.eval_sets(derive_seed(cfg.seed, "eval")).items()
        }
        self.model = InductionNet(model_config, seed=derive_seed(cfg.seed, "init") % 2**63).to(
            device
        )
        self.optimizer = None  # set by the step function that owns it
        self.optimizer_state = None  # the resumed optimizer state, until an optimizer takes it
        self.optimizer_state_fn = None  # () -> this run's optimizer state, for save_resume
        self.stream = torch.Generator().manual_seed(derive_seed(cfg.seed, "stream"))
        self.hooks = (
            intervention_hooks(cfg.intervention, self.model, task) if cfg.intervention else []
        )
        self.step, self.loss_sum, self.loss_count, self.last_ic_acc = 0, 0.0, 0, None
        self.rows: list[dict] = []
        if can_resume:
            state = checkpoints.load_resume(
                out / "checkpoints" / checkpoints.RESUME_NAME, map_location=device
            )
            self.model.load_state_dict(state["model"])
            self.optimizer_state = state["optimizer"]
            self.stream.set_state(state["stream"])
            self.generator._novel_counter = state["novel_counter"]
            self.step, self.loss_sum, self.loss_count = (
                state["step"],
                state["loss_sum"],
                state["loss_count"],
            )
            self.last_ic_acc = state["last_ic_acc"]
            self.rows = _read_metrics(out / "metrics.csv", up_to=state["last_eval_step"])
        self.ckpt_steps = checkpoint_schedule(cfg)
        self.last_eval_step = self.rows[-1]["step"] if self.rows else -1

    def save_resume(self) -> None:
        if self.out is None:
            return
        checkpoints.save_resume(
            self.out / "checkpoints" / checkpoints.RESUME_NAME,
            {
                "model": {k: v.clone() for k, v in self.model.state_dict().items()},
                "optimizer": self.optimizer_state_fn(),
                "stream": self.stream.get_state(),
                "novel_counter": self.generator._novel_counter,
                "step": self.step,
                "loss_sum": self.loss_sum,
                "loss_count": self.loss_count,
                "last_ic_acc": self.last_ic_acc,
                "last_eval_step": self.last_eval_step,
            },
        )

    def evaluate_if_due(self) -> dict | None:
        """Evaluate, log and checkpoint if this step is an evaluation step; weights-only
        checkpoint if it is only a checkpoint step. Returns the metrics row, if any."""
        cfg, step, out = self.cfg, self.step, self.out
        if (step % cfg.eval_every == 0 or step == cfg.steps) and step > self.last_eval_step:
            row = {
                "step": step,
                "train_loss": self.loss_sum / self.loss_count if self.loss_count else float("nan"),
            }
            row.update(evaluate(self.model, self.eval_sets))
            self.rows.append(row)
            self.loss_sum, self.loss_count = 0.0, 0
            jumped = (
                cfg.checkpoint_on_jump is not None
                and self.last_ic_acc is not None
                and abs(row["ic_acc"] - self.last_ic_acc) > cfg.checkpoint_on_jump
            )
            self.last_ic_acc, self.last_eval_step = row["ic_acc"], step
            if out is not None:
                _write_metrics(out / "metrics.csv", self.rows)
                if step in self.ckpt_steps or jumped:
                    checkpoints.save_weights(out / "checkpoints", step, self.model)
            self.save_resume()
            return row
        if out is not None and step in self.ckpt_steps:
            checkpoints.save_weights(out / "checkpoints", step, self.model)
        return None

    def sample(self):
        return self.generator.sample(self.cfg.batch_size, self.stream).to(self.device)

    def diverged(self, loss: float) -> TrainingDiverged:
        out = self.out
        last = checkpoints.list_steps(out / "checkpoints") if out is not None else []
        return TrainingDiverged(
            f"training loss became {loss} at step {self.step + 1}"
            + (f" (seed {self.cfg.seed})" if out is None else f" ({out})")
            + "; stopped. "
            + (
                f"Metrics are in {out / 'metrics.csv'}; the last good checkpoint is step "
                f"{last[-1] if last else 'none'} (resume state at step {self.last_eval_step})."
                if out is not None
                else ""
            )
            + " Try a smaller lr."
        )


def _single_step(run: _RunState):
    """One optimisation step of one run: the fast forward where it applies, else the hooked one."""
    model = run.model
    optimizer = run.optimizer = _make_optimizer(
        [p for p in model.parameters() if p.requires_grad], run.cfg
    )
    if run.optimizer_state is not None:
        optimizer.load_state_dict(run.optimizer_state)
    run.optimizer_state_fn = optimizer.state_dict
    use_fast = run.cfg.backend == "fast" and not run.hooks and supports_fast_path(model)

    def step() -> None:
        batch = run.sample()
        if use_fast:
            logits = fast_logits(model, batch.tokens, batch.positions)
        else:
            logits = model(batch.tokens, batch.positions)
        loss = F.cross_entropy(logits, batch.target)
        if not torch.isfinite(loss):
            raise run.diverged(loss.item())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        run.loss_sum += loss.item()
        run.loss_count += 1

    return step


def _stacked_step(runs: list[_RunState], stack, optimizer):
    """One optimisation step of every run, as one stacked computation."""
    from interp.stacked import stacked_logits

    S = len(runs)

    def step() -> None:
        batches = [r.sample() for r in runs]
        tokens = torch.stack([b.tokens for b in batches])
        positions = torch.stack([b.positions for b in batches])
        target = torch.stack([b.target for b in batches])
        logits = stacked_logits(stack, tokens, positions)
        losses = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
        losses = losses.view(S, -1).mean(1)  # each run's own mean loss: its own gradient
        values = losses.tolist()
        for run, value in zip(runs, values):
            if not math.isfinite(value):
                raise run.diverged(value)
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        optimizer.step()
        for run, value in zip(runs, values):
            run.loss_sum += value
            run.loss_count += 1

    return step


@contextlib.contextmanager
def _stop_at_step_boundary():
    """While training, Ctrl-C (SIGINT) asks the loop to stop after the current step instead of
    interrupting it half-way (a batch drawn but not learned from would make the resumed run differ
    from an uninterrupted one). Yields a function telling whether a stop was asked for. Only in
    the main thread (elsewhere, SIGINT keeps its usual meaning)."""
    requested = []

    def handler(signum, frame):
        if not requested:
            print("\nCtrl-C: stopping after this step...", file=sys.stderr, flush=True)
        requested.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield lambda: False
        return
    try:
        yield lambda: bool(requested)
    finally:
        signal.signal(signal.SIGINT, previous)


def _loop(runs: list[_RunState], step_fn, progress: bool, stop_after: int | None) -> None:
    """The training loop shared by :func:`train` and :func:`train_many` (runs in lockstep)."""
    first = runs[0]
    cfg = first.cfg
    bar = tqdm(
        total=cfg.steps,
        initial=first.step,
        disable=not progress,
        desc="train" if len(runs) == 1 else f"train x{len(runs)}",
        unit="step",
        file=sys.stderr,
    )
    try:
        with contextlib.ExitStack() as hooks, _stop_at_step_boundary() as stop_requested:
            for run in runs:
                hooks.enter_context(run.model.hooks(fwd_hooks=run.hooks))
            while True:
                for run in runs:
                    row = run.evaluate_if_due()
                    if row is not None and run is first:
                        bar.set_postfix(
                            loss=f"{row['train_loss']:.3f}",
                            ic=f"{row['ic_acc']:.3f}",
                            iw=f"{row['iw_acc']:.3f}",
                        )
                if first.step >= cfg.steps:
                    break
                if stop_after is not None and first.step >= stop_after:
                    for run in runs:
                        run.save_resume()
                    break
                step_fn()
                for run in runs:
                    run.step += 1
                bar.update(1)
                if stop_requested():
                    raise KeyboardInterrupt  # Ctrl-C arrived during the step: stop after it
    except KeyboardInterrupt:
        for run in runs:
            run.save_resume()
        bar.close()
        for run in runs:
            if run.out is not None:
                print(
                    f"\ninterrupted at step {run.step}; state saved. Resume with: induction-cliff "
                    f"train --resume --out {run.out}",
                    file=sys.stderr,
                )
        raise
    finally:
        bar.close()


def _write_metrics(path: Path, rows: list[dict]) -> None:
    checkpoints.write_text_atomic(path, pd.DataFrame(rows).to_csv(index=False))


def _read_metrics(path: Path, up_to: int) -> list[dict]:
    if not path.exists():
        return []
    df = pd.read_csv(path)
    return df[df["step"] <= up_to].to_dict("records")


@dataclass
class Run:
    """A finished (or interrupted) run, reopened from its directory.

    Attributes:
        path: the run directory.
        task: its :class:`TaskConfig`.
        model_config: its :class:`ModelConfig`.
        train_config: its :class:`TrainConfig`.
        metrics: ``metrics.csv`` as a DataFrame.
    """

    path: Path
    task: TaskConfig
    model_config: ModelConfig
    train_config: TrainConfig
    metrics: pd.DataFrame
    _generator: TaskGenerator | None = field(default=None, repr=False)

    @property
    def checkpoint_steps(self) -> list[int]:
        """Steps with saved weights, ascending."""
        return checkpoints.list_steps(self.path / "checkpoints")

    def load_model(self, step: int | None = None, device: str = "cpu") -> InductionNet:
        """The network with the weights of checkpoint ``step`` (default: the last one)."""
        steps = self.checkpoint_steps
        if not steps:
            raise FileNotFoundError(f"{self.path / 'checkpoints'} holds no weight checkpoints")
        if step is None:
            step = steps[-1]
        if step not in steps:
            raise ValueError(f"step={step} has no checkpoint; available steps: {steps}")
        model = InductionNet(self.model_config, seed=None)
        checkpoints.load_weights(self.path / "checkpoints", step, model)
        return model.to(device)

    def generator(self) -> TaskGenerator:
        """The run's task generator (same class means and label vectors)."""
        if self._generator is None:
            self._generator = TaskGenerator(
                self.task, seed=derive_seed(self.train_config.seed, "task")
            )
        return self._generator

    def eval_sets(self, n: int | None = None, n_pairs: int | None = None) -> dict:
        """The run's IC, IC2 and IW evaluation sets (the same ones training used, by default)."""
        seed = derive_seed(self.train_config.seed, "eval")
        return self.generator().eval_sets(seed, n=n, n_pairs=n_pairs)

    def deviation_note(self) -> str:
        """How this run's optimiser differs from the paper's ('' if it does not)."""
        return self.train_config.deviation_note()


def load_run(path: str | os.PathLike) -> Run:
    """Reopen a run directory written by :func:`train`."""
    path = Path(path)
    config_path = path / "config.json"
    if not config_path.exists():
        raise RunDirectoryError(f"{path} is not a run directory (no config.json)")
    cfg = json.loads(config_path.read_text())
    metrics_path = path / "metrics.csv"
    metrics = pd.read_csv(metrics_path) if metrics_path.exists() else pd.DataFrame()
    return Run(
        path=path,
        task=TaskConfig(**cfg["task"]),
        model_config=ModelConfig.from_dict(cfg["model"]),
        train_config=TrainConfig(**_train_fields(cfg)),
        metrics=metrics,
    )


def load_runs(paths: Sequence[str | os.PathLike]) -> list[Run]:
    """:func:`load_run` for several directories."""
    return [load_run(p) for p in paths]
