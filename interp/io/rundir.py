"""The run directory: the one module that reads and writes it.

A run directory is the toolkit's one data artifact (format: ``docs/run-format.md``)::

    run/
      config.json      format_version, kind, task, model and train configs
      metrics.csv      one row per evaluation
      per_class_iw.csv one row per evaluation: IW accuracy per class (train.per_class_iw > 0)
      checkpoints/     step_XXXXXXXX.safetensors weights, resume.pt (exact resumption)
      .lock            who is writing the run (pid, host); empty when nobody is
      fit.json, forecast.json, checkpoint_measures.csv, length_eval.csv, llc.csv, quanta.json,
      report.html      (outputs of the analysis commands)

Guarantees:

- **One writer.** :class:`RunWriter` takes an exclusive lock (``flock`` on ``.lock``) before it
  reads or writes anything; a second writer is refused with the holder's pid and host. A lock left
  by a dead process is taken over with a notice (the kernel drops ``flock`` locks of dead
  processes, so this cannot take a live writer's lock; :mod:`interp.io.lock`). Every command
  that writes an output into a run holds the same lock (:mod:`interp.io.outputs`). Readers need
  no lock: every file is replaced atomically (:mod:`interp.io.atomic`), so a reader sees an old
  or a new file, never half.
- **No links.** A symbolic link among a run's files (``checkpoints/`` included) is refused before
  anything is read to resume, written or deleted (:func:`check_run_tree`, :mod:`interp.io.paths`).
- **Nothing lost, nothing mixed.** A directory that is not a run is never written into; resuming a
  directory that holds run files but no readable config is refused; ``overwrite`` deletes only the
  files a run consists of (:data:`OWNED_FILES`), never anything else; resuming takes its state
  (step, metrics rows, optimiser, RNG) from ``resume.pt``, not from ``metrics.csv``.
- **Validated and versioned.** :func:`read_config` checks ``format_version`` (newer versions are
  refused, older ones migrated and marked), every field's name and type, and the configs' own
  validation; :func:`read_metrics` detects a torn last row or rows out of order and reports them.

Every error a user can cause is a :class:`RunDirectoryError` whose message is one line naming the
file and the field.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from interp.config.task_config import TaskConfig
from interp.config.train_config import TrainConfig, derive_seed
from interp.io import checkpoints
from interp.io.atomic import clean_temp_files, write_json_atomic, write_text_atomic
from interp.io.config_file import (
    FORMAT_VERSION,
    build_config,
    check_format_version,
    migrate,
    read_json_object,
)
from interp.io.errors import RunDirectoryError, RunLockedError, UnsafePathError, WriteError
from interp.io.layout import (
    CHECKPOINTS,
    CONFIG_NAME,
    METRICS_NAME,
    OWNED_FILES,
    _has_run_files,
    check_run_tree,
    remove_run_files,
)
from interp.io.lock import LOCK_NAME, RunLock
from interp.io.metrics import PER_CLASS_IW_NAME, MetricsFile, read_metrics, read_per_class_iw
from interp.io.outputs import output_path, write_output
from interp.io.paths import open_directory
from interp.io.run_kinds import (
    RUN_KINDS,
    register_lazy_run_kind,
    register_run_kind,
)

__all__ = [
    "FORMAT_VERSION",
    "RunDirectoryError",
    "RunLockedError",
    "UnsafePathError",
    "RunLock",
    "RunWriter",
    "Run",
    "load_run",
    "read_config",
    "read_metrics",
    "read_per_class_iw",
    "MetricsFile",
    "classify",
    "remove_run_files",
    "register_lazy_run_kind",
    "register_run_kind",
    "RUN_KINDS",
    "OWNED_FILES",
    "configs_dict",
    "same_run",
    "first_difference",
    "RESUMABLE_TRAIN_FIELDS",
    "TRAINED_BACKENDS",
]

log = logging.getLogger(__name__)

# Train fields that may change when resuming without changing the mathematics of the run.
RESUMABLE_TRAIN_FIELDS = ("steps", "device", "num_threads")
# The top-level field of config.json that says which backends trained the run
# (RunWriter.record_backend).
TRAINED_BACKENDS = "trained_backends"


# ---- configs ---------------------------------------------------------------------------------


def configs_dict(task: TaskConfig, model, train: TrainConfig, kind: str = "induction_net") -> dict:
    """What ``config.json`` holds for these configs."""
    model_dict = model.to_dict() if hasattr(model, "to_dict") else dataclasses.asdict(model)
    model_dict = {k: v for k, v in model_dict.items() if k != "kind"}
    from interp.io.plugins import plugins_used

    plugins = plugins_used(task, model, kind)
    return {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "task": task.to_dict(),
        "model": model_dict,
        "train": dataclasses.asdict(train),
    } | ({"plugins": plugins} if plugins else {})


def _comparable(d: Mapping) -> dict:
    train = {k: v for k, v in (d.get("train") or {}).items() if k not in RESUMABLE_TRAIN_FIELDS}
    kind = d.get("kind", "induction_net")
    model = d.get("model")
    if kind == "induction_net" and isinstance(model, Mapping):
        from interp.model.network import canonical_model_dict

        model = canonical_model_dict(model)  # an old config.json's flat rope_*/cope_* too
    return {"kind": kind, "task": d.get("task"), "model": model, "train": train}


def same_run(a: Mapping, b: Mapping) -> bool:
    """Whether two configs describe the same run (only :data:`RESUMABLE_TRAIN_FIELDS` differ)."""
    return _comparable(a) == _comparable(b)


def first_difference(a: Mapping, b: Mapping) -> str:
    """The first field in which two configs differ, as ``group.field A there, B here``."""
    a, b = _comparable(a), _comparable(b)
    if a["kind"] != b["kind"]:
        return f"kind {a['kind']!r} there, {b['kind']!r} here"
    for group in ("task", "model", "train"):
        ga, gb = a.get(group) or {}, b.get(group) or {}
        for k in sorted(set(ga) | set(gb)):
            if ga.get(k) != gb.get(k):
                return f"{group}.{k} {ga.get(k)!r} there, {gb.get(k)!r} here"
    return "nothing"


def read_config(path: str | os.PathLike) -> tuple[dict, list[str]]:
    """Read and validate a run's ``config.json``.

    Returns:
        ``(config, notes)``: the config in the current format and what migration changed.

    Raises:
        RunDirectoryError: missing, not JSON, a newer format, an unknown kind, or any field
            invalid (the message names it).
    """
    path = Path(path)
    config = read_json_object(path)
    check_format_version(config.get("format_version", 1), path)
    config, notes = migrate(config, path)
    for group in ("task", "model", "train"):
        if group not in config:
            raise RunDirectoryError(f"{path}: the field {group!r} is missing")
        if not isinstance(config[group], Mapping):
            raise RunDirectoryError(
                f"{path}: field {group} must be a JSON object, found {json.dumps(config[group])}"
            )
    if config.get("kind") not in RUN_KINDS:
        raise RunDirectoryError(f"{path}: {RUN_KINDS.unknown(config.get('kind'))}")
    done = config.get(TRAINED_BACKENDS, [])
    if not isinstance(done, list) or not all(isinstance(b, str) for b in done):
        raise RunDirectoryError(
            f"{path}: field {TRAINED_BACKENDS} must be a list of backend names, found "
            f"{json.dumps(done)}"
        )
    return config, notes


def parse_configs(config: dict, path: Path):
    """The ``(task, model_config, train_config)`` objects of a validated config dict."""
    task_dict = config["task"] if isinstance(config["task"], Mapping) else {}
    name = task_dict.get("task", "standard")
    if name == "standard":  # the paper's task: its config needs no task module (nor torch)
        task_class = TaskConfig
    else:
        from interp.data.tasks import get_task

        try:
            task_class = get_task(name).config
        except ValueError as err:
            raise RunDirectoryError(f"{path}: task: {err}") from None
    task = build_config(task_class, config["task"], f"{path}: task")
    model = build_config(
        RUN_KINDS[config["kind"]].config_class(), config["model"], f"{path}: model"
    )
    train = build_config(TrainConfig, config["train"], f"{path}: train")
    return task, model, train


# ---- what a directory is ---------------------------------------------------------------------


def classify(path: str | os.PathLike) -> str:
    """What ``path`` is: ``absent``, ``empty``, ``run`` (a readable config of a run), ``broken``
    (run files, but no readable config), ``sweep`` (a sweep folder), ``file`` (not a directory)
    or ``other`` (a non-empty directory of something else)."""
    path = Path(path)
    if not path.exists():
        return "absent"
    if not path.is_dir():
        return "file"
    names = {p.name for p in path.iterdir() if p.name != LOCK_NAME}
    if not names:
        return "empty"
    if _holds_run_config(path):
        return "run"
    if (path / "sweep.json").is_file():
        return "sweep"
    if _has_run_files(path):
        return "broken"
    return "other"


def _holds_run_config(path: Path) -> bool:
    """Whether ``path/config.json`` reads as a run's config (a JSON object with its groups)."""
    from interp.io.inputs import read_json

    try:
        config = read_json(path / CONFIG_NAME)
    except (OSError, RunDirectoryError):
        return False
    return isinstance(config, dict) and {"task", "model", "train"} <= set(config)


def refuse_broken(path: str | os.PathLike) -> None:
    """Raise the error for a directory with run files (checkpoints) but no readable config."""
    path = Path(path)
    try:
        read_config(path / CONFIG_NAME)
        why = "config.json is not a run's config"
    except RunDirectoryError as err:
        why = str(err)
    raise RunDirectoryError(
        f"{path} holds run files (checkpoints) but no readable config.json ({why}); refusing to "
        "resume or write into it: restore config.json, or pass --overwrite to delete the run's "
        "files and start again"
    )


def _check_writable(path: Path) -> None:
    """Refuse early (one line) when nothing can be created at ``path``."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise RunDirectoryError(f"cannot create {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise WriteError(errno.EACCES, f"cannot write to {probe}: permission denied")


# ---- the writer ------------------------------------------------------------------------------


class RunWriter:
    """Owns a run directory while a run trains into it (see the module docstring).

    Use :meth:`open`; call :meth:`close` (or use it as a context manager) when done.

    Attributes:
        path: the run directory.
        config: the config dict written to ``config.json``.
        resume_state: the loaded ``resume.pt`` when there is a run to resume, else None.
    """

    def __init__(self, path: Path, config: dict) -> None:
        self.path = path
        self.config = config
        self.resume_state: dict | None = None
        self._lock = RunLock(path)
        self._config_changed = False  # a resumed run's new train fields, written by confirm_resume
        self._made_dirs: list[Path] = []  # the folders open() created, deepest first
        self._fresh = False  # a new run was started here (not one resumed)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        config: dict,
        *,
        resume: bool = False,
        overwrite: bool = False,
        map_location=None,
    ) -> RunWriter:
        """Lock ``path`` and prepare it for the run ``config``.

        Args:
            path: the run directory (created if absent).
            config: the run's :func:`configs_dict`.
            resume: continue the run there (same config; :data:`RESUMABLE_TRAIN_FIELDS` may
                change and are written back to ``config.json``).
            overwrite: delete the run there (only if it is recognisably a run) and start again.
            map_location: where to load the resume state's tensors.

        Raises:
            RunDirectoryError: the directory is not a run, holds a different run, holds run
                files without a readable config, is locked by a live writer, or cannot be
                written. Nothing is written or deleted then.
            CheckpointError: the resume state is unreadable.
        """
        path = Path(path)
        kind = classify(path)
        if kind == "file":
            raise RunDirectoryError(f"{path} exists and is not a directory")
        if kind in ("other", "sweep"):
            # Refused before even the lock file is made (and again under the lock).
            cls(path, config)._refuse_foreign(kind)
        if kind != "absent":
            check_run_tree(path)  # a link inside is refused before the lock (and again under it)
        from interp.io.budget import check_config_memory, check_free_space, disk_estimate

        check_config_memory(config)  # before any directory or allocation
        _check_writable(path)
        check_free_space(path, disk_estimate(config))
        made = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
        path.mkdir(parents=True, exist_ok=True)
        writer = cls(path, config)
        writer._made_dirs = made
        writer._lock.acquire()
        try:
            writer._prepare(resume, overwrite, map_location)
        except BaseException:
            writer._lock.release()
            raise
        return writer

    def _prepare(self, resume: bool, overwrite: bool, map_location) -> None:
        path, config_path = self.path, self.path / CONFIG_NAME
        kind = classify(path)  # again, under the lock
        check_run_tree(path)
        if kind in ("other", "sweep"):
            self._drop_lock_file_if_ours()
            self._refuse_foreign(kind)
        if kind == "broken" and not overwrite:
            refuse_broken(path)
        if kind == "run":
            existing, notes = read_config(config_path)
            for note in notes:
                log.info("note: %s", note)
            if not overwrite:
                self._check_resumable(existing, resume)
                self._resume(existing, map_location)
                return
        if kind in ("run", "broken"):
            remove_run_files(path)
        self._clean()
        self._fresh = True
        os.close(open_directory(path / CHECKPOINTS, path))
        write_json_atomic(config_path, self.config, root=path)

    def _check_resumable(self, existing: dict, resume: bool) -> None:
        """Refuse a run already there unless resuming it with the same config."""
        same = same_run(existing, self.config)
        if not resume:
            raise RunDirectoryError(
                f"{self.path} already holds a run with {'the same' if same else 'a different'} "
                "config: pass --resume to continue it or --overwrite to start again"
            )
        if not same:
            raise RunDirectoryError(
                f"{self.path} holds a run with a different config "
                f"({first_difference(existing, self.config)}); "
                f"only {', '.join(RESUMABLE_TRAIN_FIELDS)} may change when resuming (use "
                "--overwrite to start again)"
            )

    def _resume(self, existing: dict, map_location) -> None:
        """Take up the run there: its resume state, if it has one (else it has nothing yet)."""
        self._clean()
        resume_path = self.path / CHECKPOINTS / checkpoints.RESUME_NAME
        if resume_path.exists():
            self.resume_state = checkpoints.load_resume(resume_path, map_location=map_location)
        elif read_metrics(self.path / METRICS_NAME).frame.shape[0] or _has_run_files(self.path):
            raise RunDirectoryError(
                f"{resume_path} is missing but the run has metrics or checkpoints; it "
                "cannot be resumed exactly (use --overwrite to start again)"
            )
        # Extending (or moving) a run: config.json says what the run now is, once the resume
        # state has been found to fit the run (confirm_resume), not before.
        self._config_changed = existing["train"] != self.config["train"]
        if TRAINED_BACKENDS in existing:  # what trained it so far stays said
            self.config = {**self.config, TRAINED_BACKENDS: list(existing[TRAINED_BACKENDS])}

    def confirm_resume(self) -> None:
        """The resume state has loaded into the run's model and optimiser: a resumed run whose
        resumable train fields changed (more steps, another device) now says so in
        ``config.json``. Until then the file is left as it was, so a refused resume changes
        nothing."""
        if self._config_changed:
            write_json_atomic(self.path / CONFIG_NAME, self.config, root=self.path)
            self._config_changed = False

    def record_backend(self, backend: str) -> None:
        """Say in ``config.json`` which backend computes the run's training steps
        (``trained_backends``: the backends that trained it, in the order they did; one entry
        unless a resumed process trained with another). Written only when it changes."""
        done = list(self.config.get(TRAINED_BACKENDS, []))
        if done and done[-1] == backend:
            return
        self.config = {**self.config, TRAINED_BACKENDS: [*done, backend]}
        write_json_atomic(self.path / CONFIG_NAME, self.config, root=self.path)

    def _refuse_foreign(self, kind: str) -> None:
        path = self.path
        if kind == "sweep":
            raise RunDirectoryError(
                f"{path} is a sweep folder (it holds sweep.json), not a run directory; choose "
                "another --out"
            )
        names = sorted(p.name for p in path.iterdir() if p.name != LOCK_NAME)
        raise RunDirectoryError(
            f"{path} is not empty and is not a run directory of induction-cliff (it holds "
            f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}); nothing was written: "
            "choose a new or empty --out"
        )

    def _drop_lock_file_if_ours(self) -> None:
        # A refused directory keeps nothing of ours: the lock file goes with the lock.
        self._lock.release()
        try:
            if self._lock.path.stat().st_size == 0:
                self._lock.path.unlink()
        except FileNotFoundError:
            pass

    def _clean(self) -> None:
        removed = clean_temp_files(self.path) + clean_temp_files(self.path / CHECKPOINTS)
        if removed:
            log.info(
                "note: removed %d temporary file(s) left by an interrupted writer", len(removed)
            )

    # -- writes

    def write_metrics(self, rows: list[dict]) -> None:
        """Replace ``metrics.csv`` with ``rows`` (atomically)."""
        text = pd.DataFrame(rows).to_csv(index=False)
        write_text_atomic(self.path / METRICS_NAME, text, root=self.path)

    def write_per_class_iw(self, rows: list[dict]) -> None:
        """Replace ``per_class_iw.csv`` with ``rows`` (``step``, ``c0``, ``c1``, ...),
        atomically."""
        text = pd.DataFrame(rows).to_csv(index=False)
        write_text_atomic(self.path / PER_CLASS_IW_NAME, text, root=self.path)

    def save_weights(self, step: int, model) -> Path:
        """Write the weight checkpoint of ``step``."""
        return checkpoints.save_weights(self.path / CHECKPOINTS, step, model, root=self.path)

    def save_resume(self, state: dict) -> None:
        """Write ``resume.pt`` (atomically)."""
        path = self.path / CHECKPOINTS / checkpoints.RESUME_NAME
        checkpoints.save_resume(path, state, root=self.path)

    def checkpoint_steps(self) -> list[int]:
        return checkpoints.list_steps(self.path / CHECKPOINTS)

    def close(self) -> None:
        """Release the lock."""
        self._lock.release()

    def discard_unstarted(self) -> bool:
        """Release the lock and, if this writer started a new run that has no weight checkpoint
        yet, remove what it created: the run's files, ``checkpoints/``, the lock file and the
        folders :meth:`open` made (a folder that existed stays). For a run that failed before it
        saved anything (out of memory at its first allocation): a half-made run folder would be
        taken for a run. Returns whether it removed them; otherwise it only releases the lock."""
        if not self._fresh or self.checkpoint_steps():
            self.close()
            return False
        checkpoint_dir = self.path / CHECKPOINTS
        if checkpoint_dir.is_dir() and any(checkpoint_dir.iterdir()):
            self.close()  # something else is there: not only what this writer made
            return False
        for name in (CONFIG_NAME, METRICS_NAME, PER_CLASS_IW_NAME):
            try:
                (self.path / name).unlink()
            except FileNotFoundError:
                pass
        try:
            checkpoint_dir.rmdir()
        except OSError:
            pass
        self._drop_lock_file_if_ours()
        self._fresh = False
        for folder in self._made_dirs:
            try:
                folder.rmdir()  # only if empty: nothing but what this writer made was there
            except OSError:
                break
        return True

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the reader ------------------------------------------------------------------------------


@dataclass
class Run:
    """A finished (or interrupted) run, reopened from its directory.

    Attributes:
        path: the run directory.
        task: its :class:`TaskConfig`.
        model_config: its model config (``ModelConfig`` for the network).
        train_config: its :class:`TrainConfig`.
        metrics: the valid rows of ``metrics.csv`` (see :func:`read_metrics`).
        kind: the kind of model (:data:`RUN_KINDS`).
        metrics_problem: what was wrong with ``metrics.csv`` (None if nothing).
        notes: what migrating an older format changed.
    """

    path: Path
    task: TaskConfig
    model_config: object
    train_config: TrainConfig
    metrics: pd.DataFrame
    kind: str = "induction_net"
    metrics_problem: str | None = None
    notes: list[str] = field(default_factory=list)
    _generator: object | None = field(default=None, repr=False)

    @property
    def checkpoint_steps(self) -> list[int]:
        """Steps with saved weights, ascending."""
        return checkpoints.list_steps(self.path / CHECKPOINTS)

    def require_checkpoints(self) -> list[int]:
        """:attr:`checkpoint_steps`, or a RunDirectoryError naming ``checkpoints/`` if there are
        none (an analysis then has nothing to compute, and must not write an empty output)."""
        steps = self.checkpoint_steps
        if not steps:
            raise RunDirectoryError(
                f"{self.path / CHECKPOINTS} holds no weight checkpoints; nothing was computed or "
                "written"
            )
        return steps

    def load_model(self, step: int | None = None, device: str = "cpu"):
        """The model with the weights of checkpoint ``step`` (default: the last one)."""
        steps = self.require_checkpoints()
        if step is None:
            step = steps[-1]
        if step not in steps:
            raise RunDirectoryError(
                f"{self.path}: step={step} has no checkpoint; available steps: {steps}"
            )
        model = RUN_KINDS[self.kind].model_class()(self.model_config, seed=None)
        checkpoints.load_weights(self.path / CHECKPOINTS, step, model)
        return model.to(device)

    def generator(self):
        """The run's task generator (same class means and label vectors; a
        :class:`~interp.data.task.TaskGenerator` for the standard task)."""
        if self._generator is None:
            from interp.data.tasks import make_generator

            self._generator = make_generator(
                self.task, seed=derive_seed(self.train_config.seed, "task")
            )
        return self._generator

    def eval_sets(self, n: int | None = None, n_pairs: int | None = None) -> dict:
        """The run's IC, IC2 and IW evaluation sets (the same ones training used, by default)."""
        seed = derive_seed(self.train_config.seed, "eval")
        return self.generator().eval_sets(seed, n=n, n_pairs=n_pairs)

    def per_class_iw_set(self):
        """The run's per-class IW set (the one training evaluated;
        :meth:`TaskGenerator.per_class_iw`)."""
        import torch

        n = self.train_config.per_class_iw
        if n < 1:
            raise RunDirectoryError(
                f"{self.path / CONFIG_NAME}: train.per_class_iw=0: the run has no per-class IW set"
            )
        g = torch.Generator().manual_seed(derive_seed(self.train_config.seed, "per_class_iw"))
        return self.generator().per_class_iw(n, g)

    def per_class_iw(self) -> pd.DataFrame:
        """``per_class_iw.csv`` (:func:`read_per_class_iw`, one column per class of the task)."""
        return read_per_class_iw(self.path, n_classes=self.task.K)

    def deviation_note(self) -> str:
        """How this run's optimiser differs from the paper's ('' if it does not)."""
        return self.train_config.deviation_note()

    def config_dict(self) -> dict:
        """The run's configs as ``config.json`` holds them (current format)."""
        return configs_dict(self.task, self.model_config, self.train_config, self.kind)

    def output_path(self, name: str) -> Path:
        """Where an output named ``name`` (e.g. ``fit.json``) lives beside this run."""
        return output_path(self.path, name)

    def write_output(self, name: str, data: str | bytes | dict | list | pd.DataFrame) -> Path:
        """Write an output beside the run: under its lock, atomically, never through a symbolic
        link, never empty (:func:`interp.io.outputs.write_output`).

        Args:
            name: a plain file name (``fit.json``, ``checkpoint_measures.csv``, ...).
            data: text, bytes, a JSON-serialisable dict/list, or a DataFrame (written as CSV).
        """
        return write_output(self.path, name, data)


def load_run(path: str | os.PathLike) -> Run:
    """Reopen a run directory (any kind, any format version this toolkit knows).

    Raises:
        RunDirectoryError: not a run directory, or its config is invalid (one line naming the
            file and field).
    """
    path = Path(path)
    if not path.is_dir():
        raise RunDirectoryError(f"{path} is not a directory")
    config_path = path / CONFIG_NAME
    if not config_path.exists():
        raise RunDirectoryError(f"{path} is not a run directory (no {CONFIG_NAME})")
    config, notes = read_config(config_path)
    task, model, train = parse_configs(config, config_path)
    for note in notes:
        if note.startswith("model.hidden_bias"):  # a model form other than today's: say so
            log.info("note: %s: %s", path, note)
    metrics = read_metrics(path / METRICS_NAME)
    if metrics.problem:
        log.warning("warning: %s", metrics.problem)
    return Run(
        path=path,
        task=task,
        model_config=model,
        train_config=train,
        metrics=metrics.frame,
        kind=config["kind"],
        metrics_problem=metrics.problem,
        notes=notes,
    )


def recorded_plugins(run_dir: str | os.PathLike) -> list[str]:
    """The plugins a run directory's ``config.json`` records (``[]`` for none or no readable
    config)."""
    try:
        config, _ = read_config(Path(run_dir) / "config.json")
    except RunDirectoryError:
        return []
    plugins = config.get("plugins", [])
    return [str(p) for p in plugins] if isinstance(plugins, list) else []
