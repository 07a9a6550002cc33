"""The task registry: what a run trains on, selected by name (``--set task=NAME``).

A task is one :func:`register_task` call, in a module of the package or in a plugin file
(``--plugin my_task.py``): it names

- ``generator``: ``generator(config, seed)`` -> an object with
  ``sample(batch_size, torch_generator)`` (training batches), ``eval_sets(seed)`` (the evaluation
  sets, ``{name: batch}``) and, for the per-class IW accuracies,
  ``per_class_iw(n, torch_generator)``, as :class:`interp.data.task.TaskGenerator` has them;
- ``config``: its config class (default :class:`interp.data.task.TaskConfig`, whose ``task``
  field holds the task's name; ``config.json`` records it, under ``"task"``, for every task but
  ``standard``);
- ``eval_sets``: the names of the evaluation sets (the ``{name}_acc`` / ``{name}_loss`` columns);
- ``layout``: the token layout the measures read. ``"pairs"`` is the standard one (item ``i`` at
  position ``2i``, its label at ``2i + 1``, the query last, and the batch metadata of
  :class:`interp.data.task.Batch`); a task of another layout lists the measures that can read it;
- ``measures``: the registered progress measures that apply (``None``: every one; ``()``: none).

The standard task (Reddy's in-context classification) is ``standard``; CoPE's token tasks
(:mod:`interp.data.cope_tasks`) register themselves with their own configs and the ``tokens``
layout (they train through :func:`interp.train.token_training.train_token_task`). A task whose
batches are token ids for a model with an ordinary token embedding registers itself the same way,
with its own ``config`` and ``generator``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import no_type_check

from interp.data.task import EVAL_SET_NAMES, TaskConfig, TaskGenerator
from interp.registry import Check, Registry, source_of

__all__ = ["Task", "TASKS", "register_task", "get_task", "task_name", "make_generator"]

LAYOUTS = ("pairs", "tokens")


@dataclass(frozen=True)
class Task:
    """One registered task (see the module docstring for each field)."""

    name: str
    generator: Callable
    config: type
    eval_sets: tuple[str, ...]
    layout: str
    measures: tuple[str, ...] | None
    description: str
    source: str


TASKS: Registry[Task] = Registry(
    "task",
    field="TaskConfig.task",
    entry="Task",
    pattern=r"^[a-z][a-z0-9_-]*$",
    pattern_says="lower case, digits, '_' or '-'",
    hint="(a plugin's task needs --plugin FILE)",
)
"""Name -> :class:`Task`, in registration order (:class:`interp.registry.Registry`)."""


_CHECKS: tuple[Check, ...] = (
    ("generator", callable, "generator(config, seed)"),
    ("layout", lambda v: v in LAYOUTS, f"allowed values are {LAYOUTS}"),
    (
        "eval_sets",
        lambda v: bool(v) and all(isinstance(s, str) and s for s in v),
        "one or more set names",
    ),
    (
        "measures",
        lambda v: v is None or all(isinstance(m, str) for m in v),
        "None or measure names",
    ),
)


# Self-validating (one-line errors naming the field): the test run's runtime type checker would
# pre-empt them with a traceback, so it skips this function.
@no_type_check
def register_task(
    name: str,
    generator: Callable,
    *,
    config: type = TaskConfig,
    eval_sets: tuple[str, ...] = EVAL_SET_NAMES,
    layout: str = "pairs",
    measures: tuple[str, ...] | None = None,
    description: str = "",
    replace: bool = False,
) -> Task:
    """Register a task under ``name`` (see the module docstring); returns it.

    Raises:
        ValueError: one line naming the field: a malformed name, a name already taken (unless
            ``replace``), a generator that is not callable, an unknown layout, empty
            ``eval_sets``.
    """
    TASKS.check_name(name)
    if name in TASKS and not replace:
        raise TASKS.taken(name)
    fields = {"generator": generator, "layout": layout, "eval_sets": eval_sets}
    TASKS.check_fields(fields | {"measures": measures}, _CHECKS)
    task = Task(
        name=name,
        generator=generator,
        config=config,
        eval_sets=tuple(eval_sets),
        layout=layout,
        measures=None if measures is None else tuple(measures),
        description=description or (generator.__doc__ or "").strip().split("\n")[0],
        source=source_of(generator) or "?",
    )
    return TASKS.declare(name, task, replace=replace)


def task_name(config) -> str:
    """The registered name of the task a config describes: its ``task`` field, else the task
    registered with the config's class (a token task's), else ``standard``."""
    name = getattr(config, "task", None)
    if isinstance(name, str):
        return name
    for task in TASKS.values():
        if task.config is not TaskConfig and type(config) is task.config:
            return task.name
    return "standard"


def get_task(name: str) -> Task:
    """The registered task called ``name``.

    Raises:
        ValueError: one line naming the field and the registered tasks (a plugin's task is there
            only once ``--plugin`` loaded it).
    """
    return TASKS.require(name)


def make_generator(config, seed: int):
    """The generator of the task ``config`` describes, seeded (what training and the run
    directory's evaluation sets draw from)."""
    return get_task(task_name(config)).generator(config, seed)


register_task(
    "standard",
    TaskGenerator,
    description="Reddy's in-context classification task: N item-label pairs and a query",
)
