"""``bash scripts/notebooks.sh``: JupyterLab as the script starts it reads the notebooks' jupytext
configuration, so that saving a notebook (what autosave does a couple of minutes after it is
opened) changes no tracked file.

The script runs on a copy of the checkout's layout (``scripts/``, ``notebooks/``, a
``jupytext.toml`` at the top if there is one) with a ``.venv`` whose ``jupyter`` is this
interpreter's; the save goes through the Contents API of the server it started, as JupyterLab's
own save does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "induction-cliff-test"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jupyterlab") is None
    or importlib.util.find_spec("jupytext") is None
    or shutil.which("bash") is None,
    reason="jupyterlab and jupytext not installed (pip install -e '.[notebook]')",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _checkout(tmp_path: Path) -> Path:
    """The files of the checkout the script reads, and a .venv whose jupyter is this Python's."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "notebooks.sh", repo / "scripts" / "notebooks.sh")
    shutil.copytree(
        ROOT / "notebooks",
        repo / "notebooks",
        ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__"),
    )
    if (ROOT / "jupytext.toml").exists():
        shutil.copy(ROOT / "jupytext.toml", repo / "jupytext.toml")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, module in (("jupyter", "jupyter"), ("jupyter-lab", "jupyterlab")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        shim.chmod(0o755)
    return repo


def _api(port: int, path: str, model: dict | None = None) -> dict:
    url = f"http://127.0.0.1:{port}/api/contents/{path}?token={TOKEN}"
    if model is None:
        request = urllib.request.Request(url + "&type=notebook&content=1")
    else:
        request = urllib.request.Request(
            url,
            data=json.dumps(model).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _wait_for_server(port: int, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=2
            ) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"JupyterLab did not answer in {HANG_S:.0f} s:\n{log.read_text()}")


def test_saving_a_notebook_in_the_scripts_jupyterlab_changes_no_tracked_file(tmp_path):
    repo = _checkout(tmp_path)
    scripts = sorted((repo / "notebooks").glob("[0-9][0-9]_*.py"))
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".venv" not in p.parts}
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)},
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        # the user's own Jupyter and jupytext settings stay out of it
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
    }
    port = _free_port()
    log = tmp_path / "jupyterlab.log"
    argv = ["bash", str(repo / "scripts" / "notebooks.sh"), "--no-browser", f"--port={port}"]
    argv += ["--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    with log.open("w") as out:
        server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_server(port, server, log)
        for script in scripts:
            model = _api(port, script.name)
            nb = model["content"]
            # what a kernel leaves in a notebook that ran, then JupyterLab's save (autosave)
            nb["metadata"]["kernelspec"] = {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            }
            nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2"}
            code = next(c for c in nb["cells"] if c["cell_type"] == "code")
            code["execution_count"] = 1
            code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran\n"}]
            _api(port, script.name, {"type": "notebook", "format": "json", "content": nb})
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    changed = [str(p.relative_to(repo)) for p, data in before.items() if p.read_bytes() != data]
    assert changed == [], f"saving rewrote tracked files:\n{log.read_text()[-2000:]}"
    # the outputs went to the paired notebook beside each script (git-ignored)
    assert all(p.with_suffix(".ipynb").is_file() for p in scripts)
