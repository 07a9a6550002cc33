"""Stage 0, the one registry mechanism, below the pipeline's stages: every kind of plug-in
(tasks, positional encodings, run kinds, the loaded plugins, progress measures, dynamics models,
figures and report sections, experiments) is a :class:`Registry`, with one way to declare an
entry, list the names, validate a name and require an entry.

- :meth:`Registry.declare` adds an entry under a name: a malformed name, or a name already taken
  by another entry (unless ``replace``), is refused in one line naming the kind.
- :meth:`Registry.names` lists the names in declaration order.
- :meth:`Registry.require` (one name) and :meth:`Registry.require_all` (several) return the
  entries: an unknown name is refused in one line naming the field and the registered names.
- :meth:`Registry.origin` names the plugin file or module whose import declared an entry (None
  for the package's own): :func:`declaring_from` marks a plugin's import, so that a run records
  only the plugins whose entries its training used (:func:`plugins_of`).

Each kind keeps its public names (``register_measure``, ``register_task``, ``register_section``,
``register_positional``, ``register_model``, ``register_experiment``, ...) as thin functions that
validate the entry's own fields and declare it here. A registry is a ``dict`` (name -> entry), so
reading one is reading a dict. This package imports nothing of the rest and nothing heavy: every
stage can import it, the command line's light start included.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["Check", "Registry", "REGISTRIES", "declaring_from", "plugins_of", "source_of"]

T = TypeVar("T")
Check = tuple[str, Callable[[Any], bool], str]
"""A field check of :meth:`Registry.check_fields`: ``(field, test, what a valid value is)``."""

REGISTRIES: dict[str, Registry] = {}
"""Every registry by its kind (``"task"``, ``"measure"``, ...), in creation order."""

_declaring: list[str] = []  # the plugins being imported now, innermost last


@contextlib.contextmanager
def declaring_from(plugin: str) -> Iterator[None]:
    """Entries declared inside this block come from ``plugin`` (a file's absolute path or a
    module's name): :meth:`Registry.origin` names it."""
    _declaring.append(plugin)
    try:
        yield
    finally:
        _declaring.pop()


def _same(old: Any, new: Any) -> bool:
    return old is new


class Registry(dict, Generic[T]):
    """Name -> entry for one kind of plug-in, in declaration order.

    Args:
        kind: what an entry is, in messages (``"task"``, ``"progress measure"``).
        field: the field a name is given in, for an unknown name (``"TaskConfig.task"``).
        entry: the entry's type name, for a bad or taken name (``"Task"`` -> ``Task.name=...``).
        pattern: a regular expression every name must match (None: any non-empty string), and
            ``pattern_says`` what it allows, for the message.
        hint: appended to the message for an unknown name (e.g. how a plugin's entry is loaded).
        same: ``same(old, new)``: whether declaring ``new`` over ``old`` is the same entry again
            (a module imported twice), which is no conflict. Default: the same object.
        sort: list the names sorted instead of in declaration order (in messages).
    """

    def __init__(
        self,
        kind: str,
        *,
        field: str,
        entry: str,
        pattern: str | None = None,
        pattern_says: str = "",
        hint: str = "",
        same: Callable[[Any, Any], bool] = _same,
        sort: bool = False,
    ) -> None:
        super().__init__()
        self.kind, self.field, self.entry, self.hint = kind, field, entry, hint
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._pattern_says = pattern_says
        self._same, self._sort = same, sort
        self._origins: dict[str, str] = {}
        REGISTRIES[kind] = self

    # ---- declare

    def check_name(self, name: object) -> str:
        """``name`` if it is a valid name of this kind; else a one-line ``ValueError``."""
        valid = isinstance(name, str) and bool(name.strip())
        if valid and self._pattern is not None:
            valid = bool(self._pattern.match(name))
        if not valid:
            says = self._pattern_says or "a non-empty string"
            raise ValueError(f"{self.entry}.name={name!r} is invalid: {says}")
        return name

    def check_fields(self, values: Mapping[str, Any], checks: Iterable[Check]) -> None:
        """Refuse the first field of ``values`` that fails its check, in one line naming it:
        ``checks`` are ``(field, test, says)``, ``test(value)`` true when the value is valid."""
        for field, test, says in checks:
            if not test(values[field]):
                raise ValueError(f"{self.entry}.{field}={values[field]!r} is invalid: {says}")

    def declare(self, name: str, entry: T, *, replace: bool = False, by: str = "") -> T:
        """Add ``entry`` under ``name`` (checked by :meth:`check_name`); returns it.

        Raises:
            ValueError: a malformed name, or a name taken by another entry (``by`` says by whom)
                unless ``replace``.
        """
        self.check_name(name)
        if name in self and not replace and not self._same(self[name], entry):
            raise self.taken(name, by)
        self[name] = entry
        if _declaring:
            self._origins[name] = _declaring[-1]
        else:
            self._origins.pop(name, None)
        return entry

    def taken(self, name: str, by: str = "") -> ValueError:
        """The one-line error for a name already registered (``by`` says by whom)."""
        who = f" by {by}" if by else ""
        return ValueError(
            f"{self.entry}.name={name!r} is invalid: already registered{who} "
            "(pass replace=True to replace it)"
        )

    def withdraw(self, name: str) -> None:
        """Remove ``name`` if it is registered (tests and notebooks that declare temporary
        entries)."""
        self.pop(name, None)
        self._origins.pop(name, None)

    # ---- list, validate, require

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered; a value that cannot be a name (a list read from a
        file) is simply not one."""
        try:
            return dict.__contains__(self, name)
        except TypeError:
            return False

    def names(self) -> tuple[str, ...]:
        """The registered names, in declaration order."""
        return tuple(self)

    def _listed(self) -> list[str]:
        return sorted(self) if self._sort else list(self)

    def unknown(self, name: object) -> ValueError:
        """The one-line error for a name that is not registered."""
        hint = f" {self.hint}" if self.hint else ""
        return ValueError(
            f"{self.field}={_short(name)} is invalid: registered {self.kind}s are "
            f"{self._listed()}{hint}"
        )

    def require(self, name: str) -> T:
        """The entry registered as ``name``; an unknown name is :meth:`unknown`."""
        try:
            return self[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None

    def require_all(self, names: Iterable[str]) -> list[T]:
        """The entries of ``names``, in that order (the first unknown one is refused)."""
        return [self.require(n) for n in names]

    def origin(self, name: str) -> str | None:
        """The plugin whose import declared ``name`` (None: the package's own, or unknown)."""
        return self._origins.get(name)


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a value read from a hostile file)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def source_of(obj: object) -> str:
    """The module that defines ``obj`` (a plugin loaded from a file: the file), for listings."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("induction_cliff_plugin_"):  # see interp.io.plugins.load_plugin
        return str(getattr(sys.modules.get(module), "__file__", None) or module)
    return module


def plugins_of(used: Mapping[str, Iterable[str] | None]) -> list[str]:
    """The plugins that declared the entries ``used`` (``{kind: names}``; None: every entry of
    that kind), without repeats, in the order given: what a run that used those entries needs
    again. A kind with no registry (its module never imported) has no entries."""
    found: list[str] = []
    for kind, names in used.items():
        registry = REGISTRIES.get(kind)
        if registry is None:
            continue
        for name in registry.names() if names is None else names:
            plugin = registry.origin(name)
            if plugin is not None and plugin not in found:
                found.append(plugin)
    return found
