"""Every notebook in notebooks/ runs top to bottom on small settings (INDUCTION_CLIFF_SMALL=1).

Notebooks are jupytext ``py:percent`` files; each is converted and executed with nbclient in a
kernel that runs this interpreter (a kernelspec written to a temporary JUPYTER_PATH, so a fresh
virtualenv needs no ``ipykernel install``). The notebooks share one runs folder, so a run trained
by one is reused by the next; each still runs on its own.

An executed notebook must read well when saved: no progress-bar output, under 1 MB, and a static
PNG beside every interactive plotly figure (when Chromium is there to draw it).
"""

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))

EXPECTED = [
    "01_attention_maps.py",
    "02_training_dynamics.py",
    "03_fit_minimal_model.py",
    "04_paper_figures.py",
    "05_positional_encodings.py",
]
TOOLS = ["jupytext", "nbclient", "ipykernel", "ipywidgets"]  # ipywidgets: the explorer (01)
KERNEL = "induction-cliff-test"
CELL_TIMEOUT_S = HANG_S  # bounds a hung cell only
MAX_NOTEBOOK_BYTES = 1_000_000
PLOTLY_MIME = "application/vnd.plotly.v1+json"
# What a progress bar leaves in a notebook: tqdm's "37%|###  | 37/100 [00:01<00:02, 30.1it/s]"
# as text (carriage returns between updates), or a tqdm.notebook widget.
PROGRESS_TEXT = re.compile(r"\d+%\||\d+(\.\d+)?\s*(it|s)/(s|it)\]|\r")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _missing(modules: list[str]) -> list[str]:
    missing = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except ModuleNotFoundError:
            missing.append(name)
    return missing


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("notebook_runs")


@pytest.fixture(scope="module")
def jupyter_path(tmp_path_factory) -> Path:
    """A kernelspec that starts this interpreter's ipykernel."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "induction-cliff tests", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return root


def test_every_notebook_is_listed():
    assert [p.name for p in NOTEBOOKS] == EXPECTED


WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"


def _is_progress_widget(notebook, model_id: str) -> bool:
    """Whether the widget ``model_id`` is (or holds) a progress bar, from the widget state that
    nbclient saves in the notebook; a widget whose state is not there counts as one."""
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    seen, todo = set(), [model_id]
    while todo:
        mid = todo.pop()
        if mid in seen:
            continue
        seen.add(mid)
        if mid not in state:
            return True
        model = state[mid]
        if model.get("model_name", "").endswith("ProgressModel"):
            return True
        children = model.get("state", {}).get("children", [])
        todo += [c.removeprefix("IPY_MODEL_") for c in children if isinstance(c, str)]
    return False


def _progress_outputs(notebook) -> list[str]:
    found = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            if isinstance(text, list):
                text = "".join(text)
            widget = out.get("data", {}).get(WIDGET_MIME)
            if widget is not None and _is_progress_widget(notebook, widget.get("model_id", "")):
                found.append(WIDGET_MIME)
            elif PROGRESS_TEXT.search(text):
                found.append(text[:80])
    return found


def test_progress_check_catches_tqdm_output():
    """The check below would see a progress bar, as text or as a widget."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    bar = " 37%|###7      | 37/100 [00:01<00:02, 30.10it/s]"
    nb.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", text=bar)])]
    assert len(_progress_outputs(nb)) == 1
    widget = nbformat.v4.new_output("display_data", data={WIDGET_MIME: {"model_id": "x"}})
    nb.cells = [nbformat.v4.new_code_cell(outputs=[widget])]
    assert _progress_outputs(nb) == [WIDGET_MIME]  # no saved state: counted as a progress bar
    # tqdm.notebook's bar: an HBox holding a FloatProgress; the explorer's VBox of controls is not
    state = {
        "x": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_p", "IPY_MODEL_t"]}},
        "p": {"model_name": "FloatProgressModel", "state": {}},
        "t": {"model_name": "HTMLModel", "state": {}},
        "e": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_o"]}},
        "s": {"model_name": "SelectionSliderModel", "state": {}},
        "o": {"model_name": "OutputModel", "state": {}},
    }
    nb.metadata["widgets"] = {WIDGET_STATE_MIME: {"state": state}}
    assert _progress_outputs(nb) == [WIDGET_MIME]
    explorer = nbformat.v4.new_output("display_data", data={WIDGET_MIME: {"model_id": "e"}})
    nb.cells = [nbformat.v4.new_code_cell(outputs=[explorer])]
    assert _progress_outputs(nb) == []
    plain = nbformat.v4.new_output("stream", text="transition step: 2502.0\nIC acc 0.98 at 3500\n")
    nb.cells = [nbformat.v4.new_code_cell(outputs=[plain])]
    assert _progress_outputs(nb) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, runs_dir, jupyter_path, monkeypatch):
    missing = _missing(TOOLS)
    if missing:
        pytest.skip(f"notebook tools not installed: {missing} (pip install -e '.[dev]')")
    import jupytext
    import nbclient
    import nbformat

    from interp.viz.export import find_chromium

    notebook = jupytext.read(path)
    monkeypatch.setenv("INDUCTION_CLIFF_SMALL", "1")
    monkeypatch.setenv("INDUCTION_CLIFF_RUNS", str(runs_dir))
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    # the kernel imports the package from this checkout even when it is not pip-installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(runs_dir)}},
    )
    client.execute()
    errors = [
        out
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
    assert _progress_outputs(notebook) == []
    if path.name == "03_fit_minimal_model.py":  # the fit goes beside the notebook runs
        assert (runs_dir / "fits" / "tiny-seed0.json").is_file()
    size = len(nbformat.writes(notebook).encode())
    assert size < MAX_NOTEBOOK_BYTES, f"{path.name} executed is {size} bytes"
    figures = [
        out.get("data", {})
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if PLOTLY_MIME in out.get("data", {})
    ]
    if find_chromium() is not None:
        assert all("image/png" in data for data in figures), "an interactive plot has no PNG"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saving_a_notebook_changes_its_script_only_where_cells_changed(path, tmp_path):
    """Open and save in JupyterLab (jupytext's contents manager with the repository's
    notebooks/jupytext.toml), after a kernel ran it: the tracked script is unchanged; edit a
    cell: only that cell's lines change."""
    pytest.importorskip("jupytext")
    manager = pytest.importorskip("jupytext.sync_contentsmanager")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "jupytext.toml", tmp_path / "notebooks" / "jupytext.toml")
    script = tmp_path / "notebooks" / path.name
    shutil.copy(path, script)
    original = script.read_text()
    cm = manager.TextFileContentsManager(root_dir=str(tmp_path))
    name = f"notebooks/{path.name}"
    model = cm.get(name)
    nb = model["content"]
    # what a JupyterLab kernel leaves in a notebook
    nb["metadata"]["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["execution_count"] = 1
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
    cm.save(model, name)
    assert script.read_text() == original
    assert (tmp_path / "notebooks" / f"{path.stem}.ipynb").is_file()  # outputs live in the pair
    model = cm.get(name)
    code = next(c for c in model["content"]["cells"] if c["cell_type"] == "code")
    code["source"] += "\nedited = True"
    cm.save(model, name)
    added = set(script.read_text().splitlines()) - set(original.splitlines())
    assert added == {"edited = True"}
