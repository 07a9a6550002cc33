"""Imports flow one way: no cycle among the package's modules (module-level imports, the ones that
run when a module is imported; imports inside functions and under ``TYPE_CHECKING`` are deferred
by design), and the library never imports the command line."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("interp", "phenomenology")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level_imports(tree: ast.Module, modules: set[str]) -> set[str]:
    found: set[str] = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in modules:
                    found.add(node.module)
                # ``from interp import checkpoints`` imports the submodule
                found.update(
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if f"{node.module}.{a.name}" in modules
                )

    visit(tree.body)
    return found


def import_graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p) for p in files}
    return {
        _module_name(p): _top_level_imports(ast.parse(p.read_text()), modules) - {_module_name(p)}
        for p in files
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := dfs(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_known_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_among_the_packages_modules():
    graph = import_graph()
    assert "interp.train.training" in graph and "interp.io.rundir" in graph["interp.train.training"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_library_never_imports_the_cli():
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    offenders = [
        str(p.relative_to(ROOT))
        for p in files
        if p.name != "cli.py"
        and any(
            (isinstance(n, ast.ImportFrom) and n.module == "interp.cli")
            or (isinstance(n, ast.Import) and any(a.name == "interp.cli" for a in n.names))
            for n in ast.walk(ast.parse(p.read_text()))
        )
    ]
    assert offenders == []
