"""The kinds of model whose runs :func:`interp.io.rundir.load_run` reopens (the ``kind`` of a
run's ``config.json``), and how a kind is registered."""

from __future__ import annotations

import importlib
import operator
from dataclasses import dataclass

from interp.registry import Registry

__all__ = ["RUN_KINDS", "RunKind", "LazyRunKind", "register_run_kind", "register_lazy_run_kind"]


@dataclass(frozen=True)
class RunKind:
    """How to rebuild the model of a run: its config class and its model class."""

    config: type
    model: type

    def config_class(self) -> type:
        return self.config

    def model_class(self) -> type:
        return self.model


@dataclass(frozen=True)
class LazyRunKind:
    """A run kind whose classes live in a module imported only when a run of that kind is opened
    (:func:`register_lazy_run_kind`): the module's own import registers the kind for good."""

    module: str
    config: str
    model: str
    config_module: str | None = None  # where the config class lives, if not in ``module``

    def config_class(self) -> type:
        return getattr(importlib.import_module(self.config_module or self.module), self.config)

    def model_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.model)


RUN_KINDS: Registry[RunKind | LazyRunKind] = Registry(
    "run kind",
    field="kind",
    entry="RunKind",
    hint="(a kind is known once the module that defines its model is imported, e.g. with --plugin)",
    same=operator.eq,
)
# The network's module (torch, TransformerLens) is imported when a run's model is built; its
# config is read without them.
RUN_KINDS.declare(
    "induction_net",
    LazyRunKind(
        "interp.model.network", "ModelConfig", "InductionNet", "interp.config.model_config"
    ),
)
"""The kinds of model whose runs :func:`load_run` reopens, by the ``kind`` of ``config.json``. A
kind is registered by the module that defines its model (:func:`register_run_kind`), so a higher
stage's model (the minimal model of ``phenomenology``) is known once that module is imported, or
named with the module that defines it (:func:`register_lazy_run_kind`, what the command line does,
so that a command opening no such run does not import it)."""


def register_run_kind(name: str, config: type, model: type) -> None:
    """Register a kind of model whose runs :func:`load_run` can reopen.

    Args:
        name: the ``kind`` recorded in ``config.json``.
        config: the config class (a dataclass; ``to_dict``/``from_dict`` optional).
        model: the model class, built as ``model(config, seed=None)``.
    """
    if not (isinstance(config, type) and isinstance(model, type)):
        raise TypeError(f"register_run_kind({name!r}, ...): give the config and model classes")
    # A kind named lazily (below) becomes its classes once its module is imported; the classes
    # of another module are another kind, refused under a name already taken.
    named = RUN_KINDS.get(name)
    lazy = isinstance(named, LazyRunKind) and named.module == model.__module__
    RUN_KINDS.declare(name, RunKind(config, model), replace=lazy)


def register_lazy_run_kind(name: str, module: str, config: str, model: str) -> None:
    """Register a kind by the module that defines it and its classes' names there; the module is
    imported when a run of the kind is opened. A kind already registered with its classes stays."""
    if not isinstance(RUN_KINDS.get(name), RunKind):
        RUN_KINDS.declare(name, LazyRunKind(module, config, model), replace=True)
