"""Bring weights of this architecture trained elsewhere into a run directory.

A state dict of :class:`~interp.model.network.InductionNet` (``torch.save(model.state_dict())``
in any training code that builds the same network, a checkpoint dict holding one under
``state_dict``, ``model_state_dict`` or ``model``, or a ``.safetensors`` file) becomes a run
directory that every command reads: ``config.json`` (the task, the model and the training said
to have produced it), ``checkpoints/`` with the weights at ``step``, and ``metrics.csv`` with one
evaluation of them (accuracy and loss on the run's IC, IC2 and IW sets and every registered
progress measure), plus ``imported.json`` saying where the weights came from::

    from interp.experiments.importer import import_weights
    import_weights("trained.pt", "runs/imported", task=get_preset("demo").task)

or ``induction-cliff import trained.pt runs/imported --preset demo``. Every tensor is checked
against the architecture the configs build before anything is written; one that is missing,
unexpected or of another shape is refused with one line naming it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import torch

from interp.data.task import TaskConfig
from interp.io.checkpoints import load_torch_file
from interp.io.errors import CheckpointError

__all__ = [
    "StateDictError",
    "UnreadableWeightsError",
    "check_state_dict",
    "import_weights",
    "read_state_dict",
]

_WRAPPERS = ("state_dict", "model_state_dict", "model")


class StateDictError(ValueError):
    """The weights do not fit the architecture (the message is one line naming the tensor)."""


class UnreadableWeightsError(StateDictError, CheckpointError):
    """The weights file is missing, damaged, or holds objects other than tensors and plain data
    (one line naming it; an unusable file, exit 3)."""


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The state dict in ``path``: a ``.safetensors`` file, or a ``torch.save`` file (tensors
    and plain data only: read by :func:`interp.io.checkpoints.load_torch_file`; a checkpoint
    dict is unwrapped).

    Raises:
        UnreadableWeightsError: the file is missing or unreadable, or its pickle would run code.
        StateDictError: the file holds something else than a state dict.
    """
    path = Path(path)
    if not path.is_file():
        raise UnreadableWeightsError(f"{path} is not a file")
    if path.suffix == ".safetensors":  # this toolkit's own checkpoints, and many hubs'
        from safetensors.torch import load_file

        try:
            data = load_file(path, device="cpu")
        except Exception as err:  # noqa: BLE001 - any unreadable file is the same user error
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UnreadableWeightsError(f"{path} is not a state dict file: {first}") from None
    else:
        try:
            data = load_torch_file(path, what="state dict file", map_location="cpu")
        except CheckpointError as err:
            raise UnreadableWeightsError(str(err)) from None
    if isinstance(data, Mapping):
        for key in _WRAPPERS:
            if isinstance(data.get(key), Mapping) and not isinstance(data.get(key), torch.Tensor):
                data = data[key]
                break
    if not isinstance(data, Mapping):
        raise StateDictError(f"{path} holds a {type(data).__name__}, not a state dict")
    for name, value in data.items():
        if not isinstance(value, torch.Tensor):
            raise StateDictError(
                f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor"
            )
    return dict(data)


def _shape(t) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def check_state_dict(state: Mapping[str, torch.Tensor], model, where: str = "state dict") -> None:
    """Raise a one-line :class:`StateDictError` naming the first tensor of ``state`` that is
    missing from, not part of, or of another shape than ``model``'s (or not finite)."""
    expected = model.state_dict()
    arch = _describe(model.cfg)
    for name, target in expected.items():
        if name not in state:
            raise StateDictError(
                f"{where}: tensor {name!r} is missing; this architecture ({arch}) needs shape "
                f"{_shape(target)}"
            )
    for name, value in state.items():
        if name not in expected:
            raise StateDictError(
                f"{where}: tensor {name!r} is not part of this architecture ({arch}); its "
                f"tensors are {list(expected)[:4]}..."
            )
        if _shape(value) != _shape(expected[name]):
            raise StateDictError(
                f"{where}: tensor {name!r} has shape {_shape(value)}; this architecture ({arch}) "
                f"needs {_shape(expected[name])}"
            )
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise StateDictError(f"{where}: tensor {name!r} has non-finite entries")


def _describe(cfg) -> str:
    return (
        f"D={cfg.D}, L={cfg.L}, positional={cfg.positional}, d_model={cfg.d_model}, "
        f"n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, d_head={cfg.d_head_effective}, "
        f"d_mlp={cfg.d_mlp}, n_mlp_layers={cfg.n_mlp_layers}"
    )


def import_weights(
    source: str | os.PathLike | Mapping[str, torch.Tensor],
    out: str | os.PathLike,
    *,
    task: TaskConfig,
    model=None,
    train=None,
    step: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write a run directory holding ``source``'s weights (see the module docstring).

    Args:
        source: a ``.safetensors`` or ``torch.save`` file of the state dict, or the state dict.
        out: the run directory to create (an existing run only with ``overwrite``).
        task: the task the weights were trained on (its evaluation sets are the run's).
        model: the :class:`~interp.model.network.ModelConfig` (default: the paper's network for
            ``task``).
        train: the :class:`~interp.train.training.TrainConfig` said to have produced the
            weights, recorded in ``config.json`` (default: the toolkit's defaults; its ``seed``
            picks the evaluation sets). Nothing is trained.
        step: the training step of the weights (the checkpoint and the metrics row).
        overwrite: replace a run in ``out``.

    Returns:
        ``out``.

    Raises:
        StateDictError: a tensor is missing, unexpected, of another shape or not finite (one line
            naming it), before anything is written.
        interp.io.rundir.RunDirectoryError: ``out`` cannot be used.
    """
    from interp.analysis.evaluation import evaluate
    from interp.io.atomic import write_json_atomic
    from interp.io.rundir import RunWriter, configs_dict, load_run
    from interp.model.network import InductionNet, ModelConfig
    from interp.train.training import TrainConfig

    if isinstance(step, bool) or not (isinstance(step, int) and step >= 0):
        raise StateDictError(f"step={step!r} is invalid: must be an integer >= 0")
    model_cfg = model if model is not None else ModelConfig.from_task(task)
    train_cfg = train if train is not None else TrainConfig()
    if isinstance(source, Mapping):
        state, where, digest = dict(source), "state dict", None
    else:
        where = str(source)
        state = read_state_dict(source)
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    net = InductionNet(model_cfg, seed=0)
    check_state_dict(state, net, where)
    net.load_state_dict({k: v.to(net.state_dict()[k].dtype) for k, v in state.items()}, strict=True)
    net.eval()
    out = Path(out)
    config = configs_dict(task, model_cfg, train_cfg)
    with RunWriter.open(out, config, overwrite=overwrite) as writer:
        writer.save_weights(step, net)
        row = {"step": step, "train_loss": float("nan")}
        row.update(evaluate(net, load_run(out).eval_sets()))
        writer.write_metrics([row])
        write_json_atomic(
            out / "imported.json",
            {"source": where, "sha256": digest, "step": step, "tensors": len(state)},
        )
    return out
