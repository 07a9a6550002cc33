"""Configs from a preset and ``--set key=value`` overrides, as the CLI and sweeps build them."""

from __future__ import annotations

import dataclasses
import math

__all__ = ["parse_overrides", "build_configs", "convert_value"]


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
    prefixed ``task.``, ``train.`` or ``model.``), or a positional encoding's parameter in its flat
    spelling ``{encoding}_{field}`` (``rope_base``, ``cope_p_max``; it applies when that encoding
    is selected). The model's ``D``, ``L``, ``n_positions`` and ``n_ctx_train`` follow the task
    and cannot be set.
    """
    from interp.model.network import ModelConfig
    from interp.model.positional import positional_parameters
    from interp.train.presets import get_preset

    preset = get_preset(preset_name)
    task_f = {f.name: getattr(preset.task, f.name) for f in dataclasses.fields(preset.task)}
    train_f = {f.name: getattr(preset.train, f.name) for f in dataclasses.fields(preset.train)}
    derived = {"D", "L", "n_positions", "n_ctx_train", "positional_config"}
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
    from interp.config.train_config import TrainConfig
    from interp.data.task import TaskConfig
    from interp.data.tasks import get_task

    spec = get_task(task_f.get("task", "standard"))  # one line naming the registered tasks
    if spec.config is not TaskConfig:
        raise ValueError(
            f"--set task={spec.name!r} is invalid here: its config is {spec.config.__name__}, not "
            f"TaskConfig; this command trains the network on TaskConfig tasks only"
        )
    task = TaskConfig(**task_f)
    return task, ModelConfig.from_task(task, **model_f), TrainConfig(**train_f), preset


convert_value = _convert
