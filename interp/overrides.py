"""Configs from a preset and ``--set key=value`` overrides, as the CLI and sweeps build them."""

from __future__ import annotations

import dataclasses
import math

__all__ = ["parse_overrides", "build_configs", "convert_value"]


def _convert(value: str, current):
    """Parse ``value`` to the type of a config field's current value."""
    if value.lower() in ("none", "null"):
        return None
    if isinstance(current, bool):
        if value.lower() in ("true", "1", "yes"):
            return True
        if value.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(current, int):
        as_float = float(value)
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ValueError(f"expected an integer, got {value!r}")
        return int(as_float)
    if isinstance(current, float):
        as_float = float(value)
        if math.isnan(as_float):
            raise ValueError("expected a number, got NaN")
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


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["K=512", "lr=0.1"]`` -> ``{"K": "512", "lr": "0.1"}`` with a clear error if malformed."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--set {pair!r} is invalid: expected key=value")
        key, value = pair.split("=", 1)
        if not key.strip():
            raise ValueError(f"--set {pair!r} is invalid: the key is empty")
        out[key.strip()] = value.strip()
    return out


def build_configs(preset_name: str, overrides: dict[str, str], seed: int | None):
    """The task, model and train configs of a preset with ``--set`` overrides applied.

    A key is a field name of ``TaskConfig``, ``TrainConfig`` or ``ModelConfig`` (optionally
    prefixed ``task.``, ``train.`` or ``model.``). The model's ``D``, ``L``, ``n_positions`` and
    ``n_ctx_train`` follow the task and cannot be set.
    """
    from interp.model import ModelConfig
    from interp.presets import get_preset

    preset = get_preset(preset_name)
    task_f = {f.name: getattr(preset.task, f.name) for f in dataclasses.fields(preset.task)}
    train_f = {f.name: getattr(preset.train, f.name) for f in dataclasses.fields(preset.train)}
    derived = {"D", "L", "n_positions", "n_ctx_train"}
    model_defaults = ModelConfig()
    model_f = {
        f.name: preset.model.get(f.name, getattr(model_defaults, f.name))
        for f in dataclasses.fields(ModelConfig)
        if f.name not in derived
    }
    groups = {"task": task_f, "train": train_f, "model": model_f}
    allowed = sorted(set(task_f) | set(train_f) | set(model_f))
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
            targets[0][name] = _convert(value, targets[0][name])
        except (ValueError, OverflowError) as err:
            raise ValueError(f"--set {key}={value!r} is invalid: {err}") from None
    if seed is not None:
        train_f["seed"] = seed
    from interp.task import TaskConfig
    from interp.train_config import TrainConfig

    task = TaskConfig(**task_f)
    return task, ModelConfig.from_task(task, **model_f), TrainConfig(**train_f), preset


convert_value = _convert
