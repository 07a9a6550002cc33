"""The attention explorer as a researcher meets it: notebook 01 opened in a real JupyterLab.

A JupyterLab server on a free local port (with a token, its settings and workspaces in a
temporary folder) serves a copy of notebook 01; Debian's chromium, driven by Playwright, opens it
through the UI, runs every cell from the Run menu, then moves the explorer's step slider to a
named checkpoint and changes the layer, the sequence and the evaluation set. After each change the
heatmap drawn inside the widget must show that choice: its title, and the pattern values read
from the page's plotly graph (``gd.data[0].z``) against the pattern recomputed from that step's
checkpoint. Nothing may be printed into the cell: its only output stays the widget.

Set ``EXPLORER_SCREENSHOTS=DIR`` to keep screenshots of the explorer after each change.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from interp.analysis.transition import detect_run_transition
from interp.io.rundir import load_run
from interp.viz.figures import select_checkpoints
from tests.interp.test_report import _lower, stored_patterns
from tests.interp.test_report_browser import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_attention_maps.py"
TOKEN = "induction-cliff-test-token"
ATOL = 6e-4  # the explorer rounds weights to 3 decimals
START_TIMEOUT_S = 60
RUN_TIMEOUT_MS = 300_000  # every cell of the notebook, its tiny run already trained
REDRAW_TIMEOUT_MS = 20_000

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium not found (scripts/setup.sh installs it)"
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("jupyterlab") is None
        or importlib.util.find_spec("jupytext") is None,
        reason="jupyterlab and jupytext not installed (pip install -e '.[notebook]')",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(port: int, server: subprocess.Popen, log: Path) -> None:
    url = f"http://127.0.0.1:{port}/api/status?token={TOKEN}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer in {START_TIMEOUT_S} s:\n{log.read_text()}")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A JupyterLab serving a copy of notebook 01 (as .ipynb) from ``tmp_path / "lab"``, whose
    kernels run the tiny setting with their runs under ``tmp_path / "runs"``."""
    import jupytext

    root, runs = tmp_path / "lab", tmp_path / "runs"
    root.mkdir()
    jupytext.write(jupytext.read(NOTEBOOK), root / "01_attention_maps.ipynb")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "INDUCTION_CLIFF_SMALL": "1",
        "INDUCTION_CLIFF_RUNS": str(runs),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        # the user's own Jupyter settings, workspaces and runtime files stay out of it
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    # no news or update pop-up over the notebook
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    port = _free_port()
    log = tmp_path / "jupyterlab.log"
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        # train the notebook's run here while the server starts: the notebook then reuses it
        for name, value in env.items():
            if name.startswith("INDUCTION_CLIFF_"):
                monkeypatch.setenv(name, value)
        from interp.experiments.notebook_setting import notebook_setting

        run_dir = notebook_setting().ensure_run(seed=0)
        _wait_for_server(port, server, log)
        yield f"http://127.0.0.1:{port}/lab/tree/01_attention_maps.ipynb?token={TOKEN}", run_dir
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def _heatmap(explorer) -> dict:
    return explorer.locator(".widget-output .js-plotly-plot").first.evaluate(
        "gd => ({title: gd.layout.title.text, z: gd.data[0].z})"
    )


def _wait_for_title(page, explorer, text: str) -> float:
    """Seconds until the widget's heatmap title contains ``text``."""
    start = time.monotonic()
    handle = explorer.element_handle()
    page.wait_for_function(
        """([root, text]) => {
             const gd = root.querySelector('.widget-output .js-plotly-plot');
             return gd !== null && gd.layout && gd.layout.title.text.includes(text);
           }""",
        arg=[handle, text],
        timeout=REDRAW_TIMEOUT_MS,
    )
    return time.monotonic() - start


def test_the_explorer_redraws_in_place_in_jupyterlab(lab):
    url, run_dir = lab
    run = load_run(run_dir)
    steps = select_checkpoints(run.checkpoint_steps, 8, detect_run_transition(run.metrics))
    named = steps[2]  # Home, then two steps right
    shots = os.environ.get("EXPLORER_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    seconds = {}
    start = time.monotonic()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url)
            # the kernel starts from the notebook's own header: no "Select Kernel" dialog
            page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
            assert page.locator(".jp-Dialog").count() == 0
            seconds["JupyterLab open, kernel idle"] = time.monotonic() - start
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            # the last cell's table (ablation) says every cell ran
            ablation = page.locator(".jp-OutputArea-output", has_text="layer 2 head ablated")
            ablation.wait_for(timeout=RUN_TIMEOUT_MS)
            seconds["run all cells"] = time.monotonic() - start - sum(seconds.values())
            assert page.locator(".jp-OutputArea-output[data-mime-type*='error']").count() == 0
            cell = page.locator(".jp-CodeCell", has_text="AttentionExplorer(run, ").last
            cell.scroll_into_view_if_needed()
            explorer = cell.locator(".widget-vbox").first
            last = steps[-1]
            seconds["first draw"] = _wait_for_title(page, explorer, f"layer 1, step {last},")

            def shot(name: str) -> None:
                if shots:
                    explorer.screenshot(path=str(Path(shots) / f"{name}.png"))

            def check(step: int, layer: int, set_name: str, sequence: int) -> None:
                got = _heatmap(explorer)
                stored = stored_patterns(run, [step], set_name, sequence)[step][layer]
                expected = stored[np.tril_indices(len(stored))]
                np.testing.assert_allclose(_lower(got["z"]), expected, atol=ATOL)
                # the cell shows the widget and nothing printed beside it
                assert cell.locator(".jp-Cell-outputArea > .jp-OutputArea-child").count() == 1
                assert cell.locator(".js-plotly-plot").count() == 2  # heatmap and measures

            shot("1-last-step")
            check(last, 0, "ic", 0)
            handle = explorer.locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("Home")
            seconds["slider Home"] = _wait_for_title(page, explorer, f"step {steps[0]},")
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            seconds["slider to named step"] = _wait_for_title(page, explorer, f"step {named},")
            assert explorer.locator(".widget-readout").first.inner_text() == str(named)
            shot("2-named-step")
            check(named, 0, "ic", 0)
            explorer.get_by_role("button", name="layer 2").click()
            seconds["layer 2"] = _wait_for_title(page, explorer, f"layer 2, step {named},")
            check(named, 1, "ic", 0)
            sequence = explorer.locator(".widget-dropdown", has_text="sequence").locator("select")
            sequence.select_option(label="sequence 2")
            seconds["sequence 2"] = _wait_for_title(page, explorer, "IC sequence 2")
            shot("3-layer2-sequence2")
            check(named, 1, "ic", 1)
            eval_set = explorer.locator(".widget-dropdown", has_text="set").first.locator("select")
            eval_set.select_option(label="IW set")
            seconds["IW set"] = _wait_for_title(page, explorer, "IW sequence 1")
            shot("4-iw")
            check(named, 1, "iw", 0)
        finally:
            browser.close()
    print("seconds:", {k: round(v, 2) for k, v in seconds.items()})
