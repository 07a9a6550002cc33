"""One mechanism per concern, checked on the source and on hostile files: every torch file is
read by the one loader (:func:`interp.io.checkpoints.load_torch_file`, ``weights_only``), every
file is written by the one atomic writer (:mod:`interp.io.atomic`), and both refuse in one line
naming the file. About 3 s."""

from __future__ import annotations

import ast
import functools
import os
import pickle
import warnings
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.io import atomic, checkpoints
from interp.io.errors import EXIT_UNUSABLE, CheckpointError, UnsafePathError, exit_code

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("interp", "phenomenology", "experiments")
LOADER = "interp/io/checkpoints.py"
WRITER = "interp/io/atomic.py"


@functools.cache
def _sources() -> list[tuple[str, ast.Module, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text()
            found.append((rel, ast.parse(text, filename=rel), text))
    return found


# ---------------------------------------------------------------------------------------------
# The one loader


def test_torch_load_is_called_only_by_the_loader():
    callers = []
    for rel, tree, _ in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "load":
                if isinstance(node.value, ast.Name) and node.value.id == "torch":
                    callers.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "torch":
                if any(a.name == "load" for a in node.names):
                    callers.append(f"{rel}:{node.lineno} (from torch import load)")
    assert callers and all(c.startswith(LOADER + ":") for c in callers), callers


# ---------------------------------------------------------------------------------------------
# The one writer

# Calls that write a file, by name: ``os.replace`` is module ``os``, function ``replace``.
_MODULE_WRITERS = {
    "os": {"replace", "rename", "renames", "link", "symlink", "truncate", "write", "ftruncate"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "move", "copyfileobj"},
    "tempfile": {"NamedTemporaryFile", "TemporaryFile", "mkstemp", "SpooledTemporaryFile"},
    "safetensors.torch": {"save_file"},
    "zipfile": {"ZipFile"},
}
# Methods that write a file whatever their receiver.
_METHOD_WRITERS = {
    "write_text",
    "write_bytes",
    "write_image",
    "write_html",
    "write_json",
    "savefig",
    "touch",
    "symlink_to",
    "hardlink_to",
    "link_to",
}
# Calls that write into their target argument (a path or a file object): in-memory targets
# (``io.BytesIO()``, ``io.StringIO()``) and the writer's own file (the argument of a function
# given to ``write_with_atomic``) are fine.
_TARGET_WRITERS = {
    "torch.save": 1,
    "json.dump": 1,
    "pickle.dump": 1,
    "yaml.dump": 1,
    "yaml.safe_dump": 1,
    "np.save": 0,
    "np.savez": 0,
    "np.savez_compressed": 0,
    "np.savetxt": 0,
    "numpy.save": 0,
    "safetensors.torch.save_file": 1,
}
_FRAME_WRITERS = {
    "to_csv",
    "to_json",
    "to_parquet",
    "to_pickle",
    "to_excel",
    "to_feather",
    "to_hdf",
    "to_html",
    "to_latex",
    "to_markdown",
    "to_xml",
    "to_stata",
}
_MEMORY = {"BytesIO", "StringIO"}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}

# Writes outside the atomic writer, each with its reason.
ALLOWED = {
    # The lock file is updated in place under flock: created with O_NOFOLLOW, refused unless a
    # regular file with one link, its holder's record rewritten (truncate, write) while held.
    ("interp/io/lock.py", "os.open"),
    ("interp/io/lock.py", "os.ftruncate"),
    ("interp/io/lock.py", "os.write"),
}


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _is_memory(node, names: set[str]) -> bool:
    if isinstance(node, ast.Call):
        return (_dotted(node.func) or "").rsplit(".", 1)[-1] in _MEMORY
    return isinstance(node, ast.Name) and node.id in names


def _memory_names(tree) -> set[str]:
    """Names bound to an in-memory buffer anywhere in the module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_memory(node.value, set()):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.withitem) and _is_memory(node.context_expr, set()):
            if isinstance(node.optional_vars, ast.Name):
                names.add(node.optional_vars.id)
    return names


def _writer_given(tree) -> dict[int, set[str]]:
    """``id(call) -> names``: calls inside a function handed to ``write_with_atomic``, and the
    parameter naming the writer's own (temporary, atomic) file."""
    handed, by_name = [], {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            by_name.setdefault(getattr(node, "name", None), node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("write_with_atomic"):
            for arg in node.args[1:2]:
                fn = arg if isinstance(arg, ast.Lambda) else by_name.get(getattr(arg, "id", None))
                if fn is not None:
                    handed.append(fn)
    given: dict[int, set[str]] = {}
    for fn in handed:
        params = {a.arg for a in fn.args.args[:1]}
        for inner in ast.walk(fn):
            if isinstance(inner, ast.Call):
                given[id(inner)] = params
    return given


def _mode_writes(node) -> bool:
    return not isinstance(node, ast.Constant) or any(c in str(node.value) for c in "wax+")


def _writes(call: ast.Call, memory: set[str]) -> str | None:
    """The name of the file-writing function ``call`` is, or None."""
    name = _dotted(call.func) or ""
    module, _, attr = name.rpartition(".")
    if isinstance(call.func, ast.Attribute):
        attr = call.func.attr
    kwargs = {k.arg: k.value for k in call.keywords}
    if attr in _MODULE_WRITERS.get(module, ()):
        if attr == "copyfileobj" and len(call.args) > 1 and _is_memory(call.args[1], memory):
            return None
        if attr == "ZipFile" and not _mode_writes(kwargs.get("mode", ast.Constant("r"))):
            return None if len(call.args) < 2 or not _mode_writes(call.args[1]) else name
        return name
    if module == "os" and attr == "open":
        flags = call.args[1] if len(call.args) > 1 else kwargs.get("flags")
        used = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)} if flags else set()
        return name if used & _WRITE_FLAGS else None
    if name in ("open", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open"):
        mode = call.args[1] if len(call.args) > 1 else kwargs.get("mode")
        return name if mode is not None and _mode_writes(mode) else None
    if isinstance(call.func, ast.Attribute) and attr == "open":  # Path.open(mode)
        mode = call.args[0] if call.args else kwargs.get("mode")
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            return f".{attr}" if _mode_writes(mode) else None
        return None
    if attr in _METHOD_WRITERS:
        targets = [*call.args, *kwargs.values()]
        return None if any(_is_memory(t, memory) for t in targets) else f".{attr}"
    if name in _TARGET_WRITERS:
        i = _TARGET_WRITERS[name]
        target = call.args[i] if len(call.args) > i else next(iter(kwargs.values()), None)
        return None if target is None or _is_memory(target, memory) else name
    if isinstance(call.func, ast.Attribute) and attr in _FRAME_WRITERS:
        target = call.args[0] if call.args else kwargs.get("path_or_buf", kwargs.get("buf"))
        return None if target is None or _is_memory(target, memory) else f".{attr}"
    if isinstance(call.func, ast.Attribute) and attr in ("rename", "replace"):  # Path's
        if module in ("dataclasses", "str") or isinstance(call.func.value, ast.Constant):
            return None
        if len(call.args) == 1 and not call.keywords:
            return f".{attr}"
    return None


def _bypasses() -> list[str]:
    found = []
    for rel, tree, _ in _sources():
        if rel == WRITER:
            continue
        memory, given = _memory_names(tree), _writer_given(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _writes(node, memory | given.get(id(node), set()))
            if name is not None and (rel, name) not in ALLOWED:
                found.append(f"{rel}:{node.lineno} {name}")
    return found


# Each kind of write the scan must see, and reads and in-memory writes it must pass.
_SEEN = (
    'open(p, "w").write("x")',
    'Path(p).write_text("x")',
    "p.write_bytes(b'x')",
    "torch.save(state, path)",
    "df.to_csv(path, index=False)",
    "json.dump(obj, f)",
    "fig.write_image(path)",
    "fig.write_html(str(path))",
    "shutil.copy(a, b)",
    "os.replace(tmp, dst)",
    "os.open(p, os.O_WRONLY | os.O_CREAT)",
    'p.open("a")',
    "tmp.rename(dst)",
)
_PASSED = (
    "buf = io.BytesIO()\ntorch.save(state, buf)",
    "buf = io.StringIO()\ndf.to_csv(buf, index=False)",
    "text = df.to_csv(index=False)",
    "write_with_atomic(path, lambda f: torch.save(state, f))",
    'open(p).read()\np.open("rb")',
    "dataclasses.replace(cfg, seed=1)\ns.replace('a', 'b')\ndf.rename(columns=names)",
    "os.open(p, os.O_RDONLY | os.O_NOFOLLOW)",
)


def _scan(source: str) -> list[str | None]:
    tree = ast.parse(source)
    memory, given = _memory_names(tree), _writer_given(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return [_writes(c, memory | given.get(id(c), set())) for c in calls]


def test_every_file_is_written_by_the_atomic_writer():
    for source in _SEEN:  # the scan is not blind
        assert any(_scan(source)), source
    for source in _PASSED:
        assert not any(_scan(source)), source
    assert _bypasses() == []


# ---------------------------------------------------------------------------------------------
# Hostile files


class _Payload:
    """Unpickled by a loader that runs pickles, it creates ``marker`` (a folder)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _crafted(path: Path, marker: Path) -> Path:
    """A ``resume.pt`` of the right keys whose pickle would create ``marker``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: 0 for k in ("optimizer", "stream", "step", "loss_sum", "loss_count", "rows")}
    state.update(model={}, last_eval=_Payload(marker))
    with path.open("wb") as f:
        torch.save(state, f, pickle_module=pickle)
    return path


def _one_line(capsys) -> str:
    """The one ``error:`` line of a failed command (progress lines aside)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_loader_refuses_a_pickle_that_runs_code_naming_the_file(tmp_path):
    marker = tmp_path / "owned"
    path = _crafted(tmp_path / "resume.pt", marker)
    with pytest.raises(CheckpointError) as err:
        checkpoints.load_torch_file(path, what="resume state")
    line = str(err.value)
    assert "\n" not in line and str(path) in line and line.startswith("refusing to load")
    assert exit_code(err.value) == EXIT_UNUSABLE and not marker.exists()
    torch.load(path, weights_only=False)  # the file is hostile: run, its pickle makes the marker
    assert marker.exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "the file is missing"),
        (b"", "truncated or corrupted"),
        (b"PK\x03\x04 cut", "truncated or corrupted"),
        (b"not a checkpoint", "cannot read resume state .* truncated or corrupted"),
        ([1, 2], "holds a list, not a dict"),
        ({"optimizer": None}, "lacks the key 'model'"),
    ],
)
def test_the_loader_names_the_file_on_each_failure(tmp_path, content, said):
    path = tmp_path / "resume.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=said) as err:
        checkpoints.load_torch_file(path, what="resume state", required=("model", "optimizer"))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_loader_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "resume.pt")
    with pytest.raises(CheckpointError, match="not a regular file"):
        checkpoints.load_torch_file(tmp_path / "resume.pt")


def _token_run(run_dir: Path, **kw):
    from interp.data.cope_tasks import FlipFlop
    from interp.model.token_net import token_model_config
    from interp.train.token_runs import train_token_run

    task = FlipFlop(n_instr=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_token_run(
            task,
            token_model_config(task, "cope"),
            run_dir,
            steps=20,
            eval_every=10,
            n_test=16,
            batch_size=16,
            **kw,
        )


def test_a_token_run_refuses_a_crafted_resume_state_before_writing(tmp_path):
    marker = tmp_path / "owned"
    resume = _crafted(tmp_path / "run" / "resume.pt", marker)
    with pytest.raises(CheckpointError, match="refusing to load resume state") as err:
        _token_run(tmp_path / "run")
    assert str(resume) in str(err.value) and not marker.exists()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["resume.pt"]


def test_a_token_resume_state_without_its_weights_is_one_line(tmp_path):
    _token_run(tmp_path / "run", stop_after=10)
    resume = tmp_path / "run" / "resume.pt"
    state = torch.load(resume, weights_only=True)
    del state["model"]
    torch.save(state, resume)
    with pytest.raises(CheckpointError, match="lacks the key 'model'") as err:
        _token_run(tmp_path / "run")
    assert str(resume) in str(err.value) and exit_code(err.value) == EXIT_UNUSABLE


def test_a_token_run_folder_that_is_a_link_is_refused_below_its_root(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "run").symlink_to(target)
    with pytest.raises(UnsafePathError, match="run is a symbolic link"):
        _token_run(tmp_path / "grid" / "run", root=tmp_path / "grid")
    assert list(target.iterdir()) == []


def _cope_runs(runs: Path) -> list[Path]:
    from experiments.catalog.cope_tasks import GRIDS
    from interp.experiments.token_grid import run_name

    return [runs / "cope-tasks" / "quick" / run_name(*job) for job in GRIDS["quick"].jobs()]


@pytest.mark.parametrize("crafted", [True, False], ids=["pickle-runs-code", "without-model"])
def test_reproduce_cope_tasks_refuses_a_hostile_resume_state(tmp_path, capsys, crafted):
    marker = tmp_path / "owned"
    last = _cope_runs(tmp_path / "runs")[-1]  # the last run to train: refused before the first
    resume = _crafted(last / "resume.pt", marker)
    if not crafted:
        torch.save({"optimizer": None, "step": 10}, resume)
    argv = ["reproduce", "cope-tasks", "--runs", str(tmp_path / "runs")]
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-figures"]) == 3
    line = _one_line(capsys)
    said = f"refusing to load resume state {resume}" if crafted else "lacks the key 'model'"
    assert line.startswith("error: ") and str(resume) in line and said in line
    assert not marker.exists() and not (tmp_path / "out").exists()
    assert [p.name for p in last.parent.iterdir()] == [last.name]
    assert [p.name for p in last.iterdir()] == ["resume.pt"]


def test_reproduce_cope_tasks_refuses_a_run_folder_that_is_a_link(tmp_path, capsys):
    target = tmp_path / "elsewhere"
    target.mkdir()
    folders = _cope_runs(tmp_path / "runs")
    folders[-1].parent.mkdir(parents=True)
    folders[-1].symlink_to(target)
    argv = ["reproduce", "cope-tasks", "--runs", str(tmp_path / "runs")]
    assert main([*argv, "--out", str(tmp_path / "out"), "--no-figures"]) == 3
    line = _one_line(capsys)
    assert f"{folders[-1]} is a symbolic link" in line
    assert list(target.iterdir()) == [] and not (tmp_path / "out").exists()
    assert sorted(p.name for p in folders[-1].parent.iterdir()) == [folders[-1].name]


def test_notebooks_refuses_a_dangling_link_named_like_a_notebook(tmp_path, capsys):
    from interp.cli.commands.notebooks import notebook_files

    name = notebook_files()[0].name
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / name).symlink_to(tmp_path / "created-elsewhere.py")
    assert main(["notebooks", str(tmp_path / "nb")]) == 3
    line = _one_line(capsys)
    assert str(tmp_path / "nb" / name) in line and "symbolic link" in line
    assert not (tmp_path / "created-elsewhere.py").exists()
    assert [p.name for p in (tmp_path / "nb").iterdir()] == [name]


def test_notebooks_refuses_a_dangling_link_as_its_folder(tmp_path, capsys):
    (tmp_path / "nb").symlink_to(tmp_path / "elsewhere")
    assert main(["notebooks", str(tmp_path / "nb")]) == 3
    assert "dangling symbolic link" in _one_line(capsys)
    assert not (tmp_path / "elsewhere").exists()


def test_the_writer_refuses_links_and_hard_links_naming_the_file(tmp_path):
    (tmp_path / "victim").write_text("keep")
    os.link(tmp_path / "victim", tmp_path / "hard.json")
    with pytest.raises(UnsafePathError, match=r"hard\.json has 2 hard links"):
        atomic.write_text_atomic(tmp_path / "hard.json", "x")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "created")
    with pytest.raises(UnsafePathError, match=r"dangling\.json is a symbolic link"):
        atomic.write_text_atomic(tmp_path / "dangling.json", "x")
    assert (tmp_path / "victim").read_text() == "keep" and not (tmp_path / "created").exists()
