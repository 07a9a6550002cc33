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
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))

EXPECTED = [
    "01_attention_maps.py",
    "02_training_dynamics.py",
    "03_fit_minimal_model.py",
    "04_paper_figures.py",
    "05_positional_encodings.py",
]
TOOLS = ["jupytext", "nbclient", "ipykernel"]
KERNEL = "induction-cliff-test"
CELL_TIMEOUT_S = 600
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


def _progress_outputs(notebook) -> list[str]:
    found = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            if isinstance(text, list):
                text = "".join(text)
            if PROGRESS_TEXT.search(text) or WIDGET_MIME in out.get("data", {}):
                found.append(text[:80] or WIDGET_MIME)
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
    assert _progress_outputs(nb) == [WIDGET_MIME]
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
