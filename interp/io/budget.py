"""Sizes and budgets, checked before anything is allocated or created.

:func:`memory_estimate` says, from a run's configs alone, how much memory its largest tensors
take (the class means, the evaluation sets, a training batch and its activations, the weights);
:func:`check_config_memory` refuses a run whose estimate exceeds the memory available to this
process (the machine's, or less under ``ulimit -v``), in one line naming the field the user set
that drives it and the estimate (``--set batch_size=1000000000`` would otherwise be killed by the
kernel with no message). :func:`check_count` bounds the counts a
user types (steps, bootstrap replicates, ...) so that none runs without end.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from interp.io.errors import ResourceError

__all__ = [
    "is_out_of_memory",
    "out_of_memory_error",
    "MAX_STEPS",  # noqa: F822  (train_config's, by __getattr__ below)
    "MAX_BOOTSTRAP",
    "MAX_EXPLORER_SEQUENCES",
    "check_count",
    "available_memory",
    "memory_estimate",
    "check_config_memory",
    "disk_estimate",
    "check_free_space",
]


def __getattr__(name: str):
    # The steps bound is train_config's, read from there when asked for: that module imports
    # torch, which a command that runs no model does not.
    if name == "MAX_STEPS":
        from interp.config.train_config import MAX_STEPS

        return MAX_STEPS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MAX_BOOTSTRAP = 100_000  # bootstrap replicates of an interval
MAX_EVAL_SEQUENCES = 10_000_000  # sequences of an evaluation set asked with --n
# Sequences per evaluation set in a report's attention explorer: each adds its attention maps at
# every checkpoint to the page (about 0.3 MB at 25 checkpoints), so 256 already make it ~80 MB.
MAX_EXPLORER_SEQUENCES = 256
_FLOAT = 4  # bytes of a float32
# A training step keeps about this many tensors of the residual stream's size per layer (inputs,
# queries, keys, values, outputs and their gradients), and this many of the attention's.
_RESID_PER_LAYER = 12
_ATTN_PER_LAYER = 4
# The weights are held about this many times: themselves, their gradients, two Adam moments and
# the copy a resume state takes.
_PARAM_COPIES = 5


def check_count(name: str, value, low: int, high: int) -> int:
    """``value`` as an integer in ``[low, high]``, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} is invalid: must be an integer in [{low}, {high}]")
    if not low <= value <= high:
        raise ValueError(f"{name}={value!r} is invalid: must be in [{low}, {high:.3g}]")
    return value


def check_eval_n(flag: str, n, run=None) -> None:
    """The ``--n`` of a command that evaluates a run: an integer in [1, MAX_EVAL_SEQUENCES] and,
    given the run, evaluation sets of that size that fit in the available memory (before any
    allocation). Nothing to check when ``n`` is None (the run's ``n_eval``).

    Raises:
        ValueError: not an integer in range, naming ``flag``.
        ResourceError: the sets would not fit, naming ``flag`` and the estimate.
    """
    if n is None:
        return
    check_count(flag, n, 1, MAX_EVAL_SEQUENCES)
    if run is None:
        return
    import dataclasses

    groups = {"task": run.task, "model": run.model_config, "train": run.train_config}
    if not all(dataclasses.is_dataclass(g) for g in groups.values()):
        return
    config = {k: dataclasses.asdict(g) for k, g in groups.items()}
    config["task"]["n_eval"] = n
    try:
        check_config_memory(config)
    except ResourceError as err:
        raise ResourceError(f"{flag} {n} (for {run.path}): {err}") from None


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, None if unknown: the smaller of the
    machine's ``MemAvailable`` and what this process's own limits leave it (``RLIMIT_AS`` less
    the address space it already maps, ``RLIMIT_DATA`` less its data; ``ulimit -v``/``-d``)."""
    found = [n for n in (_mem_available(), *_rlimit_headroom()) if n is not None]
    return min(found) if found else None


def _mem_available() -> int | None:
    """The machine's ``MemAvailable`` in bytes (``SC_AVPHYS_PAGES`` without ``/proc``)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _rlimit_headroom() -> list[int | None]:
    """Bytes this process may still map under ``RLIMIT_AS`` and ``RLIMIT_DATA`` (None where
    there is no limit or it cannot be read): each soft limit less the process's ``VmSize`` or
    ``VmData`` (``/proc/self/status``; 0 where unknown, which overstates the headroom)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return []
    used = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmSize", "VmData"):
                    used[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    out = []
    for limit, key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        try:
            soft = resource.getrlimit(getattr(resource, limit))[0]
        except (AttributeError, OSError, ValueError):
            continue
        if soft != resource.RLIM_INFINITY and soft >= 0:
            out.append(max(soft - used.get(key, 0), 0))
    return out


def _int(group: Mapping, name: str, default: int) -> int:
    value = group.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return max(int(value), 0)


def _params(task: Mapping, model: Mapping) -> int:
    """Parameters of the network, from the groups of ``config.json`` (``d_model`` as
    :class:`~interp.model.network.ModelConfig` derives it for one-hot positions, the widest)."""
    D, n_max, L = _int(task, "D", 63), _int(task, "N_max", 32), _int(task, "L", 32)
    d_model = _int(model, "d_model", D + 2 * n_max + 1)
    layers, heads = _int(model, "n_layers", 2), _int(model, "n_heads", 1)
    d_head = _int(model, "d_head", d_model) or d_model
    d_mlp, mlp_layers = _int(model, "d_mlp", 128), _int(model, "n_mlp_layers", 3)
    return (
        4 * layers * heads * d_model * d_head
        + d_model * d_mlp
        + max(mlp_layers - 1, 0) * d_mlp * d_mlp
        + d_mlp * L
    )


def memory_estimate(task: Mapping, model: Mapping, train: Mapping) -> dict[str, float]:
    """Bytes of the largest tensors of a run, by the field they grow with (``task.K``,
    ``train.batch_size``, ``model.d_model`` for the weights, ...); the dicts are the groups of
    ``config.json``."""
    D, K, N = _int(task, "D", 63), _int(task, "K", 512), _int(task, "N", 8)
    n_max, n_eval = _int(task, "N_max", 32), _int(task, "n_eval", 2048)
    seq = 2 * N + 1
    d_model = _int(model, "d_model", D + 2 * n_max + 1)
    layers, heads = _int(model, "n_layers", 2), _int(model, "n_heads", 1)
    d_mlp = _int(model, "d_mlp", 128)

    def activations(batch: int) -> float:
        resid = batch * seq * d_model * layers * _RESID_PER_LAYER
        attn = batch * heads * seq * seq * layers * _ATTN_PER_LAYER
        return _FLOAT * (resid + attn + batch * d_mlp * 8)

    per_class = _int(train, "per_class_iw", 0)
    return {
        "task.K": _FLOAT * K * D,
        "task.n_eval": 3 * _FLOAT * n_eval * seq * D + activations(n_eval) / 2,
        "train.batch_size": activations(_int(train, "batch_size", 128)),
        "train.per_class_iw": _FLOAT * K * per_class * seq * D + activations(K * per_class) / 2,
        "model.d_model": _FLOAT * _PARAM_COPIES * _params(task, model),
    }


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes / 1e3:.3g} kB"


def _total(config: Mapping) -> float:
    return sum(memory_estimate(*(config.get(g) or {} for g in ("task", "model", "train"))).values())


def check_config_memory(
    config: Mapping,
    available: int | None = None,
    *,
    alternatives: Callable[[], Mapping[str, Mapping]] | None = None,
) -> None:
    """Refuse a run whose tensors would not fit in the available memory (before any allocation).

    Args:
        config: a run's ``config.json`` dict (``task``, ``model``, ``train`` groups).
        available: bytes available (default: :func:`available_memory`).
        alternatives: called only when the run does not fit: the settings the user gave, each
            as its text (``"N_max=1e9"``) mapped to the ``config.json`` dict the run would have
            without it. The refusal names the one whose absence shrinks the run most (the field
            the user set, not one derived from it, such as the evaluation sets' width).

    Raises:
        ResourceError: one line naming the field (the setting given, where one is to blame),
            the estimate and the memory available.
    """
    groups = [config.get(g) for g in ("task", "model", "train")]
    if not all(isinstance(g, Mapping) for g in groups):
        return  # the config's own validation names what is malformed
    if str(groups[2].get("device", "cpu")).startswith("cuda"):
        return  # the device's memory is not the host's; torch says what it lacks
    available = available_memory() if available is None else available
    if available is None:
        return
    terms = memory_estimate(*groups)
    total = sum(terms.values())
    if total <= available:
        return
    field = max(terms, key=terms.get)
    group, name = field.split(".")
    need = f"the run needs about {_size(total)} of memory ({_size(terms[field])} for {name}"
    have = f"but {_size(available)} are available"
    given = _to_blame(alternatives() if alternatives is not None else {}, total)
    if given is not None:
        key = given.partition("=")[0]
        grows = "" if key.rpartition(".")[2] == name else f", which grows with {key}"
        raise ResourceError(f"--set {given}: {need}{grows}), {have}; lower {key}")
    value = config[group].get(name)
    if value is None and field == "model.d_model":  # derived, not recorded in config.json
        value = _int(groups[0], "D", 63) + 2 * _int(groups[0], "N_max", 32) + 1
    raise ResourceError(f"{field}={value!r}: {need}), {have}; lower {name}")


def _to_blame(alternatives: Mapping[str, Mapping], total: float) -> str | None:
    """The setting whose absence shrinks the run most (None if none shrinks it)."""
    best, best_total = None, total
    for given, config in alternatives.items():
        smaller = _total(config)
        if smaller < best_total:
            best, best_total = given, smaller
    return best


def disk_estimate(config: Mapping) -> float:
    """Bytes a run writes (its weight checkpoints, the resume state, the metrics rows), from its
    ``config.json`` dict; a rough upper estimate, for :func:`check_free_space`."""
    task, model, train = (config.get(g) or {} for g in ("task", "model", "train"))
    if not all(isinstance(g, Mapping) for g in (task, model, train)):
        return 0.0
    D, n_max, L = _int(task, "D", 63), _int(task, "N_max", 32), _int(task, "L", 32)
    d_model = _int(model, "d_model", D + 2 * n_max + 1)
    d_mlp, layers = _int(model, "d_mlp", 128), _int(model, "n_layers", 2)
    heads = _int(model, "n_heads", 1)
    d_head = _int(model, "d_head", d_model) or d_model
    mlp_layers = _int(model, "n_mlp_layers", 3)
    params = 4 * layers * heads * d_model * d_head + mlp_layers * d_mlp * max(d_model, d_mlp)
    params += d_mlp * L
    steps = _int(train, "steps", 100_000)
    checkpoints = steps // max(_int(train, "checkpoint_every", 5000), 1)
    checkpoints += _int(train, "n_log_checkpoints", 20) + 2
    rows = steps // max(_int(train, "eval_every", 500), 1) + 1
    per_class = _int(train, "per_class_iw", 0) and _int(task, "K", 512)
    return _FLOAT * params * (checkpoints + 4) + rows * (400 + 12 * per_class)


def check_free_space(directory, nbytes: float) -> None:
    """Refuse when the file system of ``directory`` (or its nearest existing parent) has less
    than ``nbytes`` free.

    Raises:
        WriteError: naming the folder and both sizes.
    """
    import errno
    import shutil
    from pathlib import Path

    from interp.io.errors import WriteError

    probe = Path(directory)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return
    if free < nbytes:
        raise WriteError(
            errno.ENOSPC,
            f"cannot write to {probe}: the run writes about {_size(nbytes)}, only {_size(free)} "
            "are free",
        )


def is_out_of_memory(err: BaseException) -> bool:
    """A MemoryError, or torch's allocator failing (on the CPU or a device)."""
    if isinstance(err, MemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text
    )


def out_of_memory_error(
    err: BaseException, config: Mapping, out, step: int, removed: bool
) -> ResourceError:
    """The one-line error of a run that ran out of memory after its estimate let it start
    (``removed``: whether the run's folder was taken back), naming the field whose tensors the
    estimate finds largest."""
    terms = memory_estimate(*(config.get(g) or {} for g in ("task", "model", "train")))
    field = max(terms, key=terms.get)
    where = f"{out}: " if out is not None else ""
    cause = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return ResourceError(
        f"{where}out of memory at step {step} ({cause[:120]}); "
        f"{'nothing of the run was kept' if removed else 'the run is kept'}: lower "
        f"{field.split('.')[1]} (its tensors are the largest), or free memory"
    )
