"""Atomic checkpoint files: weights in safetensors, resume state with torch.save.

Every file goes through the toolkit's one atomic writer (:mod:`interp.io.atomic`), so an interruption
leaves either the old file or the new one, never half of one. Run directories as a whole are owned
by :mod:`interp.io.rundir`.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from interp.io.atomic import (
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
    write_with_atomic,
)

__all__ = [
    "RESUME_NAME",
    "STEP_RE",
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
STEP_RE = re.compile(r"^step_(\d{8})\.safetensors$")


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated or corrupted."""


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
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"cannot read checkpoint {path}: it is missing, truncated or corrupted ({first})"
        ) from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise CheckpointError(f"checkpoint {path} does not fit this model: {first}") from None


def list_steps(directory: Path) -> list[int]:
    """Steps that have a weight checkpoint in ``directory``, ascending."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := STEP_RE.match(p.name)))


def save_resume(path: Path, state: dict) -> None:
    """Atomically save the full resume state (model, optimizer, RNG, step, accumulators)."""

    write_with_atomic(path, lambda f: torch.save(state, f))


def load_resume(path: Path, map_location=None) -> dict:
    """Load a resume state, with a clear error if the file is truncated or corrupted."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError as err:
        raise CheckpointError(f"cannot read resume state {path}: the file is missing") from err
    except pickle.UnpicklingError as err:
        if "weights_only" in str(err) or "Weights only load failed" in str(err):
            # A complete file whose pickle asks for code to run: never loaded, whoever wrote it.
            raise CheckpointError(
                f"refusing to load resume state {path}: it holds objects other than tensors and "
                "plain data (a file this toolkit did not write, or was tampered with)"
            ) from None
        raise CheckpointError(
            f"cannot read resume state {path}: it is truncated or corrupted"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        # torch raises several types for cut or damaged zip archives
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"cannot read resume state {path}: it is truncated or corrupted ({first})"
        ) from None
