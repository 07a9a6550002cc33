"""Training runs: one readable loop that samples fresh batches, trains, evaluates and checkpoints.

A run directory holds everything needed to analyse or resume a run::

    run/
      config.json          task, model and train configs (and the format version)
      metrics.csv          one row per evaluation (accuracies, losses, progress measures)
      per_class_iw.csv     one row per evaluation: IW accuracy of each class (per_class_iw > 0)
      checkpoints/
        step_00001000.safetensors   weights, on a log-spaced + regular + "where things
                                    happen" schedule
        resume.pt                   model, optimizer, RNG state, step: written atomically at
                                    every evaluation and on Ctrl-C

``train`` returns the metrics as a pandas DataFrame; :func:`interp.io.rundir.load_run` reopens a
finished run. What each evaluation computes is handed in as callbacks (:class:`EvalCallback`):
this module knows no measure, forecast or figure.

The default setting is the author's code's (the paper does not state it): plain SGD, lr 0.01, weight
decay 1e-6 (the author's multiplicative shrink), batch 128 of fresh sequences.
Adam (or another lr) is allowed and is recorded in ``config.json``; label it as a deviation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from interp.config.train_config import (
    TrainConfig,
    check_device,
    checkpoint_schedule,
    derive_seed,
)
from interp.data.device_sampler import sample_on_used
from interp.data.task import TaskConfig
from interp.data.tasks import get_task, make_generator, task_name
from interp.io.budget import is_out_of_memory, out_of_memory_error
from interp.io.errors import CheckpointError, ResourceError
from interp.io.rundir import (
    RunDirectoryError,
    RunWriter,
    configs_dict,
)
from interp.model.backends import stacks, training_loss
from interp.model.interventions import intervention_hooks
from interp.model.network import InductionNet, ModelConfig
from interp.train.allocator import retain_freed_memory
from interp.train.backend_choice import choose_backend
from interp.train.optim import SGD, Adam
from interp.train.optim import _Optimizer as Optimizer
from interp.train.step_reads import add_loss, add_stacked_losses, positions_in_range_of
from interp.train.stop_signals import stop_at_step_boundary
from interp.train.threads import apply_thread_policy

__all__ = [
    "EvalCallback",
    "train",
    "train_many",
    "TrainingDiverged",
    "TrainingInterrupted",
    "run_training_loop",
]

log = logging.getLogger(__name__)
_COUNTERS = ("step", "loss_sum", "loss_count")  # the resume state's loop counters


class EvalCallback(Protocol):
    """What the loop calls at every evaluation, in the order given; the caller chooses them (the
    command line, a preset or :func:`interp.experiments.standard.train` hand in the standard
    evaluation of :mod:`interp.analysis.evaluation` and the live forecast of
    :mod:`phenomenology.forecast`). The loop itself computes only ``step`` and ``train_loss``.

    ``callback(run, row)`` returns the columns to add to the metrics row (``run`` is the run being
    trained: ``model``, ``cfg``, ``task``, ``generator``, ``eval_sets``, ``per_class_set``,
    ``rows`` (the earlier rows); ``row`` holds the columns of this evaluation so far). Optional
    attributes: ``table = "per_class_iw"`` sends the columns to ``per_class_iw.csv`` instead of
    the row (called only when ``TrainConfig.per_class_iw > 0``); ``progress(row) -> dict[str,
    str]`` adds to what the progress bar shows. Every column ending in ``_loss`` (but
    ``train_loss``) must be finite, or the run stops as diverged.
    """

    def __call__(self, run: Any, row: dict) -> Mapping[str, float]: ...


class TrainingDiverged(RuntimeError):
    """The training loss (or an evaluation) became NaN or infinite. The last good checkpoint is
    kept."""


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped at a step boundary on SIGINT (Ctrl-C) or SIGTERM, its state saved.

    Attributes:
        signum: the signal that asked for the stop.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def train(
    task: TaskConfig,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = True,
    stop_after: int | None = None,
    kind: str = "induction_net",
    callbacks: Sequence[EvalCallback] = (),
) -> pd.DataFrame:
    """Train the network on fresh batches of the task; evaluate, checkpoint and resume.

    The one training loop of the toolkit: other models (the minimal induction head of
    :mod:`phenomenology.minimal`) train through it with their ``kind`` and get the same run
    directory, resume, atomic writes, signal handling and progress bar.

    Args:
        task: the task.
        model_config: the network (default: the paper's network for ``task``).
        train_config: optimiser and schedule (default: the author's code's SGD, the toolkit's 1e5
            steps).
        out_dir: run directory; ``None`` trains in memory without writing anything.
        resume: continue the run in ``out_dir`` from its last resume state. The result is the same
            as an uninterrupted run, bit for bit, on the same machine.
        overwrite: delete the run in ``out_dir`` (only the files a run consists of; a directory
            that is not a run is never written into) and start again.
        progress: show a progress bar with the step, losses and accuracies; ``None`` shows it
            only when stderr is a terminal (a log file or CI gets none).
        stop_after: stop (as if interrupted, state saved) once this many steps are done; for tests
            and for splitting a long run into several invocations.
        kind: the kind of model (:data:`interp.io.rundir.RUN_KINDS`), recorded in ``config.json``;
            ``model_config`` is that kind's config.
        callbacks: what is evaluated at every evaluation (:class:`EvalCallback`); none: only
            ``step`` and ``train_loss``. :func:`interp.experiments.standard.train` passes the
            standard ones.

    Returns:
        The metrics, one row per evaluation (also in ``out_dir/metrics.csv``).

    Raises:
        TrainingDiverged: the training loss or an evaluation became NaN or infinite (metrics
            and the last good checkpoint are kept).
        TrainingInterrupted: SIGINT or SIGTERM stopped the run at a step boundary (state saved;
            a subclass of KeyboardInterrupt).
        RunDirectoryError: ``out_dir`` cannot take this run (see
            :class:`interp.io.rundir.RunWriter`): nothing was written then.
    """
    run = _RunState(
        task,
        model_config,
        train_config,
        out_dir,
        resume,
        overwrite,
        kind=kind,
        callbacks=callbacks,
    )
    try:
        _loop([run], _single_step(run), progress, stop_after)
    except (MemoryError, RuntimeError) as err:
        if not is_out_of_memory(err):
            raise
        removed = run.close(discard=True)  # a new run with no checkpoint yet leaves nothing
        raise run.out_of_memory(err, removed) from None
    finally:
        run.close()
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
    callbacks: Sequence[EvalCallback] = (),
) -> list[pd.DataFrame]:
    """Train one run per seed, all together in this process (see :mod:`interp.model.stacked`).

    Each seed gets exactly what :func:`train` would give it (its own weights, data stream,
    evaluation sets and run directory, in the same format; a run started here can be resumed by
    :func:`train` and the other way round), equal to float rounding rather than bit for bit,
    because the stacked products add in another order. Faster than one process per seed when
    per-operation overhead dominates (small batches, CPU); see ``benchmarks/bench_many.py``.

    Args:
        seeds: one run per seed (``train_config.seed`` is replaced).
        out_dirs: one run directory per seed (``None``: train in memory).
        resume, overwrite, progress, stop_after, callbacks: as in :func:`train`; resumed runs
            must all be at the same step (runs interrupted together are).

    Returns:
        The metrics of each run, in the order of ``seeds``.

    Raises:
        ValueError: the model cannot be stacked (:func:`interp.model.stacked.supports_stacking`), an
            intervention or the hooked backend is asked for, or seeds/out_dirs do not match.
    """
    from interp.model.stacked import supports_stacking

    train_config = train_config or TrainConfig()
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds!r} is invalid: give one or more distinct seeds")
    if out_dirs is not None and len(out_dirs) != len(seeds):
        raise ValueError(f"out_dirs has {len(out_dirs)} entries for {len(seeds)} seeds")
    if train_config.intervention is not None or not stacks(
        train_config.backend, train_config.device
    ):
        raise ValueError(
            "train_many needs backend='fast' (or 'compiled' off the CPU) and no intervention "
            f"(got backend={train_config.backend!r}, intervention={train_config.intervention!r}); "
            "train such runs one per process with train()"
        )
    probe = InductionNet(model_config or ModelConfig.from_task(task), seed=None)
    if not supports_stacking(probe):
        raise ValueError(
            "this model cannot be trained stacked (needs 2 layers, 1 head, and one-hot, learned or "
            "no positions); train it one per process with train()"
        )
    runs: list[_RunState] = []
    try:
        for i, seed in enumerate(seeds):
            runs.append(
                _RunState(
                    task,
                    model_config,
                    dataclasses.replace(train_config, seed=seed),
                    None if out_dirs is None else out_dirs[i],
                    resume,
                    overwrite,
                    callbacks=callbacks,
                )
            )
        if len({r.step for r in runs}) > 1:
            raise RunDirectoryError(
                "the runs to resume stand at different steps "
                f"({ {str(r.out): r.step for r in runs} }); resume them one by one with train()"
            )
        return _train_stacked(runs, train_config, progress, stop_after)
    finally:
        for run in runs:
            run.close()


def _train_stacked(runs, train_config, progress, stop_after) -> list[pd.DataFrame]:
    from interp.model.stacked import ModelStack

    stack = ModelStack([r.model for r in runs])
    optimizer = _make_optimizer(stack.parameters(), train_config)
    if runs[0].optimizer_state is not None:
        optimizer.load_state_dict(_stack_optimizer_states([r.optimizer_state for r in runs]))
    for i, run in enumerate(runs):
        run.optimizer_state_fn = lambda i=i: _slice_optimizer_state(optimizer.state_dict(), i)
        if run.writer is not None:  # the fast path with a model axis (config.json says so)
            run.writer.record_backend("stacked")
    _loop(runs, _stacked_step(runs, stack, optimizer), progress, stop_after)
    return [pd.DataFrame(r.rows) for r in runs]


def _make_optimizer(params: list, cfg: TrainConfig) -> Optimizer:
    """The optimiser (:mod:`interp.train.optim`: torch's SGD and Adam updates as multi-tensor
    operations); with the ``multiplicative`` weight-decay form it gets no weight decay of its own
    (:func:`_shrink_weights` applies it)."""
    decay = cfg.weight_decay if cfg.weight_decay_form == "coupled" else 0.0
    if cfg.optimizer == "sgd":
        return SGD(params, lr=cfg.lr, weight_decay=decay, momentum=cfg.momentum)
    return Adam(params, lr=cfg.lr, weight_decay=decay)


def _shrink_weights(optimizer: Optimizer, cfg: TrainConfig) -> None:
    """The author's weight decay: every parameter times ``1 - weight_decay``, applied after the
    gradient was computed and before the optimiser's update, so one step is exactly
    ``theta <- (1 - wd) theta - lr * grad`` for SGD. Like torch's optimisers (and their coupled
    decay), it skips a parameter that got no gradient this step (``grad is None``: a weight an
    intervention cut out of the graph stays at its initialisation)."""
    if cfg.weight_decay_form != "multiplicative" or cfg.weight_decay == 0:
        return
    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if not params:
        return
    with torch.no_grad():
        torch._foreach_mul_(params, 1.0 - cfg.weight_decay)


def _update(optimizer: Optimizer, cfg: TrainConfig) -> None:
    """The author's weight decay (:func:`_shrink_weights`), then the optimiser's update: for the
    paper's plain SGD two multi-tensor ops, the same two roundings per weight as
    ``p.mul_(1 - wd)`` and ``torch.optim.SGD.step``'s ``p.add_(grad, alpha=-lr)``, bit for bit
    (``tests/interp/test_training.py``); such SGD keeps no state."""
    _shrink_weights(optimizer, cfg)
    optimizer.step()


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
    """One run inside the training loop: its directory, data, model, schedule and progress.

    Args:
        kind: the kind of model (:data:`interp.io.rundir.RUN_KINDS`); ``induction_net`` is the
            network, ``minimal_induction_head`` the minimal model of :mod:`phenomenology.minimal`.
        callbacks: what each evaluation computes (:class:`EvalCallback`).
    """

    def __init__(
        self,
        task,
        model_config,
        train_config,
        out_dir,
        resume,
        overwrite,
        *,
        kind: str = "induction_net",
        callbacks: Sequence[EvalCallback] = (),
    ) -> None:
        from interp.io.rundir import RUN_KINDS

        get_task(task_name(task))  # a task that is not registered stops here, before any write
        model_config = model_config or ModelConfig.from_task(task)
        cfg = train_config or TrainConfig()
        cfg = self.cfg = dataclasses.replace(cfg, sample_on=sample_on_used(task, cfg.sample_on))
        if (model_config.D, model_config.L) != (task.D, task.L):
            raise ValueError(
                f"model_config (D={model_config.D}, L={model_config.L}) does not match task "
                f"(D={task.D}, L={task.L}); build it with ModelConfig.from_task(task)"
            )
        if (
            isinstance(model_config, ModelConfig)
            and model_config.n_positions < task.seq_len
            and model_config.positional != "none"
        ):
            raise ValueError(
                f"model_config.n_positions={model_config.n_positions} is too small for sequences "
                f"of {task.seq_len} tokens"
            )
        check_device(cfg)
        # Everything is checked: only now is anything written.
        apply_thread_policy(cfg.num_threads)  # interp.train.threads: one thread by default
        retain_freed_memory()  # reuse freed step tensors instead of page-faulting them anew
        self.device = device = torch.device(cfg.device)
        self.callbacks = tuple(callbacks)
        self.task = task
        self.out = Path(out_dir) if out_dir is not None else None
        self.writer = (
            RunWriter.open(
                self.out,
                configs_dict(task, model_config, cfg, kind),
                resume=resume,
                overwrite=overwrite,
                map_location=device,
            )
            if self.out is not None
            else None
        )
        try:
            self._build(task, model_config, cfg, kind, RUN_KINDS[kind].model_class())
        except BaseException as err:
            removed = self.close(discard=True)  # a new run that failed here leaves nothing behind
            if is_out_of_memory(err):
                raise self.out_of_memory(err, removed) from None
            raise

    def _build(self, task, model_config, cfg, kind, model_class) -> None:
        device = self.device
        self.generator = make_generator(task, seed=derive_seed(cfg.seed, "task"))
        self.eval_sets = {
            k: v.to(device)
            for k, v in self.generator.eval_sets(derive_seed(cfg.seed, "eval")).items()
        }
        # The per-class IW set (docs/run-format.md, per_class_iw.csv): its own seed, so turning it
        # on changes nothing else of the run.
        self.per_class_set = None
        if cfg.per_class_iw:
            g = torch.Generator().manual_seed(derive_seed(cfg.seed, "per_class_iw"))
            self.per_class_set = self.generator.per_class_iw(cfg.per_class_iw, g).to(device)
        self.model = model_class(model_config, seed=derive_seed(cfg.seed, "init") % 2**63).to(
            device
        )
        self.optimizer = None  # set by the step function that owns it
        self.optimizer_state = None  # the resumed optimizer state, until an optimizer takes it
        self.optimizer_state_fn = None  # () -> this run's optimizer state, for save_resume
        self.stream = torch.Generator().manual_seed(derive_seed(cfg.seed, "stream"))
        self.sampler = self.sampler_state = None  # sample_on="device": the batches' own stream
        # A task with a sampler of its own draws on the host (sample_on_used recorded that).
        if cfg.sample_on == "device" and _device_sampler_draws(self.generator):
            from interp.data.device_sampler import DeviceSampler

            seeds = [derive_seed(cfg.seed, "stream")]
            self.sampler = DeviceSampler([self.generator], seeds, cfg.batch_size, device)
            self.sampler_state = lambda: self.sampler.get_state(0)
        self.hooks = (
            intervention_hooks(cfg.intervention, self.model, task) if cfg.intervention else []
        )
        self.step, self.loss_sum, self.loss_count, self.last_ic_acc = 0, 0.0, 0, None
        self.rows: list[dict] = []
        self.per_class_rows: list[dict] = []  # per_class_iw.csv, one row per evaluation
        self.last_eval_step = -1
        state = self.writer.resume_state if self.writer is not None else None
        if state is not None:
            _load_weights(self.model, state["model"], self.out)
            self.optimizer_state = state["optimizer"]
            self.stream.set_state(state["stream"])
            if self.sampler is not None:
                self.sampler.set_state([state["device_stream"]])
            self.generator._novel_counter = state["novel_counter"]
            self.step, self.loss_sum, self.loss_count = (state[k] for k in _COUNTERS)
            self.last_ic_acc = state["last_ic_acc"]
            self.last_eval_step = state["last_eval_step"]
            if "rows" in state:
                # The metrics come from the resume state, not from metrics.csv, which a user or a
                # disk may have damaged since; the file is rewritten from them.
                self.rows = [dict(r) for r in state["rows"]]
            else:  # resume states written before the rows were kept in them
                from interp.io.rundir import read_metrics

                frame = read_metrics(self.out / "metrics.csv").frame
                if len(frame):
                    frame = frame[frame["step"] <= self.last_eval_step]
                self.rows = frame.to_dict("records")
                if not self.rows or self.rows[-1]["step"] != self.last_eval_step:
                    raise RunDirectoryError(
                        f"{self.out / 'metrics.csv'} lacks the rows up to step "
                        f"{self.last_eval_step} and the resume state (an older format) does not "
                        "hold them; cannot resume exactly"
                    )
            if self.per_class_set is not None:
                if "per_class_rows" not in state:
                    raise RunDirectoryError(
                        f"{self.out / 'checkpoints' / 'resume.pt'} holds no per-class IW rows but "
                        "train.per_class_iw > 0; cannot resume exactly (use --overwrite to start "
                        "again)"
                    )
                self.per_class_rows = [dict(r) for r in state["per_class_rows"]]
        if state is not None:
            self.writer.confirm_resume()  # the state fits: config.json may now say what changed
        self.ckpt_steps = checkpoint_schedule(cfg)
        self._loss_fn = None  # the backend's loss, chosen at the first step
        # A resumed run keeps the backend it trained with (auto would choose again from the
        # steps left, and the backends agree only to float rounding).
        self.backend = state.get("backend") if state is not None else None

    def close(self, discard: bool = False) -> bool:
        """Release the run directory; with ``discard``, a new run that saved no checkpoint yet
        also removes what it created (:meth:`~interp.io.rundir.RunWriter.discard_unstarted`).
        Returns whether it did."""
        if self.writer is None:
            return False
        if discard:
            return self.writer.discard_unstarted()
        self.writer.close()
        return False

    def out_of_memory(self, err: BaseException, removed: bool) -> ResourceError:
        """The one-line error of a run that ran out of memory after its estimate let it start."""
        config = self.writer.config if self.writer is not None else {}
        return out_of_memory_error(err, config, self.out, getattr(self, "step", 0), removed)

    def save_resume(self) -> None:
        if self.writer is None:
            return
        self.writer.save_resume(
            {
                "model": {k: v.clone() for k, v in self.model.state_dict().items()},
                "optimizer": self.optimizer_state_fn(),
                "stream": self.stream.get_state(),
                "novel_counter": self.generator._novel_counter,
                "step": self.step,
                "loss_sum": float(self.loss_sum),  # a device sum between evaluations
                "loss_count": self.loss_count,
                "last_ic_acc": self.last_ic_acc,
                "last_eval_step": self.last_eval_step,
                "rows": [dict(r) for r in self.rows],
                "per_class_rows": [dict(r) for r in self.per_class_rows],
                **({"device_stream": self.sampler_state()} if self.sampler is not None else {}),
                **({"backend": self.backend} if self.backend is not None else {}),
            },
        )

    def _save_weights(self, step: int) -> None:
        if not all(bool(torch.isfinite(p).all()) for p in self.model.state_dict().values()):
            raise self.diverged(float("nan"), what="weights", at=step)
        self.writer.save_weights(step, self.model)

    def evaluate_if_due(self) -> dict | None:
        """Evaluate, log and checkpoint if this step is an evaluation step; weights-only
        checkpoint if it is only a checkpoint step. Returns the metrics row, if any.

        An evaluation with a non-finite loss (or weights that are not finite) stops the run as
        diverged before anything of it is written: a checkpoint is good only if its evaluation
        is finite, and the resume state stays at the last good evaluation."""
        cfg, step = self.cfg, self.step
        if (step % cfg.eval_every == 0 or step == cfg.steps) and step > self.last_eval_step:
            row = {
                "step": step,
                "train_loss": self.loss_sum / self.loss_count if self.loss_count else float("nan"),
            }
            per_class = None
            for callback in self.callbacks:
                if getattr(callback, "table", None) != "per_class_iw":
                    row.update(callback(self, row))
                elif self.per_class_set is not None:
                    per_class = {"step": step, **callback(self, row)}
            bad = [k for k, v in row.items() if k.endswith("_loss") and k != "train_loss"]
            bad = [k for k in bad if not math.isfinite(row[k])]
            if bad:
                raise self.diverged(row[bad[0]], what=f"evaluation {bad[0]}", at=step)
            jumped = (
                cfg.checkpoint_on_jump is not None
                and self.last_ic_acc is not None
                and "ic_acc" in row
                and abs(row["ic_acc"] - self.last_ic_acc) > cfg.checkpoint_on_jump
            )
            if self.writer is not None and (step in self.ckpt_steps or jumped):
                self._save_weights(step)
            self.rows.append(row)
            if per_class is not None:
                self.per_class_rows.append(per_class)
            self.loss_sum, self.loss_count = 0.0, 0
            self.last_ic_acc, self.last_eval_step = row.get("ic_acc"), step
            if self.writer is not None:
                self.writer.write_metrics(self.rows)
                if per_class is not None:
                    self.writer.write_per_class_iw(self.per_class_rows)
            self.save_resume()
            return row
        if self.writer is not None and step in self.ckpt_steps:
            self._save_weights(step)
        return None

    # What the progress bar shows of each evaluation row: column -> short name.
    progress_columns = {"train_loss": "loss", "ic_acc": "ic", "iw_acc": "iw"}

    def sample(self):
        if self.sampler is not None:  # drawn on the device already
            return self.sampler.next_inputs()  # what the loss reads, without the metadata
        return self.generator.sample(self.cfg.batch_size, self.stream).to(self.device)

    def batch_loss(self, batch) -> torch.Tensor:
        """Cross-entropy of the query's label, by the forward the backend names
        (:func:`interp.model.backends.training_loss`)."""
        if self._loss_fn is None:  # the named backend, or auto's choice (one line on stderr)
            self.backend = self.backend or choose_backend(self)
            if self.writer is not None:  # config.json says which backend trains the run
                self.writer.record_backend(self.backend)
            self._loss_fn = training_loss(self.model, self.backend, hooked=bool(self.hooks))
        return self._loss_fn(batch.tokens, batch.positions, batch.target)

    def diverged(self, value: float, what: str = "training loss", at: int | None = None):
        """The error to raise: names the last good checkpoint (one whose evaluation was finite)."""
        out = self.out
        at = self.step + 1 if at is None else at
        good = (
            [s for s in self.writer.checkpoint_steps() if s <= self.last_eval_step]
            if (self.writer is not None)
            else []
        )
        return TrainingDiverged(
            f"{what} became {value} at step {at}"
            + (f" (seed {self.cfg.seed})" if out is None else f" ({out})")
            + "; stopped. "
            + (
                f"Metrics up to step {self.last_eval_step} are in {out / 'metrics.csv'}; the last "
                f"good checkpoint is step {good[-1] if good else 'none'}."
                if out is not None
                else ""
            )
            + " Try a smaller lr."
        )


def _load_weights(model, weights: Mapping[str, torch.Tensor], out: Path) -> None:
    """Load a resume state's weights into the run's model, refusing (naming ``resume.pt``) a
    state whose tensors do not fit it: a damaged file, or one of another network."""
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0] if lines else type(err).__name__
        raise CheckpointError(
            f"{out / 'checkpoints' / 'resume.pt'}: its weights do not fit the run's model "
            f"({detail}); nothing was changed (use --overwrite to start again)"
        ) from None


def _device_sampler_draws(generator) -> bool:
    from interp.data.device_sampler import draws

    return draws(generator)


def _single_step(run: Any):
    """One optimisation step of one run (any object with the loop's run attributes: ``model``,
    ``cfg``, ``optimizer_state``, ``sample()``, ``batch_loss(batch)``, ``diverged(value)`` and the
    loss accumulators; :class:`_RunState` is the network's, :mod:`interp.train.token_training` has
    another)."""
    model = run.model
    optimizer = run.optimizer = _make_optimizer(
        [p for p in model.parameters() if p.requires_grad], run.cfg
    )
    if run.optimizer_state is not None:
        optimizer.load_state_dict(run.optimizer_state)
    run.optimizer_state_fn = optimizer.state_dict

    in_range = positions_in_range_of(run)

    def step() -> None:
        with in_range():
            loss = run.batch_loss(run.sample())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        _update(optimizer, run.cfg)
        add_loss(run, loss)  # summed on the device, read before each evaluation

    return step


def _joint_sampler(runs: list[_RunState]):
    """With ``sample_on="device"``: one :class:`~interp.data.device_sampler.DeviceSampler` for all
    runs of a stack, continuing each run's own stream (the batches each would draw alone); each
    run's resume state reads its part of it. ``None`` for host sampling."""
    if runs[0].sampler is None:
        return None
    from interp.data.device_sampler import DeviceSampler

    joint = DeviceSampler(
        [r.generator for r in runs],
        [derive_seed(r.cfg.seed, "stream") for r in runs],
        runs[0].cfg.batch_size,
        runs[0].device,
    )
    joint.set_state([r.sampler.get_state(0) for r in runs])
    for i, run in enumerate(runs):
        run.sampler, run.sampler_state = joint, (lambda i=i: joint.get_state(i))
    return joint


def _stacked_step(runs: list[_RunState], stack, optimizer):
    """One optimisation step of every run, as one stacked computation."""
    from interp.model.stacked import stacked_logits

    S = len(runs)
    joint = _joint_sampler(runs)

    total = None  # each run's losses since the last evaluation, summed on the device
    in_range = positions_in_range_of(runs[0])  # one task and model config for all

    def step() -> None:
        nonlocal total
        if joint is not None:  # every run's batch drawn on the device in one go
            tokens, positions, target = joint.next_stacked()
        else:
            batches = [r.sample() for r in runs]
            tokens = torch.stack([b.tokens for b in batches])
            positions = torch.stack([b.positions for b in batches])
            target = torch.stack([b.target for b in batches])
        with in_range():
            logits = stacked_logits(stack, tokens, positions)
        losses = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
        losses = losses.view(S, -1).mean(1)  # each run's own mean loss: its own gradient
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        _update(optimizer, runs[0].cfg)
        total = add_stacked_losses(total, losses, runs)

    return step


def run_training_loop(run, *, progress: bool = False, stop_after: int | None = None) -> None:
    """Drive one run of any model through the toolkit's one training loop.

    ``run`` brings what varies (the loop owns the schedule, signal handling, divergence check,
    evaluation timing and progress bar): attributes ``cfg`` (:class:`TrainConfig`), ``model`` (a
    ``HookedRootModule``), ``hooks`` (forward hooks held during training), ``step``,
    ``loss_sum``, ``loss_count``, ``optimizer_state`` (None or a state to resume), ``out``
    (None or its run directory), ``progress_columns``; methods ``sample()``,
    ``batch_loss(batch) -> Tensor``, ``evaluate_if_due() -> dict | None``, ``save_resume()`` and
    ``diverged(value) -> Exception``. The network's runs are :class:`_RunState`; CoPE's token tasks
    (:mod:`interp.train.token_training`) bring their own.
    """
    _loop([run], _single_step(run), progress, stop_after)


def _loop(runs: list[_RunState], step_fn, progress: bool, stop_after: int | None) -> None:
    """The training loop shared by :func:`train` and :func:`train_many` (runs in lockstep)."""
    first = runs[0]
    cfg = first.cfg
    bar = tqdm(
        total=cfg.steps,
        initial=first.step,
        disable=None if progress is None else not progress,  # None: only on a terminal
        desc="train" if len(runs) == 1 else f"train x{len(runs)}",
        unit="step",
        file=sys.stderr,
    )
    try:
        with contextlib.ExitStack() as hooks, stop_at_step_boundary() as stop_requested:
            for run in runs:
                hooks.enter_context(run.model.hooks(fwd_hooks=run.hooks))
            while True:
                for run in runs:
                    row = run.evaluate_if_due()
                    if row is not None and run is first:
                        post = {
                            short: f"{row[col]:.3f}"
                            for col, short in run.progress_columns.items()
                            if col in row
                        }
                        for callback in getattr(run, "callbacks", ()):
                            if hasattr(callback, "progress"):
                                post.update(callback.progress(row))
                        bar.set_postfix(post)
                if first.step >= cfg.steps:
                    break
                if all(getattr(run, "stop_reason", None) for run in runs):
                    break  # every run asked to stop (a callback set its stop_reason)
                if stop_after is not None and first.step >= stop_after:
                    for run in runs:
                        run.save_resume()
                    break
                step_fn()
                for run in runs:
                    run.step += 1
                bar.update(1)
                if stop_requested():
                    # The signal arrived during the step: stop after it.
                    raise TrainingInterrupted(stop_requested())
    except KeyboardInterrupt as err:
        for run in runs:
            run.save_resume()
        bar.close()
        for run in runs:
            if run.out is not None:
                log.warning(
                    "interrupted at step %d; state saved. Resume with: induction-cliff train "
                    "--resume --out %s",
                    run.step,
                    run.out,
                )
        if isinstance(err, TrainingInterrupted):
            raise
        raise TrainingInterrupted(signal.SIGINT) from None
    finally:
        bar.close()
