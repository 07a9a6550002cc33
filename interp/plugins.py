"""Plugins: modules outside the package that register their own parts before configs are built.

A plugin is a Python file or an importable module whose import registers something (for example a
positional encoding with :func:`interp.positional.register_positional`). The command line loads
them with ``--plugin PATH_OR_MODULE`` (repeatable), before it builds any config::

    induction-cliff train --plugin tests/fixtures/alibi.py --set positional=alibi --out runs/alibi

A process that reopens such a run (``evaluate``, ``figures``, ...) needs the same ``--plugin``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["load_plugins", "load_plugin", "LOADED_PLUGINS"]

log = logging.getLogger(__name__)

#: the plugins this process loaded, as given (spawned sweep workers load them too).
LOADED_PLUGINS: list[str] = []


def load_plugin(spec: str) -> ModuleType:
    """Import one plugin: a ``.py`` file path or a dotted module name. Importing the same file
    again returns the module already loaded (its registrations happen once).

    Raises:
        ValueError: one line naming the plugin, if it does not exist or its import fails.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"--plugin {spec!r} is invalid: give a .py file or a module name")
    path = Path(spec)
    if spec.endswith(".py") or path.is_file() or "/" in spec or "\\" in spec:
        if not path.is_file():
            raise ValueError(f"--plugin {spec!r}: no such file")
        resolved = path.resolve()
        digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
        stem = re.sub(r"\W", "_", resolved.stem)
        name = f"induction_cliff_plugin_{stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        module_spec = importlib.util.spec_from_file_location(name, resolved)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"--plugin {spec!r}: cannot be imported as a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[name]
            raise ValueError(
                f"--plugin {spec!r}: importing it failed: {type(err).__name__}: {err}"
            ) from err
    else:
        try:
            module = importlib.import_module(spec)
        except ModuleNotFoundError as err:
            if err.name and spec.startswith(err.name):
                raise ValueError(f"--plugin {spec!r}: no module named {err.name!r}") from err
            raise ValueError(f"--plugin {spec!r}: importing it failed: {err}") from err
        except Exception as err:
            raise ValueError(
                f"--plugin {spec!r}: importing it failed: {type(err).__name__}: {err}"
            ) from err
    log.info("loaded plugin %s (%s)", spec, module.__name__)
    if spec not in LOADED_PLUGINS:
        LOADED_PLUGINS.append(spec)
    return module


def load_plugins(paths: Sequence[str]) -> list[ModuleType]:
    """:func:`load_plugin` for each of ``paths``, in order."""
    return [load_plugin(p) for p in paths]
