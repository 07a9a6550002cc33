"""Every notebook in notebooks/ runs top to bottom on small settings (INDUCTION_CLIFF_SMALL=1).

Notebooks are jupytext ``py:percent`` files; each is converted and executed with nbclient in a
kernel that runs this interpreter (a kernelspec written to a temporary JUPYTER_PATH, so a fresh
virtualenv needs no ``ipykernel install``). The notebooks share one runs folder, so a run trained
by one is reused by the next; each still runs on its own.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))

# Modules the notebooks import; a notebook is skipped (not failed) while one is not written yet.
NEEDS = {
    "01_attention_maps.py": ["interp.training", "interp.presets", "interp.transition"],
    "02_training_dynamics.py": ["interp.training", "interp.presets", "interp.transition"],
    "03_fit_minimal_model.py": ["interp.training", "interp.presets", "phenomenology.fit"],
    "04_paper_figures.py": ["interp.training", "interp.presets", "phenomenology.landscape"],
    "05_positional_encodings.py": ["interp.length", "interp.cope_tasks"],
}
TOOLS = ["jupytext", "nbclient", "ipykernel"]
KERNEL = "induction-cliff-test"
CELL_TIMEOUT_S = 600


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
    assert [p.name for p in NOTEBOOKS] == sorted(NEEDS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, runs_dir, jupyter_path, monkeypatch):
    missing = _missing(TOOLS)
    if missing:
        pytest.skip(f"notebook tools not installed: {missing} (pip install -e '.[dev]')")
    missing = _missing(NEEDS.get(path.name, []))
    if missing:
        pytest.skip(f"{path.name} needs {missing}, which is not written yet")
    import jupytext
    import nbclient

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
