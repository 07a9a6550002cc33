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


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level. Importing ``interp.a.b`` also
    runs the ``__init__`` of ``interp.a`` and ``interp``, so those count as imported too (except
    the importer's own parent packages, which are already being imported)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p) for p in files}
    graph = {}
    for p in files:
        name = _module_name(p)
        direct = _top_level_imports(ast.parse(p.read_text()), modules)
        implied = {parent for m in direct for parent in _parents(m)} & modules
        graph[name] = (direct | implied) - {name} - _parents(name)
    return graph


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
    # nested packages: the subpackages' __init__ modules are part of the graph
    assert "interp.io" in graph["interp.train.training"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_a_package_init_that_imports_its_importer_is_a_cycle(tmp_path, monkeypatch):
    """What nested packages add: ``interp.x.__init__`` importing ``interp.y.b``, which imports
    ``interp.x.a``, runs ``interp.x.__init__`` again half-done."""
    for rel, body in {
        "interp/__init__.py": "",
        "interp/x/__init__.py": "from interp.y.b import B\n",
        "interp/x/a.py": "A = 1\n",
        "interp/y/__init__.py": "",
        "interp/y/b.py": "from interp.x.a import A\nB = A\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGES", ("interp",))
    assert find_cycle(import_graph()) == ["interp.x", "interp.y.b", "interp.x"]


def test_the_library_never_imports_the_cli():
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    offenders = [
        str(p.relative_to(ROOT))
        for p in files
        if "cli" not in p.relative_to(ROOT).parts[1:-1]
        and any(
            (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("interp.cli"))
            or (isinstance(n, ast.Import) and any(a.name.startswith("interp.cli") for a in n.names))
            for n in ast.walk(ast.parse(p.read_text()))
        )
    ]
    assert offenders == []
