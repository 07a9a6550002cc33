"""The ``--set`` keys read from the config dataclasses' source, without importing them.

:func:`interp.train.overrides.settable_fields` imports ``TaskConfig``, ``ModelConfig``,
``TrainConfig`` and the positional encodings, which pulls in torch and TransformerLens (seconds of
start-up). ``induction-cliff train --help`` only lists the keys, so it reads the same classes from
their source files with :mod:`ast`: field names, annotations, literal defaults and the
``Attributes:`` docstrings, and the encodings declared with a ``config=`` at the bottom of
:mod:`interp.config.positional`. A test checks that the two readings agree.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

__all__ = ["static_settable_fields"]

_ROOT = Path(__file__).resolve().parent.parent  # the interp package
# (group, source file under interp/, class name), in the order settable_fields lists them.
_CLASSES = (
    ("task", "config/task_config.py", "TaskConfig"),
    ("model", "config/model_config.py", "ModelConfig"),
    ("train", "config/train_config.py", "TrainConfig"),
)
_POSITIONAL = "config/positional.py"


def _module(rel: str) -> ast.Module:
    path = _ROOT / rel
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"class {name} not found")


def _default(value: ast.expr | None):
    """A field's literal default; a ``field(default=...)`` or ``field(default_factory=...)`` of
    a literal or of ``list``/``dict``/``tuple``."""
    if value is None:
        raise LookupError("a field without a default")
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
        for kw in value.keywords:
            if kw.arg == "default":
                return ast.literal_eval(kw.value)
            if kw.arg == "default_factory" and isinstance(kw.value, ast.Name):
                return {"list": list, "dict": dict, "tuple": tuple}[kw.value.id]()
        raise LookupError("a field() without a literal default")
    return ast.literal_eval(value)


def _fields(node: ast.ClassDef) -> list[tuple[str, str, object]]:
    """``(name, annotation, default)`` of each dataclass field of ``node``, in order."""
    out = []
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        annotation = ast.unparse(stmt.annotation)
        if annotation.startswith("ClassVar"):
            continue
        out.append((stmt.target.id, annotation, _default(stmt.value)))
    return out


def _docs(node: ast.ClassDef) -> dict[str, str]:
    from interp.train.overrides import field_docs

    holder = type(node.name, (), {"__doc__": inspect.cleandoc(ast.get_docstring(node) or "")})
    return field_docs(holder)


def _registered_configs(tree: ast.Module) -> list[tuple[str, str]]:
    """``(encoding name, config class name)`` of each module-level
    ``declare_positional("name", Rules, config=Config)`` (the built-in encodings' rules)."""
    out = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (
            isinstance(call, ast.Call) and getattr(call.func, "id", "") == "declare_positional"
        ):
            continue
        config = next((kw.value for kw in call.keywords if kw.arg == "config"), None)
        if isinstance(config, ast.Name) and call.args and isinstance(call.args[0], ast.Constant):
            out.append((call.args[0].value, config.id))
    return out


def static_settable_fields() -> list:
    """What :func:`interp.train.overrides.settable_fields` returns for the built-in configs and
    encodings, read from source (no torch, no TransformerLens)."""
    from interp.train.overrides import DERIVED_MODEL_FIELDS, SettableField

    out = []
    for group, rel, name in _CLASSES:
        node = _class(_module(rel), name)
        docs = _docs(node)
        for field, annotation, default in _fields(node):
            if group == "model" and field in DERIVED_MODEL_FIELDS:
                continue
            out.append(SettableField(field, group, annotation, default, docs.get(field, ""), name))
    positional = _module(_POSITIONAL)
    for enc_name, config_name in _registered_configs(positional):
        node = _class(positional, config_name)
        docs = _docs(node)
        for field, annotation, default in _fields(node):
            owner = f"{config_name}, with positional={enc_name}"
            key = f"{enc_name}_{field}"
            out.append(SettableField(key, "model", annotation, default, docs.get(field, ""), owner))
    return out
