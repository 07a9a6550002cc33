"""Imports flow one way: every import of the package's modules (at module level and inside
functions; only those under ``TYPE_CHECKING`` are exempt, as they never run) goes from a stage to
the same stage or a lower one, no import cycle exists among the modules nor among the stages, and
the library never imports the command line. The checkout's ``experiments/`` (the project's own
declared experiments, not installed) is the last stage: it imports the package, and no module of
the package imports it, by an import statement or by its name in a string. The stage order is the
one written in ``docs/contributing.md`` (section "Layout"), which a test here also checks."""

from __future__ import annotations

import ast
import functools
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_REPOSITORY = ROOT  # the checkout itself (tests below point ROOT at planted copies)
PACKAGES = ("interp", "phenomenology", "experiments")

# Bottom up: each stage imports only itself and the stages before it. ``pkg.*`` is the package
# ``pkg`` and everything in it; a name without ``.*`` is that module alone (the ``interp`` package
# root, whose public names load lazily and import nothing at import time). A module belongs to the
# stage of its longest match; a module that matches none fails the test until it is placed. Stage 0
# is the registry mechanism every stage uses; the pipeline's stages are numbered from 1.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("registry", ("interp.registry.*",)),
    ("config", ("interp.config.*",)),
    ("data", ("interp.data.*",)),
    ("model", ("interp.model.*",)),
    ("io", ("interp.io.*",)),
    ("train", ("interp.train.*",)),
    ("analysis", ("interp.analysis.*",)),
    ("phenomenology", ("phenomenology.*",)),
    ("viz", ("interp.viz.*",)),
    ("orchestration", ("interp.experiments.*",)),
    ("cli", ("interp.cli", "interp.cli.*", "interp")),
    ("experiments", ("experiments.*",)),
)


def stage_of(module: str) -> int:
    """The index in :data:`STAGES` of the module's stage (its longest match)."""
    best, best_len = None, -1
    for i, (_, patterns) in enumerate(STAGES):
        for pattern in patterns:
            prefix = pattern.removesuffix(".*")
            hit = module == prefix or (pattern.endswith(".*") and module.startswith(prefix + "."))
            if hit and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no stage of STAGES: place it")
    return best


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_LOADERS = ("import_module", "__import__", "find_spec")


def _is_logger_call(node: ast.Call) -> bool:
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "getLogger") or (
        isinstance(func, ast.Name) and func.id == "getLogger"
    )


def _named_module(node: ast.AST, modules: set[str]) -> str | None:
    """The package module an expression imports by name, or None: the text given to
    ``importlib.import_module``, ``__import__`` or ``find_spec`` (an f-string by its constant
    leading part, a package such as ``interp.cli.commands``), and any string literal that is a
    package module's name or a ``module:attribute`` spec (a literal handed to a loader elsewhere,
    e.g. a table of lazy imports; a dotted name only, so that a folder name such as ``"interp"``
    in a path is not one)."""
    if isinstance(node, ast.Call):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called not in _LOADERS or not node.args:
            return None
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value if first.value in modules else None  # even a bare "interp"
        if isinstance(first, ast.JoinedStr) and first.values:
            head = first.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                package = head.value.rpartition(".")[0]
                return package if package in modules else None
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
        text = node.value
        module = text.split(":", 1)[0] if re.fullmatch(r"[\w.]+:\w+", text) else text
        return module if module in modules else None
    return None


def _imports(tree: ast.Module, modules: set[str]) -> list[tuple[str, int]]:
    """(imported package module, line) for every import of the tree, wherever it stands (module
    level, functions, methods, ``try`` blocks), except under ``if TYPE_CHECKING:``: import
    statements, and imports by name in strings (:func:`_named_module`)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if _is_type_checking(node):
            for child in node.orelse:  # the else branch of ``if TYPE_CHECKING`` does run
                visit(child)
            return
        if isinstance(node, ast.Call) and _is_logger_call(node):
            return  # a logger's name is not an import
        name = _named_module(node, modules)
        if name is not None:
            found.append((name, node.lineno))
        if isinstance(node, ast.Import):
            found.extend((a.name, node.lineno) for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in modules:
                found.append((node.module, node.lineno))
            # ``from interp.io import checkpoints`` imports the submodule
            found.extend(
                (f"{node.module}.{a.name}", node.lineno)
                for a in node.names
                if f"{node.module}.{a.name}" in modules
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return list(dict.fromkeys(found))  # a loader's literal argument is seen twice


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def direct_imports(root: Path | None = None) -> dict[str, list[tuple[str, int]]]:
    """Module -> [(package module it imports, line)], every import (see :func:`_imports`)."""
    root = ROOT if root is None else root
    if root == _REPOSITORY:
        return _direct_imports_of(root, PACKAGES)  # the package as it is: read once per session
    return _direct_imports_of.__wrapped__(root, PACKAGES)


@functools.lru_cache(maxsize=1)
def _direct_imports_of(root: Path, packages: tuple[str, ...]) -> dict[str, list[tuple[str, int]]]:
    files = [p for pkg in packages for p in (root / pkg).rglob("*.py")]
    modules = {_module_name(root, p) for p in files}
    return {
        _module_name(root, p): _imports(ast.parse(p.read_text(), str(p)), modules) for p in files
    }


def import_graph(root: Path | None = None) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in it. Importing ``interp.a.b`` also runs
    the ``__init__`` of ``interp.a`` and ``interp``, so those count as imported too (except the
    importer's own parent packages, which are already being imported)."""
    direct = direct_imports(root)
    modules = set(direct)
    graph = {}
    for name, found in direct.items():
        targets = {m for m, _ in found}
        implied = {parent for m in targets for parent in _parents(m)} & modules
        graph[name] = (targets | implied) - {name} - _parents(name)
    return graph


def back_imports(root: Path | None = None) -> list[str]:
    """Every import from a stage to a higher one, as
    ``importer:line -> imported (stage -> stage)``."""
    found = []
    for name, imports in sorted(direct_imports(root).items()):
        for target, line in imports:
            if stage_of(target) > stage_of(name):
                found.append(
                    f"{name}:{line} -> {target} "
                    f"({STAGES[stage_of(name)][0]} -> {STAGES[stage_of(target)][0]})"
                )
    return found


def direct_graph(root: Path | None = None) -> dict[str, set[str]]:
    """Module -> the package modules its import statements name (no implied parent packages)."""
    return {name: {m for m, _ in found} - {name} for name, found in direct_imports(root).items()}


def stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between stages (a stage importing itself left out)."""
    out: dict[str, set[str]] = {name: set() for name, _ in STAGES}
    for module, targets in graph.items():
        a = STAGES[stage_of(module)][0]
        out[a] |= {STAGES[stage_of(t)][0] for t in targets} - {a}
    return out


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the stages' folders (``interp/train``, ``phenomenology``, ...):
    a module counts as the folder of the stage pattern it matches longest, so a subpackage is part
    of its stage's folder (``experiments/catalog``, the declared experiments, which the
    ``experiments`` package loads and which import its helpers, is part of ``experiments``)."""

    def folder(module: str) -> str:
        best = module.split(".")[0]
        for _, patterns in STAGES:
            for pattern in patterns:
                prefix = pattern.removesuffix(".*")
                hit = module == prefix or (
                    pattern.endswith(".*") and module.startswith(prefix + ".")
                )
                if hit and len(prefix) > len(best):
                    best = prefix
        return best

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(folder(module), set()).update(folder(t) for t in targets)
    return {f: targets - {f} for f, targets in out.items()}


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


# ---- the rules, on the package as it is ------------------------------------------------------


def test_no_import_runs_from_a_lower_stage_to_a_higher_one():
    assert back_imports() == []


def test_no_import_cycle_among_the_modules_counting_imports_inside_functions():
    graph = import_graph()
    # imports inside functions are edges (interp.train.training imports the stacked model lazily)
    assert "interp.model.stacked" in graph["interp.train.training"]
    # nested packages: the subpackages' __init__ modules are part of the graph
    assert "interp.io" in graph["interp.train.training"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_no_cycle_among_the_stages_nor_the_folders():
    """Between stages and between folders, the import statements themselves (the package root
    ``interp``, run implicitly by every import of ``interp.*``, imports nothing at import time)."""
    graph = direct_graph()
    cycle = find_cycle(stage_graph(graph))
    assert cycle is None, " -> ".join(cycle)
    folders = folder_graph(graph)
    assert "interp.analysis" in folders["phenomenology"]  # phenomenology reads analysis
    assert "interp.experiments" in folders["experiments"]  # the declared experiments, the registry
    cycle = find_cycle(folders)
    assert cycle is None, " -> ".join(cycle)


def test_every_module_has_a_stage_and_the_documented_order_is_the_tested_one():
    for module in direct_imports():
        stage_of(module)
    text = (ROOT / "docs" / "contributing.md").read_text()
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| \d+ \| `?([a-z]+)`? \|", layout, flags=re.M)
    assert documented == [name for name, _ in STAGES]


def test_the_library_never_imports_the_cli():
    offenders = [
        f"{name}:{line}"
        for name, imports in direct_imports().items()
        if name != "interp.cli" and not name.startswith("interp.cli.")
        for target, line in imports
        if target == "interp.cli" or target.startswith("interp.cli.")
    ]
    assert offenders == []


def test_the_checkouts_experiments_import_the_package_and_never_the_reverse():
    """``experiments/`` is read (its modules are in the graph) and imports the package; nothing in
    the package names one of its modules (the command line loads it by its path alone)."""
    direct = direct_imports()
    assert "experiments.catalog.demo" in direct
    assert "interp.experiments" in {t for t, _ in direct["experiments.catalog.demo"]}
    assert stage_of("experiments.catalog.transition_law") == len(STAGES) - 1
    offenders = [
        f"{name}:{line} -> {target}"
        for name, imports in direct.items()
        if not name.startswith("experiments")
        for target, line in imports
        if target == "experiments" or target.startswith("experiments.")
    ]
    assert offenders == []


def test_an_import_of_the_checkouts_experiments_from_the_package_is_found(tmp_path, monkeypatch):
    """Planted: a package module importing a declared experiment, by a statement and by its name
    in a string; both run against the stage order."""
    root = _plant(
        tmp_path,
        monkeypatch,
        {
            "interp/__init__.py": "",
            "interp/viz/__init__.py": "",
            "interp/viz/pages.py": (
                "import importlib\n"
                "from experiments.catalog.demo import EXPERIMENT\n"
                "def f():\n    return importlib.import_module('experiments.common')\n"
            ),
            "experiments/__init__.py": "",
            "experiments/common.py": "",
            "experiments/catalog/__init__.py": "",
            "experiments/catalog/demo.py": "from interp.viz.pages import f\nEXPERIMENT = f\n",
        },
    )
    monkeypatch.setitem(globals(), "PACKAGES", ("interp", "experiments"))
    assert back_imports(root) == [
        "interp.viz.pages:2 -> experiments.catalog.demo (viz -> experiments)",
        "interp.viz.pages:4 -> experiments.common (viz -> experiments)",
    ]
    assert find_cycle(import_graph(root)) is not None


# ---- the checker itself: planted faults are found --------------------------------------------


def test_the_cycle_finder_finds_a_known_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _plant(tmp_path: Path, monkeypatch, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGES", ("interp",))
    return tmp_path


def test_a_package_init_that_imports_its_importer_is_a_cycle(tmp_path, monkeypatch):
    """What nested packages add: ``interp.data.__init__`` importing ``interp.model.b``, which
    imports ``interp.data.a``, runs ``interp.data.__init__`` again half-done."""
    root = _plant(
        tmp_path,
        monkeypatch,
        {
            "interp/__init__.py": "",
            "interp/data/__init__.py": "from interp.model.b import B\n",
            "interp/data/a.py": "A = 1\n",
            "interp/model/__init__.py": "",
            "interp/model/b.py": "from interp.data.a import A\nB = A\n",
        },
    )
    assert find_cycle(import_graph(root)) == ["interp.data", "interp.model.b", "interp.data"]


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path, monkeypatch):
    root = _plant(
        tmp_path,
        monkeypatch,
        {
            "interp/__init__.py": "",
            "interp/viz/__init__.py": "",
            "interp/viz/a.py": "from interp.viz.b import g\n",
            "interp/viz/b.py": (
                "def g():\n    if True:\n        from interp.viz.a import f\n    return f\n"
            ),
        },
    )
    assert find_cycle(import_graph(root)) == ["interp.viz.a", "interp.viz.b", "interp.viz.a"]
    assert back_imports(root) == []  # same stage: only the cycle rule catches it


def test_a_back_import_inside_a_method_is_found_and_type_checking_is_exempt(tmp_path, monkeypatch):
    root = _plant(
        tmp_path,
        monkeypatch,
        {
            "interp/__init__.py": "",
            "interp/train/__init__.py": "",
            "interp/viz/__init__.py": "",
            "interp/viz/plots.py": "def plot(): ...\n",
            "interp/train/loop.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from interp.viz.plots import plot\n"
                "class Loop:\n    def run(self):\n        try:\n"
                "            from interp.viz.plots import plot\n"
                "        except ImportError:\n            pass\n"
            ),
        },
    )
    assert back_imports(root) == ["interp.train.loop:7 -> interp.viz.plots (train -> viz)"]


def test_a_back_import_planted_in_a_copy_of_the_package_fails_the_rule(tmp_path, monkeypatch):
    """The real package, copied, with one import inside a function of the training loop planted:
    the rule that passes on the package fails on the copy, naming the line."""
    for pkg in PACKAGES:
        shutil.copytree(
            ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__", "_notebooks")
        )
    (tmp_path / "docs").mkdir()
    path = tmp_path / "interp" / "train" / "training.py"
    text = path.read_text()
    n = len(text.splitlines())
    path.write_text(
        text + "\n\ndef _planted():\n    from interp.viz.figures import standard_figures\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert back_imports(tmp_path) == [
        f"interp.train.training:{n + 4} -> interp.viz.figures (train -> viz)"
    ]
    # and a function-level import back into training from below it closes a cycle
    task = tmp_path / "interp" / "data" / "task.py"
    task.write_text(task.read_text() + "\ndef _planted():\n    import interp.train.training\n")
    graph = import_graph(tmp_path)
    assert find_cycle(graph) is not None


def test_imports_by_name_in_strings_are_imports(tmp_path, monkeypatch):
    """``importlib.import_module``, ``__import__`` (a literal, or an f-string by its leading
    package), a ``module:attribute`` spec handed to a loader, and a dotted module name in a table
    of lazy imports: each is an import of that module; a logger's name and a plain folder name in
    a path are not."""
    root = _plant(
        tmp_path,
        monkeypatch,
        {
            "interp/__init__.py": "",
            "interp/train/__init__.py": "",
            "interp/viz/__init__.py": "",
            "interp/viz/plots.py": "def plot(): ...\n",
            "interp/train/loop.py": (
                "import importlib\nimport logging\nfrom pathlib import Path\n"
                "log = logging.getLogger('interp.viz.plots')\n"
                "where = Path('x') / 'interp'\n"
                "def a():\n    return importlib.import_module('interp.viz.plots')\n"
                "def b(name):\n    return importlib.import_module(f'interp.viz.{name}')\n"
                "def c():\n    return __import__('interp.viz.plots', fromlist=['plot'])\n"
                "KINDS = {'plot': 'interp.viz.plots:plot'}\n"
                "LAZY = {'plot': 'interp.viz.plots'}\n"
            ),
        },
    )
    assert back_imports(root) == [
        f"interp.train.loop:{line} -> {target} (train -> viz)"
        for line, target in (
            (7, "interp.viz.plots"),
            (9, "interp.viz"),
            (11, "interp.viz.plots"),
            (12, "interp.viz.plots"),
            (13, "interp.viz.plots"),
        )
    ]


def test_each_stage_package_docstring_gives_its_number_in_the_documented_order():
    """``interp/analysis/__init__.py`` opens with "Stage 6, ...", as the table of
    docs/contributing.md numbers it (the command line's docstring is its ``--help`` text)."""
    for number, (name, patterns) in enumerate(STAGES):
        if name == "cli":
            continue
        package = patterns[0].removesuffix(".*")
        init = ROOT / Path(*package.split(".")) / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert doc.startswith(f"Stage {number}, "), f"{init}: {doc[:40]!r} ({name} is {number})"
