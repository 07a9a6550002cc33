"""Atomic checkpoint files: weights in safetensors, resume state with torch.save.

Every ``torch.save`` file the toolkit reads goes through :func:`load_torch_file`
(``weights_only=True``: a pickle never runs code). Every file goes through the toolkit's one
atomic writer (:mod:`interp.io.atomic`), so an interruption leaves either the old file or the new
one, never half of one. Run directories as a whole are owned by :mod:`interp.io.rundir`.
"""

from __future__ import annotations

import os
import pickle
import re
import stat
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from interp.io.atomic import (
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
    write_with_atomic,
)
from interp.io.errors import CheckpointError, RunDirectoryError

if TYPE_CHECKING:
    import torch

__all__ = [
    "RESUME_NAME",
    "RESUME_KEYS",
    "STEP_RE",
    "CheckpointError",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "weights_path",
    "save_weights",
    "load_weights",
    "check_state",
    "list_steps",
    "stored_shape",
    "refuse_scalar_hidden_biases",
    "save_resume",
    "load_resume",
    "load_torch_file",
]

RESUME_NAME = "resume.pt"
# What a run directory's resume state holds whatever its version (training reads each of them).
RESUME_KEYS = (
    "model",
    "optimizer",
    "stream",
    "novel_counter",
    "step",
    "loss_sum",
    "loss_count",
    "last_ic_acc",
    "last_eval_step",
)
STEP_RE = re.compile(r"^step_(\d{8})\.safetensors$")


def weights_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"step_{step:08d}.safetensors"


def save_weights(directory: Path, step: int, model: torch.nn.Module, *, root=None) -> Path:
    """Save the model's parameters and buffers as ``step_{step:08d}.safetensors`` (``root``: the
    run directory, below which no link is followed; :mod:`interp.io.atomic`)."""
    import torch
    from safetensors.torch import save

    # A copy of each tensor: parameters may be views into a larger (stacked) tensor.
    state = {
        k: v.detach().cpu().clone(memory_format=torch.contiguous_format)
        for k, v in model.state_dict().items()
    }
    path = weights_path(directory, step)
    write_bytes_atomic(path, save(state, metadata={"step": str(step)}), root=root)
    return path


def check_state(state: dict, model: torch.nn.Module, path: Path) -> None:
    """Refuse weights that do not fit ``model`` or hold NaN or infinities, naming the tensor: a
    missing or unexpected tensor, another shape, another dtype (a float16 file is not upcast
    silently), a non-finite value.

    Raises:
        CheckpointError: one line naming ``path`` and the tensor.
    """
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks the tensor {missing[0]} of this model")
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise CheckpointError(
            f"checkpoint {path} holds the tensor {unexpected[0]}, which this model does not have"
        )
    for name, want in expected.items():
        problem = _tensor_problem(state[name], want)
        if problem:
            raise CheckpointError(f"checkpoint {path}: tensor {name} {problem}")


def _tensor_problem(have: torch.Tensor, want: torch.Tensor) -> str | None:
    """Why the saved tensor ``have`` cannot stand for the model's ``want`` (None: it can)."""
    import torch

    if tuple(have.shape) != tuple(want.shape):
        return f"has shape {list(have.shape)}, this model's is {list(want.shape)}"
    if have.dtype != want.dtype:
        have_type, want_type = (str(t.dtype).removeprefix("torch.") for t in (have, want))
        return f"is {have_type}, this model's is {want_type}"
    if have.is_floating_point() and not bool(torch.isfinite(have).all()):
        return "holds " + ("NaN" if bool(torch.isnan(have).any()) else "infinite values")
    return None


def load_weights(directory: Path, step: int, model: torch.nn.Module) -> None:
    """Load ``step_{step:08d}.safetensors`` into ``model`` (strict), with a clear error if broken
    (:func:`check_state`: every tensor present, of the model's shape and dtype, finite)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = weights_path(directory, step)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"cannot read checkpoint {path}: it is missing, truncated or corrupted ({first})"
        ) from None
    check_state(state, model, path)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = " ".join(str(err).split())
        raise CheckpointError(f"checkpoint {path} does not fit this model: {first}") from None


def list_steps(directory: Path) -> list[int]:
    """Steps that have a weight checkpoint in ``directory``, ascending."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := STEP_RE.match(p.name)))


def stored_shape(directory: Path, name: str) -> tuple[Path, list[int]] | None:
    """The shape of tensor ``name`` in the earliest weight checkpoint in ``directory``, read from
    the file's header alone, and that file; None when there is no checkpoint, or it does not hold
    ``name`` or cannot be read (:func:`load_weights` names a damaged one when the run reads it)."""
    from safetensors import SafetensorError, safe_open

    steps = list_steps(directory)
    if not steps:
        return None
    path = weights_path(directory, steps[0])
    try:
        with safe_open(str(path), "pt") as f:
            if name not in f.keys():
                return None
            return path, list(f.get_slice(name).get_shape())
    except (SafetensorError, OSError, ValueError):
        return None


def refuse_scalar_hidden_biases(config_path: Path, version: int, assumed: str) -> None:
    """Refuse a network's config labelled older than format 4 (no ``model.hidden_bias``, read as
    ``assumed``, the per-unit form of those runs) whose checkpoints hold one bias per hidden
    layer, the scalar form of a later run: a mislabelled config, refused in one line naming it
    and the checkpoint before anything loads or is written."""
    found = stored_shape(Path(config_path).parent / "checkpoints", "classifier.hidden.0.bias")
    if found is not None and found[1] == [1]:
        raise RunDirectoryError(
            f"{config_path}: format_version {version} without model.hidden_bias reads as "
            f"{assumed!r}, but {found[0]} holds one bias per hidden layer: a mislabelled config "
            '(add "hidden_bias": "scalar" to its model to open the run)'
        )


def save_resume(path: Path, state: dict, *, root=None) -> None:
    """Atomically save the full resume state (model, optimizer, RNG, step, accumulators)."""
    import torch

    write_with_atomic(path, lambda f: torch.save(state, f), root=root)


def _unpickle(f, path: Path, what: str, map_location):
    """``torch.load`` of the open file ``f`` with ``weights_only=True``; a failure is one line
    naming ``path``."""
    import torch

    try:
        return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "GLOBAL" in str(err) or "add_safe_globals" in str(err):
            # A pickle that asks for code to run (a global, an object): never run, whoever
            # wrote it. Other refusals of the safe unpickler are bytes that are no pickle.
            raise CheckpointError(
                f"refusing to load {what} {path}: it holds objects other than tensors and "
                "plain data (a file this toolkit did not write, or was tampered with)"
            ) from None
        raise CheckpointError(f"cannot read {what} {path}: it is truncated or corrupted") from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        # torch raises several types for cut or damaged zip archives
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"cannot read {what} {path}: it is truncated or corrupted ({first})"
        ) from None


def load_torch_file(
    path: str | os.PathLike,
    *,
    what: str = "torch file",
    kind: type | None = None,
    required: tuple[str, ...] = (),
    map_location=None,
):
    """The toolkit's one reader of ``torch.save`` files (``resume.pt``, a token run's
    ``model.pt``, weights to import): read with ``weights_only=True`` always, so a pickle that
    asks for code to run is refused and never run, whoever wrote the file.

    Args:
        what: what the file is, as the error says it (``resume state``, ``weights``).
        kind: the type the file must hold (``dict``); None: any.
        required: keys the file must hold: then it must hold a dict with each of them.

    Raises:
        CheckpointError: one line naming ``path``: the file is missing, truncated or corrupted,
            holds objects other than tensors and plain data, is not a dict or lacks a key of
            ``required``.
    """
    path = Path(path)
    try:  # never blocks: a FIFO or a device is refused below, not read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CheckpointError(f"cannot read {what} {path}: the file is missing") from None
    except OSError as err:
        raise CheckpointError(f"cannot read {what} {path}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CheckpointError(f"cannot read {what} {path}: it is not a regular file")
        data = _unpickle(f, path, what, map_location)
    if required:
        kind = dict
    if kind is not None and not isinstance(data, kind):
        raise CheckpointError(
            f"{what} {path} holds a {type(data).__name__}, not a {kind.__name__} "
            "(a damaged or foreign file)"
        )
    if required:
        missing = [k for k in required if k not in data]
        if missing:
            raise CheckpointError(
                f"{what} {path} lacks the key {missing[0]!r} (a damaged or foreign file)"
            )
    return data


def load_resume(path: Path, map_location=None) -> dict:
    """Load a run directory's resume state (:func:`load_torch_file`), with a clear error if the
    file is missing, truncated, corrupted, holds anything but tensors and plain data, or lacks
    a key of :data:`RESUME_KEYS`."""
    return load_torch_file(
        path, what="resume state", required=RESUME_KEYS, map_location=map_location
    )
