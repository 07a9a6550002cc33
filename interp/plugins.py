"""Loading extensions (a dynamics model, a measure, ...) from one file or module.

``induction-cliff ... --plugin PATH_OR_MODULE`` imports each plugin before the command runs; a
plugin registers what it adds when it is imported (e.g. :func:`phenomenology.register_model`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["PluginError", "load_plugins"]

logger = logging.getLogger(__name__)


class PluginError(ValueError):
    """A plugin could not be found or imported (the message names it)."""


def load_plugins(paths: Sequence[str]) -> list[ModuleType]:
    """Imports each plugin: a ``.py`` file path or a dotted module name.

    A file is imported under the module name ``induction_cliff_plugin_<stem>`` (once: loading the
    same file twice returns the module already loaded).

    Raises:
        PluginError: one line naming the plugin, for a missing file or module, or an error
            raised while importing it.
    """
    modules = []
    for spec in paths:
        if spec.endswith(".py") or "/" in spec or "\\" in spec:
            path = Path(spec)
            if not path.is_file():
                raise PluginError(f"--plugin {spec!r}: no such file")
            name = f"induction_cliff_plugin_{path.stem}"
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(
                path.resolve()
            ):
                modules.append(sys.modules[name])
                continue
            module_spec = importlib.util.spec_from_file_location(name, path.resolve())
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except Exception as err:
                del sys.modules[name]
                raise PluginError(
                    f"--plugin {spec!r}: importing it failed: {type(err).__name__}: {err}"
                ) from err
        else:
            try:
                module = importlib.import_module(spec)
            except ModuleNotFoundError as err:
                raise PluginError(f"--plugin {spec!r}: no module of that name ({err})") from err
            except Exception as err:
                raise PluginError(
                    f"--plugin {spec!r}: importing it failed: {type(err).__name__}: {err}"
                ) from err
        logger.info("loaded plugin %s", spec)
        modules.append(module)
    return modules
