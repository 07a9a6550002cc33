"""The size limits of the package's code: no module over 800 lines and no function over 100
(docs/contributing.md); a module or function that grows past them is split by concern."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for pkg in ("interp", "phenomenology") for p in (ROOT / pkg).rglob("*.py"))
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function or method of ``source`` longer than ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_the_checker_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(100))
    assert long_functions(f"def f():\n{body}\n", 100) == [("f", 101)]
    assert long_functions(f"def f():\n{body}\n", 101) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_size_limits(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path}: over {MAX_MODULE_LINES} lines"
    assert long_functions(source, MAX_FUNCTION_LINES) == [], path
