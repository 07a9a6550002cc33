"""Atomic checkpoint files: weights in safetensors, resume state with torch.save.

Every file is written to a temporary name in the same directory, flushed and fsynced, then renamed
over the target (``os.replace`` is atomic on POSIX), so an interruption leaves either the old file or
the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

__all__ = [
    "RESUME_NAME",
    "CheckpointError",
    "write_bytes_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "weights_path",
    "save_weights",
    "load_weights",
    "list_steps",
    "save_resume",
    "load_resume",
]

RESUME_NAME = "resume.pt"
_STEP_RE = re.compile(r"^step_(\d{8})\.safetensors$")


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated or corrupted."""


def _atomic(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    _atomic(path, lambda f: f.write(data))


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def weights_path(directory: Path, step: int) -> Path:
    return Path(directory) / f"step_{step:08d}.safetensors"


def save_weights(directory: Path, step: int, model: torch.nn.Module) -> Path:
    """Save the model's parameters and buffers as ``step_{step:08d}.safetensors``."""
    # A copy of each tensor: parameters may be views into a larger (stacked) tensor.
    state = {
        k: v.detach().cpu().clone(memory_format=torch.contiguous_format)
        for k, v in model.state_dict().items()
    }
    path = weights_path(directory, step)
    write_bytes_atomic(path, save(state, metadata={"step": str(step)}))
    return path


def load_weights(directory: Path, step: int, model: torch.nn.Module) -> None:
    """Load ``step_{step:08d}.safetensors`` into ``model`` (strict), with a clear error if broken."""
    path = weights_path(directory, step)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"cannot read checkpoint {path}: it is missing, truncated or corrupted ({err})"
        ) from err
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {path} does not fit this model: {err}") from err


def list_steps(directory: Path) -> list[int]:
    """Steps that have a weight checkpoint in ``directory``, ascending."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := _STEP_RE.match(p.name)))


def save_resume(path: Path, state: dict) -> None:
    """Atomically save the full resume state (model, optimizer, RNG, step, accumulators)."""

    def write(f):
        torch.save(state, f)

    _atomic(path, write)


def load_resume(path: Path, map_location=None) -> dict:
    """Load a resume state, with a clear error if the file is truncated or corrupted."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for broken pickles/zips
        raise CheckpointError(
            f"cannot read resume state {path}: it is truncated or corrupted ({err})"
        ) from err
