"""A CoPE token-task run kept in a folder: trained in chunks, resumable, equal to one run.

:func:`train_token_run` trains a :class:`~interp.model.token_net.TokenNet` on one of CoPE's token
tasks (:mod:`interp.data.cope_tasks`) through the toolkit's one training loop, as
:func:`interp.train.token_training.train_token_task` does, but into a folder:

    RUN/resume.pt    while it trains: weights, optimizer state, the batch stream's state, the
                     step, the loss accumulators and the evaluations so far (written at every
                     ``stop_after`` and when Ctrl-C or SIGTERM stops it at a step boundary)
    RUN/spec.json    what the run is (task, model, training settings); a resume under another
                     spec is refused, naming the field
    RUN/model.pt     once the run has reached its steps: the trained weights
    RUN/curve.csv    once the run has reached its steps: one row per evaluation

A call on a folder with ``model.pt`` trains nothing; one with ``resume.pt`` continues from it.
The batches come from the saved stream, so a run cut into chunks equals one uninterrupted run of
as many steps. ``resume.pt`` and ``model.pt`` are read with the toolkit's one torch loader
(:func:`interp.io.checkpoints.load_torch_file`: tensors and plain data only), and every file is
written by its one atomic writer below the run's root: a link there (the run folder itself, under
a grid's folder) is refused in one line before anything is read or written.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path

import pandas as pd
import torch

from interp.config.train_config import TrainConfig
from interp.io.atomic import write_bytes_atomic, write_text_atomic
from interp.io.checkpoints import check_state, load_torch_file
from interp.io.errors import CheckpointError, DamagedFileError, RunDirectoryError
from interp.io.inputs import read_csv, read_json
from interp.io.paths import check_no_links
from interp.model.network import ModelConfig
from interp.model.token_net import TokenNet
from interp.train.token_training import _TokenRun
from interp.train.training import run_training_loop

__all__ = [
    "RESUME",
    "MODEL",
    "CURVE",
    "SPEC",
    "check_run_folder",
    "read_resume_state",
    "train_token_run",
    "load_token_model",
    "run_spec",
]

RESUME, MODEL, CURVE, SPEC = "resume.pt", "model.pt", "curve.csv", "spec.json"
# What ``resume.pt`` holds, and the type of each entry.
_STATE = {
    "model": dict,
    "optimizer": (dict, type(None)),
    "stream": torch.Tensor,
    "step": int,
    "loss_sum": float,
    "loss_count": int,
    "rows": list,
    "last_eval": int,
}


def run_spec(task, cfg: ModelConfig, train: TrainConfig, n_test: int) -> dict:
    """What a run is, as ``spec.json`` keeps it (task class and fields, model, training)."""
    return {
        "task": {"class": type(task).__name__, **dataclasses.asdict(task)},
        "model": cfg.to_dict(),
        "train": {
            k: getattr(train, k)
            for k in ("optimizer", "lr", "batch_size", "steps", "eval_every", "seed")
        },
        "n_test": n_test,
    }


def _diff(old: dict, new: dict, prefix: str = "") -> str | None:
    """The first field where two specs differ (``train.lr: 0.003 != 0.001``), or None."""
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found = _diff(a, b, f"{prefix}{key}.")
            if found:
                return found
        elif a != b:
            return f"{prefix}{key}: {a!r} != {b!r}"
    return None


def _read_spec(path: Path) -> dict:
    try:
        spec = read_json(path)  # limits checked before parsing
    except (OSError, UnicodeDecodeError, ValueError, RunDirectoryError) as err:
        raise DamagedFileError(f"cannot read {path}: {str(err).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise DamagedFileError(f"{path} holds a {type(spec).__name__}, not a run's spec")
    return spec


class _FolderTokenRun(_TokenRun):
    """A token-task run whose state goes to ``out/resume.pt`` when the loop stops it (written
    below ``root``, where no link is followed)."""

    def __init__(self, task, model, cfg, tests, stream, out: Path, root: Path) -> None:
        super().__init__(task, model, cfg, tests, stream)
        self.out, self.root = out, root

    def save_resume(self) -> None:
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer_state_fn() if self.optimizer_state_fn else None,
            "stream": self.stream.get_state(),
            "step": self.step,
            "loss_sum": float(self.loss_sum),
            "loss_count": self.loss_count,
            "rows": self.rows,
            "last_eval": self._last_eval,
        }
        buffer = io.BytesIO()
        torch.save(state, buffer)
        write_bytes_atomic(self.out / RESUME, buffer.getvalue(), root=self.root)

    def load_resume(self) -> None:
        """Take up ``resume.pt``; one that is damaged, foreign or of another network is refused
        in one line naming it (:class:`~interp.io.errors.CheckpointError`)."""
        path = self.out / RESUME
        state = read_resume_state(path)
        check_state(state["model"], self.model, path)
        try:
            self.model.load_state_dict(state["model"])
            self.stream.set_state(state["stream"])
            rows = [dict(r) for r in state["rows"]]
        except (RuntimeError, TypeError, ValueError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CheckpointError(f"resume state {path} does not fit this run: {first}") from None
        self.optimizer_state = state["optimizer"]
        self.step, self.loss_sum, self.loss_count = (
            state["step"],
            state["loss_sum"],
            state["loss_count"],
        )
        self.rows, self._last_eval = rows, state["last_eval"]


def read_resume_state(path: str | os.PathLike) -> dict:
    """A token run's ``resume.pt`` (:func:`~interp.io.checkpoints.load_torch_file`), each entry
    of its type; else one line naming it (:class:`~interp.io.errors.CheckpointError`)."""
    state = load_torch_file(path, what="resume state", required=tuple(_STATE))
    for key, kind in _STATE.items():
        value = state[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointError(
                f"resume state {path}: {key} is a {type(value).__name__} (a damaged or "
                "foreign file)"
            )
    return state


def check_run_folder(run_dir: str | os.PathLike, root: str | os.PathLike) -> None:
    """Refuse a link on the way from ``root`` to the run folder ``run_dir`` or its files (one
    line naming it, :class:`~interp.io.errors.UnsafePathError`), before anything is read."""
    rel = Path(run_dir).relative_to(root)
    for name in (SPEC, RESUME, MODEL, CURVE):
        check_no_links(root, rel / name)


def train_token_run(
    task,
    cfg: ModelConfig,
    run_dir: str | Path,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    eval_every: int = 250,
    n_test: int = 512,
    stop_after: int | None = None,
    progress: bool = False,
    root: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """Train (or resume, or read back) one token-task run in ``run_dir``; see the module docstring.

    Args:
        task: a task config of :mod:`interp.data.cope_tasks` (it generates its sequences).
        cfg: the network (:func:`interp.model.token_net.token_model_config`).
        steps: the run's length; the evaluation sets are ``task.test_sets(n_test, ...)``.
        stop_after: stop at this step (saving ``resume.pt``), for a run trained in chunks.
        root: the folder below which no link may lie (a grid's folder: the run folder itself
            must then be a real folder); None: ``run_dir``.

    Returns:
        The evaluations so far (``step, train_loss, {set}_acc, {set}_seq_acc``), as
        :func:`~interp.train.token_training.train_token_task` returns them.

    Raises:
        ValueError: ``run_dir`` holds a run of another spec (the message names the field).
        interp.io.errors.CheckpointError: ``resume.pt`` is damaged or foreign (named).
        interp.io.errors.UnsafePathError: a link below ``root`` (named), before anything is read.
    """
    out = Path(run_dir)
    root = Path(root) if root is not None else out
    check_run_folder(out, root)
    train = TrainConfig(
        optimizer="adam",
        lr=lr,
        weight_decay=0.0,
        batch_size=batch_size,
        steps=steps,
        eval_every=eval_every,
        seed=seed,
    )
    spec = json.loads(json.dumps(run_spec(task, cfg, train, n_test)))  # as read back
    if (out / SPEC).exists():
        differs = _diff(_read_spec(out / SPEC), spec)
        if differs:
            raise ValueError(f"{out / SPEC} is another run's (field {differs}): use a new folder")
    if (out / MODEL).exists() and (out / CURVE).exists():
        return read_csv(out / CURVE)
    run = _FolderTokenRun(
        task,
        TokenNet(cfg, seed=seed),
        train,
        tests=task.test_sets(n_test, seed=seed + 2_000_003),
        stream=torch.Generator().manual_seed(seed + 1_000_003),
        out=out,
        root=root,
    )
    if os.path.lexists(out / RESUME):  # refused before anything is written
        run.load_resume()
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / SPEC, json.dumps(spec, indent=1, sort_keys=True) + "\n", root=root)
    run_training_loop(run, progress=progress, stop_after=stop_after)
    rows = pd.DataFrame([{k: float(v) for k, v in r.items()} for r in run.rows])
    if run.step >= steps:
        buffer = io.BytesIO()
        torch.save(run.model.state_dict(), buffer)
        write_bytes_atomic(out / MODEL, buffer.getvalue(), root=root)
        write_text_atomic(out / CURVE, rows.to_csv(index=False), root=root)
        (out / RESUME).unlink(missing_ok=True)
    return rows


def load_token_model(run_dir: str | Path) -> tuple[TokenNet, dict]:
    """The trained network of a finished run folder and its spec (a damaged ``model.pt`` is
    refused in one line naming it)."""
    out = Path(run_dir)
    spec = _read_spec(out / SPEC)
    model = TokenNet(ModelConfig.from_dict(spec["model"]), seed=None)
    state = load_torch_file(out / MODEL, what="weights", kind=dict)
    check_state(state, model, out / MODEL)
    model.load_state_dict(state)
    model.eval()
    return model, spec
