"""How to train: the optimiser, schedule, seed and device of a run (:class:`TrainConfig`).

The defaults follow the author's code (the paper does not state them): plain SGD, lr 0.01, weight
decay 1e-6 in the author's multiplicative form (every step, ``theta <- (1 - 1e-6) theta - lr *
grad``), batch 128 of fresh sequences. 1e5 steps is the toolkit's default length (the paper gives
none; the author's driver defaults to 1.5e5). docs/science.md section 5 gives each default's source.
Adam (or another lr) is allowed and is recorded in ``config.json``; it is labelled as a deviation
wherever a run is shown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_STEPS = 10**9  # optimisation steps of a run, and its schedule's counts (default 1e5)

__all__ = [
    "TrainConfig",
    "INTERVENTIONS",
    "OPTIMIZERS",
    "WEIGHT_DECAY_FORMS",
    "BACKENDS",
    "SAMPLE_ON",
    "DEVICE_TYPES",
    "derive_seed",
    "checkpoint_schedule",
    "check_device",
    "check_device_here",
]

OPTIMIZERS = ("sgd", "adam")
# "multiplicative": the author's decoupled shrink, every weight times (1 - weight_decay) at each
# step, independent of lr. "coupled": torch's L2 term (weight_decay * theta added to the gradient,
# so the shrink per SGD step is lr * weight_decay: 100x weaker at lr 0.01); the form of runs
# written before format version 3.
WEIGHT_DECAY_FORMS = ("multiplicative", "coupled")
BACKENDS = ("auto", "fast", "hooked", "compiled")
# The training-time interventions on attention heads, carried out by
# interp.model.interventions.INTERVENTIONS (name -> layer and replaced pattern).
INTERVENTIONS = ("clamp_prev_token", "uniform_layer1", "uniform_layer2")
# Where training batches are drawn: "host", the CPU sampler of interp.data.task (the stream of
# every run written before the field existed); "device", interp.data.device_sampler on the
# training device (another stream: runs are not bit-identical to host-sampled ones).
SAMPLE_ON = ("host", "device")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The kinds of torch device a run can train on: tensors on ``meta`` hold no data, and other kinds
# (``vulkan``, ``xla``, ...) have no optimiser or sampler support here.
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
# A device of those kinds as torch writes it (``cuda``, ``cuda:1``): read without torch.
_DEVICE_NAME = re.compile(r"(cpu|cuda|mps|xpu)(?::(0|[1-9][0-9]*))?")


def _check_device(device) -> None:
    """A torch device name a run can train on (``cpu``, ``cuda``, ``cuda:0``, ``mps``, ``xpu``);
    the CPU has no index. Whether this machine has it: :func:`check_device_here`."""
    if not isinstance(device, str):
        raise ValueError(f"TrainConfig.device={device!r} is invalid: must be a string")
    named = _DEVICE_NAME.fullmatch(device)
    if named is not None:  # the usual spelling: no torch needed to read it
        kind, index = named.group(1), None if named.group(2) is None else int(named.group(2))
    else:  # another spelling: torch reads it, and says whether it is a device at all
        import torch

        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError):
            raise ValueError(
                f"TrainConfig.device={device!r} is invalid: not a torch device (cpu, cuda, "
                "cuda:0, mps, ...)"
            ) from None
        kind, index = parsed.type, parsed.index
    if kind not in DEVICE_TYPES:
        raise ValueError(
            f"TrainConfig.device={device!r} is invalid: a run trains on one of {DEVICE_TYPES}"
            + (" (meta tensors hold no data)" if kind == "meta" else "")
        )
    if kind == "cpu" and index not in (None, 0):
        raise ValueError(f"TrainConfig.device={device!r} is invalid: there is one CPU device (cpu)")


def check_device(cfg: TrainConfig) -> None:
    """A one-line ValueError when ``cfg.device`` names a device torch does not have here
    (:func:`check_device_here`), or ``cfg.backend`` is ``compiled`` and ``torch.compile`` cannot
    build code for it here."""
    if cfg.backend == "compiled":
        from interp.config.compiler import check_compiler

        check_compiler(cfg.device)
    check_device_here(cfg.device)


def check_device_here(device: str) -> None:
    """Refuse a device (valid for :class:`TrainConfig`) that this machine does not have: CUDA,
    MPS or XPU that torch does not see, or an index beyond the devices it sees. Judged before a run
    opens its folder and before a sweep on this machine starts
    (:func:`check_device`), not by :class:`TrainConfig` itself: a stored run
    of another machine still loads, and a Ray cluster's workers may have a device its driver
    lacks.

    Raises:
        ValueError: one line naming ``device`` and what this machine has.
    """
    import torch

    parsed = torch.device(device)
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        what = "torch sees no CUDA device"
    elif parsed.type == "mps":
        count = 1 if torch.backends.mps.is_available() else 0
        what = "MPS is not available"
    elif parsed.type == "xpu":
        xpu = getattr(torch, "xpu", None)
        count = xpu.device_count() if xpu is not None and xpu.is_available() else 0
        what = "torch sees no XPU device"
    else:
        return
    if count == 0:
        raise ValueError(f"TrainConfig.device={device!r} is invalid here: {what}")
    if parsed.index is not None and parsed.index >= count:
        raise ValueError(
            f"TrainConfig.device={device!r} is invalid here: torch sees {count} {parsed.type} "
            f"device(s), {parsed.type}:0 to {parsed.type}:{count - 1}"
        )


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How to train.

    Attributes:
        optimizer: ``sgd`` or ``adam`` (a deviation that moves the transition earlier). Source:
            author's code (the paper does not state it).
        lr: learning rate. Source: author's code (the paper does not state it).
        weight_decay: weight decay, in the form ``weight_decay_form`` says. Source: author's code
            (the paper does not state it).
        weight_decay_form: ``multiplicative`` (the default): every step multiplies each weight by
            ``1 - weight_decay`` before the optimiser's update, whatever the optimiser and lr;
            ``coupled``: torch's ``weight_decay`` argument (an L2 term in the gradient; SGD then
            shrinks by ``lr * weight_decay`` per step). Runs written before format version 3 used
            ``coupled`` and are migrated so on load. Source: author's code.
        momentum: SGD momentum. Source: author's code (the paper does not state it).
        batch_size: fresh sequences per step. Source: author's code (the paper does not state it).
        steps: optimisation steps. Source: toolkit (the paper gives no length; the author's driver
            defaults to 1.5e5).
        eval_every: steps between evaluations (each writes a row of ``metrics.csv``). Source:
            toolkit.
        checkpoint_every: steps between regular weight checkpoints. Source: toolkit.
        n_log_checkpoints: extra weight checkpoints, log-spaced between step 1 and ``steps``.
            Source: toolkit.
        checkpoint_on_jump: also checkpoint at any evaluation where IC accuracy moved by more than
            this since the previous one (dense checkpoints around the transition); ``None``
            disables. Source: toolkit.
        seed: the run's seed; class means, initial weights, the training stream and the evaluation
            sets each get their own stream derived from it (:func:`derive_seed`). Source: toolkit
            (the paper uses six seeds).
        device: torch device for training (``cpu`` by default). Source: toolkit.
        num_threads: torch CPU threads of the process (default 1, the fastest for these shapes
            and robust beside other busy processes: :mod:`interp.train.threads`). ``None`` (what
            configs written before the default was 1 hold) means the same default. Source:
            toolkit.
        intervention: a training-time intervention from :data:`INTERVENTIONS`, carried out by
            :mod:`interp.model.interventions` (``None``: plain training). Source:
            toolkit (the options follow Singh et al. 2024).
        backend: ``fast`` computes the training forward with :func:`interp.model.fast.fast_logits`
            (the same mathematics, equal to float rounding, ~1.4x faster on CPU), falling back to
            the hooked forward where it does not apply (interventions, RoPE/CoPE); ``hooked`` always
            uses the hooked forward; ``compiled`` is ``fast`` with its loss compiled by
            ``torch.compile`` (:mod:`interp.model.compiled`: a faster step on the CPU after
            10-60 s of compiling at the first step; equal to float rounding, not
            bit-identical to ``fast``; needs a C++ compiler on the CPU); ``auto`` (the default)
            takes ``compiled`` when the run's steps repay the compile, else ``fast``
            (:mod:`interp.train.backend_choice`; from the run and the machine, never the compile
            cache; it says which on stderr, ``config.json`` records it as ``trained_backends``,
            and a resumed run keeps it). Evaluation and probes always use the hooked model.
            Source: toolkit.
        live_forecast: at each evaluation on the plateau, forecast the transition step from the IC
            loss so far (:func:`phenomenology.live.live_forecast`) into the ``forecast_step``,
            ``forecast_low`` and ``forecast_high`` columns of ``metrics.csv`` and the progress bar.
        per_class_iw: held-out non-bursty sequences per class whose query is an item of that class,
            evaluated at every evaluation into ``per_class_iw.csv`` (one accuracy per class, the
            per-class in-weights curves of :mod:`interp.analysis.quanta`); 0 (the default) turns
            it off. The set is drawn once per run from its own seed (``derive_seed(seed,
            "per_class_iw")``) and costs ``K * per_class_iw`` sequences per evaluation. A
            ``config.json`` without the field (written before it existed) reads as 0, which is
            what such a run did. Source: toolkit.
        sample_on: where the training batches are drawn. ``device`` (the default since run
            format 5): :class:`interp.data.device_sampler.DeviceSampler` on ``device`` itself,
            many batches per call with the run's own generator there (no host work per step; the
            stream a GPU run needs, and about half the host sampler's cost on the CPU); a task
            with a sampler of its own (a registered task whose generator overrides ``sample``)
            draws with it on the host, and its run records ``host``. ``host``: the CPU sampler
            :meth:`interp.data.task.TaskGenerator.sample`, then moved to ``device`` (the default
            before format 5). The two draw the same distribution but different streams, so a
            ``device`` run is not bit-identical to the ``host`` run of its seed; stacked runs
            (``train_many``) draw what each would draw alone. A ``config.json`` of format 4 or
            earlier without the field reads as ``host``, which is what such a run did. Source:
            toolkit.
        stop_on_collapse: stop the run at the evaluation where its classifier is judged dead
            (:mod:`interp.analysis.collapse`; the judgement is reported whatever this says). A
            ``config.json`` without the field reads as ``False``, which is what such a run did.
            Source: toolkit.
    """

    optimizer: str = "sgd"
    lr: float = 0.01
    weight_decay: float = 1e-6
    weight_decay_form: str = "multiplicative"
    momentum: float = 0.0
    batch_size: int = 128
    steps: int = 100_000
    eval_every: int = 500
    checkpoint_every: int = 5000
    n_log_checkpoints: int = 20
    checkpoint_on_jump: float | None = 0.02
    seed: int = 0
    device: str = "cpu"
    num_threads: int | None = 1
    intervention: str | None = None
    backend: str = "auto"
    live_forecast: bool = True
    per_class_iw: int = 0
    sample_on: str = "device"
    stop_on_collapse: bool = False

    def __post_init__(self) -> None:
        for name in ("lr", "weight_decay", "momentum"):
            if not _is_real(getattr(self, name)):
                raise ValueError(
                    f"TrainConfig.{name}={getattr(self, name)!r} is invalid: must be a number"
                )
        if not (_is_int(self.seed) and 0 <= self.seed < 2**63):
            raise ValueError(f"TrainConfig.seed={self.seed!r} is invalid: must be an integer >= 0")
        if self.checkpoint_on_jump is not None and not (
            _is_real(self.checkpoint_on_jump)
            and math.isfinite(self.checkpoint_on_jump)
            and self.checkpoint_on_jump >= 0
        ):
            raise ValueError(
                f"TrainConfig.checkpoint_on_jump={self.checkpoint_on_jump!r} is invalid: must be "
                "None or a number >= 0"
            )
        _check_device(self.device)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"TrainConfig.optimizer={self.optimizer!r} is invalid: "
                f"allowed values are {OPTIMIZERS}"
            )
        if self.weight_decay_form not in WEIGHT_DECAY_FORMS:
            raise ValueError(
                f"TrainConfig.weight_decay_form={self.weight_decay_form!r} is invalid: allowed "
                f"values are {WEIGHT_DECAY_FORMS}"
            )
        for name in ("batch_size", "steps", "eval_every", "checkpoint_every"):
            value = getattr(self, name)
            if not (_is_int(value) and value > 0):
                raise ValueError(
                    f"TrainConfig.{name}={value!r} is invalid: must be a positive integer"
                )
        if not (_is_int(self.n_log_checkpoints) and self.n_log_checkpoints >= 0):
            raise ValueError(
                f"TrainConfig.n_log_checkpoints={self.n_log_checkpoints!r} is invalid: must be >= 0"
            )
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"TrainConfig.lr={self.lr!r} is invalid: must be a positive number")
        for name in ("weight_decay", "momentum"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"TrainConfig.{name}={value!r} is invalid: must be >= 0")
        if self.momentum >= 1:
            raise ValueError(
                f"TrainConfig.momentum={self.momentum!r} is invalid: must be in [0, 1) (at 1 or "
                "more the velocity never decays)"
            )
        if self.weight_decay_form == "multiplicative" and self.weight_decay >= 1:
            raise ValueError(
                f"TrainConfig.weight_decay={self.weight_decay!r} is invalid: the multiplicative "
                "form multiplies every weight by 1 - weight_decay each step, so it must be in "
                "[0, 1)"
            )
        for name in ("steps", "eval_every", "checkpoint_every", "n_log_checkpoints"):
            if getattr(self, name) > MAX_STEPS:
                raise ValueError(
                    f"TrainConfig.{name}={getattr(self, name)!r} is invalid: must be <= "
                    f"{MAX_STEPS:.0e} (the default is 1e5 steps)"
                )
        if self.num_threads is not None and not (
            _is_int(self.num_threads) and self.num_threads >= 1
        ):
            raise ValueError(
                f"TrainConfig.num_threads={self.num_threads!r} is invalid: >= 1 or None"
            )
        for name in ("live_forecast", "stop_on_collapse"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"TrainConfig.{name}={getattr(self, name)!r} is invalid: true or false"
                )
        if not (_is_int(self.per_class_iw) and self.per_class_iw >= 0):
            raise ValueError(
                f"TrainConfig.per_class_iw={self.per_class_iw!r} is invalid: must be an integer "
                ">= 0 (sequences per class; 0 turns the per-class evaluation off)"
            )
        if self.sample_on not in SAMPLE_ON:
            raise ValueError(
                f"TrainConfig.sample_on={self.sample_on!r} is invalid: allowed values are "
                f"{SAMPLE_ON}"
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
        """True for the default optimiser, the author's code's: plain SGD, lr 0.01, multiplicative
        weight decay 1e-6, no momentum."""
        return (
            self.optimizer == "sgd"
            and self.lr == 0.01
            and self.weight_decay == 1e-6
            and self.weight_decay_form == "multiplicative"
            and self.momentum == 0
        )

    def deviation_note(self) -> str:
        """A short label of how the optimiser differs from the default, the author's code's ('' if
        it does not)."""
        if self.is_paper_optimizer:
            return ""
        parts = []
        if self.optimizer != "sgd" or self.lr != 0.01 or self.momentum != 0:
            parts.append(
                f"{self.optimizer} lr {self.lr:g}"
                + (f" momentum {self.momentum:g}" if self.momentum else "")
                + " (author's code: SGD lr 0.01)"
            )
        if self.weight_decay != 1e-6 or self.weight_decay_form != "multiplicative":
            parts.append(
                f"weight decay {self.weight_decay:g} {self.weight_decay_form} "
                "(author's code: 1e-6 multiplicative)"
            )
        return "; ".join(parts)


def derive_seed(seed: int, purpose: str) -> int:
    """An independent 63-bit seed for one purpose (``"task"``, ``"init"``, ``"stream"``, ``"eval"``,
    ``"per_class_iw"``)."""
    import numpy as np  # numpy is needed once seeds are drawn, not to read or check a config

    purposes = {"task": 0, "init": 1, "stream": 2, "eval": 3, "per_class_iw": 4}
    state = np.random.SeedSequence([int(seed), purposes[purpose]]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def checkpoint_schedule(cfg: TrainConfig) -> set[int]:
    """Steps at which weights are saved: 0, log-spaced, every ``checkpoint_every``, and the last."""
    steps = {0, cfg.steps}
    steps.update(range(cfg.checkpoint_every, cfg.steps + 1, cfg.checkpoint_every))
    if cfg.n_log_checkpoints:
        import numpy as np

        steps.update(int(round(s)) for s in np.geomspace(1, cfg.steps, cfg.n_log_checkpoints))
    return steps
