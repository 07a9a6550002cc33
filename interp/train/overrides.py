"""Configs from a preset and ``--set key=value`` overrides, as the CLI and sweeps build them.

:func:`settable_fields` lists every ``--set`` key with its type, default and meaning, read from the
config dataclasses and their ``Attributes:`` docstrings, so ``induction-cliff train --help`` cannot
drift from the configs.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from pathlib import Path
from typing import Any

__all__ = [
    "parse_overrides",
    "build_configs",
    "convert_value",
    "resumed_configs",
    "field_docs",
    "settable_fields",
    "SettableField",
    "DERIVED_MODEL_FIELDS",
    "check_one_spelling",
]

# ModelConfig fields that follow the task (``ModelConfig.from_task``) and cannot be set.
DERIVED_MODEL_FIELDS = ("D", "L", "n_positions", "n_ctx_train", "positional_config")


def _convert(value: str, current, none_allowed: bool = True):
    """Parse ``value`` to the type of a config field's current value (``"none"`` is None unless
    ``none_allowed`` is False: a plain ``str`` field such as ``positional=none``)."""
    if value.lower() in ("none", "null") and none_allowed:
        return None
    if isinstance(current, bool):
        if value.lower() in ("true", "1", "yes"):
            return True
        if value.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(current, int):
        as_float = _number(value, "an integer")
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ValueError(f"expected an integer, got {value!r}")
        return int(as_float)
    if isinstance(current, float):
        as_float = _number(value, "a number")
        if not math.isfinite(as_float):
            raise ValueError(f"expected a finite number, got {value!r}")
        return as_float
    if current is None:
        for cast in (int, float):
            try:
                out = cast(value)
            except ValueError:
                continue
            if isinstance(out, float) and not math.isfinite(out):
                raise ValueError(f"expected a finite number, got {value!r}")
            return out
    return value


def _number(value: str, expected: str) -> float:
    """``float(value)``; a word that is no number is refused saying what was ``expected``."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"expected {expected}, got {value!r}") from None


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["K=512", "lr=0.1"]`` -> ``{"K": "512", "lr": "0.1"}`` with a clear error if malformed."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--set {pair!r} is invalid: expected key=value")
        key, value = pair.split("=", 1)
        if not key.strip():
            raise ValueError(f"--set {pair!r} is invalid: the key is empty")
        key, value = key.strip(), value.strip()
        if key in out and out[key] != value:
            raise ValueError(
                f"--set {key}={out[key]} and --set {key}={value} contradict each other: give "
                f"{key} once"
            )
        out[key] = value
    return out


def check_one_spelling(keys, field_of) -> None:
    """Refuse two keys that name one field (``task.K`` and ``K``): which one wins would be an
    accident of their order. ``field_of(key)`` is the ``group.name`` a key sets."""
    seen: dict[str, str] = {}
    for key in keys:
        field = field_of(key)
        if field in seen and seen[field] != key:
            raise ValueError(
                f"--set {seen[field]} and --set {key} both set {field}: give it once, in one "
                "spelling"
            )
        seen[field] = key


def build_configs(preset_name: str, overrides: dict[str, str], seed: int | None):
    """The task, model and train configs of a preset with ``--set`` overrides applied.

    A key is a field name of ``TaskConfig``, ``TrainConfig`` or ``ModelConfig`` (optionally
    prefixed ``task.``, ``train.`` or ``model.``), or a positional encoding's parameter in its flat
    spelling ``{encoding}_{field}`` (``rope_base``, ``cope_p_max``; it applies when that encoding
    is selected). The model's ``D``, ``L``, ``n_positions`` and ``n_ctx_train`` follow the task
    and cannot be set.

    Every value is judged here, before any directory or allocation: its type and range (the
    configs' own validation: a device a run can train on), ``num_threads`` against this
    machine's cores (:func:`interp.train.threads.check_thread_counts`) and the memory the run
    needs (:func:`interp.io.budget.check_config_memory`, naming the ``--set`` key that makes it
    too large).

    Raises:
        ValueError: an unknown key or an invalid value (one line naming the key).
        ResourceError: the run would not fit in the memory available to this process.
    """
    from interp.io.budget import check_config_memory
    from interp.train.threads import check_thread_counts

    task, model, train, preset = _apply(preset_name, overrides, seed)
    for key in overrides:
        if key.rpartition(".")[2] == "num_threads" and train.num_threads is not None:
            check_thread_counts(train.num_threads, threads_name=f"--set {key}")

    def without_each() -> dict[str, dict]:
        out = {}
        for key in overrides:
            rest = {k: v for k, v in overrides.items() if k != key}
            try:
                out[f"{key}={overrides[key]}"] = _configs_dict(*_apply(preset_name, rest, seed)[:3])
            except ValueError:
                continue  # the others alone are no run (N without its N_max): not the cause
        return out

    # Before any directory or allocation: a batch or a K too large for this machine.
    check_config_memory(_configs_dict(task, model, train), alternatives=without_each)
    return task, model, train, preset


def _configs_dict(task, model, train) -> dict:
    """The groups of ``config.json`` that :func:`interp.io.budget.memory_estimate` reads."""
    return {
        "task": dataclasses.asdict(task),
        "model": {**model.to_dict(), "d_model": model.d_model},
        "train": dataclasses.asdict(train),
    }


def _apply(preset_name: str, overrides: dict[str, str], seed: int | None):
    """:func:`build_configs` without the checks against this machine."""
    from interp.config.model_config import ModelConfig
    from interp.config.positional import positional_parameters
    from interp.train.presets import get_preset

    preset = get_preset(preset_name)
    task_f = {f.name: getattr(preset.task, f.name) for f in dataclasses.fields(preset.task)}
    train_f = {f.name: getattr(preset.train, f.name) for f in dataclasses.fields(preset.train)}
    derived = set(DERIVED_MODEL_FIELDS)
    model_defaults = ModelConfig()
    model_f = {
        f.name: preset.model.get(f.name, getattr(model_defaults, f.name))
        for f in dataclasses.fields(ModelConfig)
        if f.name not in derived
    }
    # Encoding parameters by their flat names (the default gives --set its type); only the ones a
    # preset or an override sets reach the config.
    flat = {
        k: preset.model.get(k, default) for k, (_, _, default) in positional_parameters().items()
    }
    unset_flat = set(flat) - set(preset.model)
    model_f.update(flat)
    # Plain str fields, where "none" is a value (positional=none, attn_scale=none), not None.
    str_fields = {
        f.name
        for cls in (type(preset.task), type(preset.train), ModelConfig)
        for f in dataclasses.fields(cls)
        if f.type in ("str", str)
    }
    str_fields |= {k for k, v in flat.items() if isinstance(v, str)}
    groups = {"task": task_f, "train": train_f, "model": model_f}
    allowed = sorted(set(task_f) | set(train_f) | set(model_f))

    def field_of(key: str) -> str:
        group_name, _, name = key.rpartition(".")
        if group_name:
            return key
        return next((f"{g}.{name}" for g, fields in groups.items() if name in fields), key)

    check_one_spelling(overrides, field_of)
    for key, value in overrides.items():
        group_name, _, name = key.rpartition(".")
        targets = (
            [groups[group_name]]
            if group_name in groups
            else [g for g in groups.values() if name in g]
        )
        if group_name and group_name not in groups:
            targets = []
        if not targets or name not in targets[0]:
            raise ValueError(f"--set key {key!r} is unknown: allowed keys are {allowed}")
        try:
            targets[0][name] = _convert(value, targets[0][name], name not in str_fields)
        except (ValueError, OverflowError) as err:
            raise ValueError(f"--set {key}={value!r} is invalid: {err}") from None
        unset_flat.discard(name)
    for name in unset_flat:
        del model_f[name]
    if "positional_config" in preset.model:
        model_f["positional_config"] = preset.model["positional_config"]
    if seed is not None:
        train_f["seed"] = seed
    from interp.config.task_config import TaskConfig
    from interp.config.train_config import TrainConfig

    name = task_f.get("task", "standard")
    if (
        name != "standard"
    ):  # the paper's task needs no task module (nor torch); others are looked up
        from interp.data.tasks import get_task

        spec = get_task(name)  # one line naming the registered tasks
        if spec.config is not TaskConfig:
            raise ValueError(
                f"--set task={spec.name!r} is invalid here: its config is "
                f"{spec.config.__name__}, not TaskConfig; this command trains the network on "
                "TaskConfig tasks only"
            )
    task = TaskConfig(**task_f)
    model, train = ModelConfig.from_task(task, **model_f), TrainConfig(**train_f)
    return task, model, train, preset


convert_value = _convert


def resumed_configs(run_dir: str | Path, overrides: dict[str, str], seed: int | None):
    """The configs to resume the run in ``run_dir`` with: the stored ones, with ``overrides``
    (``--set``) allowed only on the fields a resumption may change, and ``seed`` only if it is the
    stored seed.

    Returns:
        ``(task, model_config, train_config)``.

    Raises:
        ValueError: a key that is unknown or may not change, or another seed (one line naming the
            field and ``config.json``).
    """
    from interp.io.rundir import RESUMABLE_TRAIN_FIELDS, load_run

    out = Path(run_dir)
    run = load_run(out)
    if run.kind != "induction_net":
        raise ValueError(
            f"{out} is a {run.kind} run; `induction-cliff train` resumes network runs only"
        )
    where = out / "config.json"
    if seed is not None and seed != run.train_config.seed:
        raise ValueError(
            f"--seed {seed} contradicts train.seed={run.train_config.seed} in {where}; a "
            "resumed run keeps its seed (choose another --out for a new seed)"
        )
    changes = {}
    stored = {
        "task": dataclasses.asdict(run.task),
        "model": run.model_config.to_dict(),
        "train": dataclasses.asdict(run.train_config),
    }
    for key, value in overrides.items():
        group, _, name = key.rpartition(".")
        groups = [group] if group else [g for g in stored if name in stored[g]]
        if not groups or groups[0] not in stored or name not in stored[groups[0]]:
            raise ValueError(f"--set key {key!r} is unknown")
        current = stored[groups[0]][name]
        try:
            new = _convert(value, current)
        except (ValueError, OverflowError) as err:
            raise ValueError(f"--set {key}={value!r} is invalid: {err}") from None
        if new == current:
            continue
        if groups[0] != "train" or name not in RESUMABLE_TRAIN_FIELDS:
            raise ValueError(
                f"--set {key}={value} contradicts {groups[0]}.{name}={current!r} in {where}; only "
                f"{', '.join(RESUMABLE_TRAIN_FIELDS)} may change when resuming"
            )
        changes[name] = new
    train = dataclasses.replace(run.train_config, **changes)
    from interp.train.threads import check_thread_counts

    for key in overrides:
        if key.rpartition(".")[2] == "num_threads" and train.num_threads is not None:
            check_thread_counts(train.num_threads, threads_name=f"--set {key}")
    return run.task, run.model_config, train


_ATTRIBUTE = re.compile(r"^(\s+)([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?:\s?(.*)$")


def field_docs(cls) -> dict[str, str]:
    """Each field's description from a class docstring's Google-style ``Attributes:`` section.

    ``"    K: number of classes; must be a multiple of L.\n        Paper: 512."`` gives
    ``{"K": "number of classes; must be a multiple of L. Paper: 512."}`` (continuation lines
    joined with single spaces; markup is kept).
    """
    doc = inspect.getdoc(cls) or ""
    docs: dict[str, list[str]] = {}
    current = None
    indent = None
    inside = False
    for line in doc.splitlines():
        if not inside:
            inside = line.strip() == "Attributes:"
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            break  # the next section
        match = _ATTRIBUTE.match(line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent = len(match.group(1))
            current = match.group(2)
            docs[current] = [match.group(3).strip()]
        elif current is not None and line.strip():
            docs[current].append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in docs.items()}


@dataclasses.dataclass(frozen=True)
class SettableField:
    """One ``--set`` key: ``key`` (as typed), ``group`` (``task``, ``model`` or ``train``),
    ``type`` (as annotated), ``default`` (the dataclass default; a preset may change it), ``doc``
    (from the class's ``Attributes:`` docstring; empty if it has none) and ``owner`` (the
    dataclass that declares it: ``TaskConfig``, or ``RopeConfig, with positional=rope`` for an
    encoding's parameter)."""

    key: str
    group: str
    type: str
    default: Any
    doc: str
    owner: str = ""


def _type_name(annotation) -> str:
    return (
        annotation
        if isinstance(annotation, str)
        else getattr(annotation, "__name__", str(annotation))
    )


def settable_fields() -> list[SettableField]:
    """Every key ``--set`` accepts (:func:`build_configs`), in declaration order: the fields of
    ``TaskConfig``, ``ModelConfig`` (less the ones that follow the task) and ``TrainConfig``, then
    the registered positional encodings' parameters in their flat spelling (``rope_base``)."""
    from interp.config.model_config import ModelConfig
    from interp.config.positional import POSITIONAL_ENCODINGS
    from interp.config.task_config import TaskConfig
    from interp.config.train_config import TrainConfig

    out = []
    for group, cls in (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig)):
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            if group == "model" and f.name in DERIVED_MODEL_FIELDS:
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            doc = docs.get(f.name, "")
            out.append(SettableField(f.name, group, _type_name(f.type), default, doc, cls.__name__))
    for enc_name, enc in POSITIONAL_ENCODINGS.items():
        if enc.config_class is None:
            continue
        docs = field_docs(enc.config_class)
        for f in dataclasses.fields(enc.config_class):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            out.append(
                SettableField(
                    f"{enc_name}_{f.name}",
                    "model",
                    _type_name(f.type),
                    default,
                    docs.get(f.name, ""),
                    f"{enc.config_class.__name__}, with positional={enc_name}",
                )
            )
    return out
