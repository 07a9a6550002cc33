"""Extension modules ("plugins") loaded by ``induction-cliff --plugin PATH_OR_MODULE``.

A plugin is an ordinary Python module that registers things when it is imported: a progress
measure (:func:`interp.register_measure`), and, through the other registries, a positional encoding
or a dynamics model. ``--plugin`` takes either a path to a ``.py`` file or the dotted name of an
importable module, and may be repeated; the command line loads the plugins before anything else, so
``induction-cliff --plugin my_measure.py list measures`` shows the new measure, and
``induction-cliff train --plugin my_measure.py ...`` writes its column into ``metrics.csv``.

What was loaded is listed by :func:`loaded_plugins`. A run trained in this process records in
``config.json`` (``"plugins"``; absolute paths for files) the plugins whose entries its training
used: its task, its positional encoding, its kind of model and the progress measures it computes
(:func:`interp.registry.plugins_of`). A plugin that only draws (a figure or report section), fits
(a dynamics model) or declares an experiment is needed by the command that uses it, not by the
run. Resuming such a run needs the recorded plugins again (the command line says so rather than
guessing); every command that opens a run checks them (:func:`interp.io.rundir.recorded_plugins`
reads the list back).

This module imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from interp.registry import Registry, declaring_from, plugins_of

__all__ = ["PluginError", "load_plugin", "load_plugins", "loaded_plugins", "plugins_used"]

log = logging.getLogger(__name__)

_LOADED: Registry[ModuleType] = Registry("plugin", field="--plugin", entry="plugin")
"""The plugins loaded in this process (absolute path or module name -> module), in load order."""
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class PluginError(ValueError):
    """A plugin could not be found or failed while being imported."""


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec or Path(spec).exists()


def load_plugin(spec: str) -> ModuleType:
    """Import one plugin (once per process), so that its registrations take effect.

    Args:
        spec: a path to a ``.py`` file, or the dotted name of an importable module.

    Returns:
        The module.

    Raises:
        PluginError: no such file or module, or the module raised while being imported (the
            message names the plugin and the error, in one line).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise PluginError(f"--plugin {spec!r} is invalid: give a .py file or a module name")
    spec = spec.strip()
    key = str(Path(spec).expanduser().resolve()) if _is_path(spec) else spec
    if key in _LOADED:
        return _LOADED[key]
    module = _import_file(spec, Path(key)) if _is_path(spec) else _import_module(spec)
    _LOADED.declare(key, module)
    log.info("loaded plugin %s", key)
    return module


def _import_file(spec: str, path: Path) -> ModuleType:
    """Import the ``.py`` file ``path`` (given as ``spec``) under a name of its own."""
    if not path.is_file():
        raise PluginError(f"--plugin {spec!r} is invalid: no such file")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"induction_cliff_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise PluginError(f"--plugin {spec!r} is invalid: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        with declaring_from(str(path)):
            module_spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise PluginError(f"--plugin {spec!r} failed: {type(err).__name__}: {err}") from err
    return module


def _import_module(spec: str) -> ModuleType:
    """Import the module named ``spec``."""
    if not _MODULE_NAME.match(spec):
        raise PluginError(f"--plugin {spec!r} is invalid: no such file or module name")
    try:
        with declaring_from(spec):
            return importlib.import_module(spec)
    except ModuleNotFoundError as err:
        if err.name is not None and spec.startswith(err.name):
            raise PluginError(
                f"--plugin {spec!r} is invalid: no such file or importable module"
            ) from err
        raise PluginError(f"--plugin {spec!r} failed: {type(err).__name__}: {err}") from err
    except Exception as err:
        raise PluginError(f"--plugin {spec!r} failed: {type(err).__name__}: {err}") from err


def load_plugins(specs: Iterable[str]) -> list[ModuleType]:
    """:func:`load_plugin` for each spec, in order."""
    return [load_plugin(s) for s in specs]


def plugins_used(task, model, kind: str) -> list[str]:
    """The loaded plugins whose entries training a run of these configs uses: its task, its
    positional encoding, its kind of model and the progress measures its task computes (columns
    of ``metrics.csv``); what ``config.json`` records. Plugins that only draw, fit or declare
    experiments are not among them."""
    from interp.data.tasks import TASKS, task_name

    name = task_name(task)
    measures = TASKS[name].measures if name in TASKS else ()
    used = {"task": [name], "positional encoding": [getattr(model, "positional", None)]}
    used |= {"run kind": [kind], "measure": measures}  # measures None: every registered one
    return plugins_of(used)


def loaded_plugins() -> list[str]:
    """The plugins loaded in this process, in order (absolute paths for files, else module names);
    what a run trained now records in ``config.json``."""
    return list(_LOADED)
