"""A run's ``config.json`` as a file: its format version, the migration of older formats to the
current one (with a note for each change) and the check of each group's fields against its config
class, every problem one line naming the file and the field. :mod:`interp.io.rundir` reads and
writes it through these."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from interp.io.checkpoints import refuse_scalar_hidden_biases
from interp.io.errors import RunDirectoryError

__all__ = ["FORMAT_VERSION", "build_config", "check_format_version", "migrate", "read_json_object"]

FORMAT_VERSION = 5
# Fields added after format version 1 was first written, with the value that older runs used.
_LEGACY_TRAIN_DEFAULTS = {"backend": "hooked"}
# Train fields added within format 3 whose default is what a run without the field did: an absent
# one is taken as the default, with no migration note (nothing about the run changes), so such a
# run still loads, compares equal to its own config and resumes.
_NEUTRAL_TRAIN_DEFAULTS = {"per_class_iw": 0}
# Format 3 made three of the author's forms the defaults; runs of formats 1 and 2 used these.
_PRE_V3_FORMS = {
    "task": {"novel_pool": (None, "per-sequence novel classes")},
    "model": {"readout_init": ("he", "He-initialised readout with a bias")},
    "train": {"weight_decay_form": ("coupled", "torch's coupled (L2) weight decay")},
}
# Format 4 made the author's scalar hidden biases the default; runs of formats 1-3 had per-unit
# ones.
_PRE_V4_HIDDEN_BIAS = "per_unit"
# Format 5 made the device sampler the default; a run of formats 1-4 without the field (added within
# format 3) drew its batches on the host.
_PRE_V5_SAMPLE_ON = "host"


_SIMPLE_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def _fits(value, option: str) -> bool:
    """Whether ``value`` is of the simple type ``option`` (a bool is no number)."""
    return isinstance(value, _SIMPLE_TYPES[option]) and (
        option == "bool" or not isinstance(value, bool)
    )


def _type_problem(value, annotation: str) -> str | None:
    """Why ``value`` does not fit a field annotated ``annotation`` (None if it does, or if the
    annotation is not a simple one)."""
    options = [a.strip() for a in annotation.split("|")]
    if "None" in options and value is None:
        return None
    wanted = [o for o in options if o != "None"]
    if not wanted or any(o not in _SIMPLE_TYPES for o in wanted):
        return None  # not a type this check understands: the config's own validation decides
    if any(_fits(value, o) for o in wanted):
        return None
    return f"must be {annotation.replace('float', 'a number').replace('str', 'a string')}"


def build_config(cls, data, where: str):
    """``cls(**data)`` with every problem reported as one line naming ``where`` and the field."""
    if not isinstance(data, Mapping):
        raise RunDirectoryError(f"{where} must be a JSON object, found {json.dumps(data)}")
    data = {k: v for k, v in data.items() if k != "kind"}
    from_dict = getattr(cls, "from_dict", None)
    if from_dict is None:
        _check_fields(cls, data, where)
    try:
        return from_dict(dict(data)) if from_dict is not None else cls(**data)
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise RunDirectoryError(f"{where}: {str(err).splitlines()[0]}") from None


def _check_fields(cls, data: Mapping, where: str) -> None:
    """Every field of ``data`` is one of the dataclass ``cls``, of a type its annotation allows."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise RunDirectoryError(
            f"{where}: unknown field {unknown[0]!r} (known fields: {', '.join(known)})"
        )
    for name, value in data.items():
        annotation = known[name].type
        if not isinstance(annotation, str):
            annotation = getattr(annotation, "__name__", str(annotation))
        problem = _type_problem(value, annotation)
        if problem:
            raise RunDirectoryError(f"{where}: field {name}={value!r} {problem}")


def migrate(config: dict, path: Path) -> tuple[dict, list[str]]:
    """Bring a config of an older format version to the current one; say what changed."""
    notes: list[str] = []
    original = config.get("format_version", 1)
    for version, step in enumerate((_from_1, _from_2, _from_3, _from_4), start=1):
        if config.get("format_version", 1) == version:
            config = step(dict(config), notes, path)
            config["format_version"] = version + 1
    train = config.get("train")
    if isinstance(train, Mapping) and any(k not in train for k in _NEUTRAL_TRAIN_DEFAULTS):
        config = dict(config)
        config["train"] = {**_NEUTRAL_TRAIN_DEFAULTS, **train}
    if notes or config.get("format_version") != original:
        notes.insert(
            0, f"{path} is format version {original}, migrated to {FORMAT_VERSION} on load"
        )
    return config, notes


def _from_1(config: dict, notes: list[str], path: Path) -> dict:
    """Format 1 -> 2: the model's kind at the top level, the train fields added since."""
    kind = (config.get("model") or {}).get("kind", "induction_net")
    config["kind"] = kind
    train = dict(config.get("train") or {})
    if kind == "minimal_induction_head":
        train = _minimal_train_of_format_1(config, train)
    for k, v in _LEGACY_TRAIN_DEFAULTS.items():
        if k not in train:
            train[k] = v
            notes.append(f"train.{k} absent in format 1: taken as {v!r}")
    config["train"] = train
    return config


def _minimal_train_of_format_1(config: dict, train: dict) -> dict:
    """Format 1's minimal runs wrote their own train dict (no checkpoints, own n_eval)."""
    n_eval = train.pop("n_eval", None)
    if n_eval is not None and isinstance(config.get("task"), dict):
        config["task"] = {**config["task"], "n_eval": n_eval}
    steps = train.get("steps", 1)
    return {
        "optimizer": "sgd",
        "momentum": 0.0,
        "checkpoint_every": max(int(steps), 1) if isinstance(steps, int) else 1,
        "n_log_checkpoints": 0,
        "checkpoint_on_jump": None,
        "backend": "hooked",
        **train,
    }


def _from_2(config: dict, notes: list[str], path: Path) -> dict:
    """Format 2 -> 3: the old forms of the fields whose author's form became the default."""
    for group, fields in _PRE_V3_FORMS.items():
        section = config.get(group)
        if not isinstance(section, Mapping):
            continue  # read_config names the missing or malformed group
        if group == "model" and config.get("kind") != "induction_net":
            continue  # only the network has the classifier
        section = dict(section)
        for name, (value, what) in fields.items():
            if name not in section:
                section[name] = value
                notes.append(
                    f"{group}.{name} absent before format 3: taken as {value!r} ({what}, the "
                    "old form; the author's form is today's default)"
                )
        config[group] = section
    return config


def _from_3(config: dict, notes: list[str], path: Path) -> dict:
    """Format 3 -> 4: the network's per-unit hidden biases (a run whose checkpoints hold the
    scalar form is a mislabelled config, refused)."""
    model = config.get("model")
    network = isinstance(model, Mapping) and config.get("kind") == "induction_net"
    if network and "hidden_bias" not in model:
        refuse_scalar_hidden_biases(path, 3, _PRE_V4_HIDDEN_BIAS)
        config["model"] = {**model, "hidden_bias": _PRE_V4_HIDDEN_BIAS}
        notes.append(
            f"model.hidden_bias absent before format 4: taken as {_PRE_V4_HIDDEN_BIAS!r} "
            "(per-unit classifier biases, the form the run was trained with; the "
            "author's one scalar per hidden layer is today's default)"
        )
    return config


def _from_4(config: dict, notes: list[str], path: Path) -> dict:
    """Format 4 -> 5: the host sampler of a run without the field."""
    train = config.get("train")
    if isinstance(train, Mapping) and "sample_on" not in train:
        # The stream the run drew: nothing about it changes, so no note (as within format 3).
        config["train"] = {**train, "sample_on": _PRE_V5_SAMPLE_ON}
    return config


def read_json_object(path: Path) -> dict:
    """The JSON object ``path`` holds, read by :func:`interp.io.inputs.read_json_object` (its
    limits checked first); a missing, unreadable, oversized or malformed file is one line."""
    from interp.io.inputs import read_json_object as read

    return read(path)


def check_format_version(version: object, path: Path) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunDirectoryError(f"{path}: format_version={version!r} is invalid")
    if version > FORMAT_VERSION:
        raise RunDirectoryError(
            f"{path}: format_version {version} is newer than this induction-cliff reads "
            f"({FORMAT_VERSION}); update the toolkit"
        )
