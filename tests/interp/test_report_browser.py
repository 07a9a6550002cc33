"""The report in a real browser: Playwright for Python driving Debian's chromium.

Playwright's own browser download is not reachable here, so the system chromium (installed by
scripts/setup.sh) is launched by path. The page must load with every network request refused,
log no console error, render every plot, and the explorer's step slider must change the heatmap.
"""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import sync_playwright

from interp.io.rundir import load_run
from interp.viz.explorer import ExplorerConfig
from interp.viz.report import ReportConfig, write_report
from tests.interp.test_report import _lower, stored_patterns
from tests.interp.tiny_runs import tiny_run


def _chromium() -> str | None:
    path = os.environ.get("BROWSER_PATH") or shutil.which("chromium")
    if path is None and Path("/usr/bin/chromium").exists():
        path = "/usr/bin/chromium"
    return path


CHROMIUM = _chromium()

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium not found (scripts/setup.sh installs it: apt-get install -y chromium)",
)


def _z(page) -> list:
    return page.evaluate("document.querySelector('.ex-heatmap').data[0].z")


def test_report_loads_offline_renders_every_plot_and_the_slider_moves_the_heatmap(tmp_path):
    run_dir = tiny_run(tmp_path / "tiny", steps=30)
    page_path = write_report(
        [run_dir],
        tmp_path / "report.html",
        ReportConfig(fit=False, explorer=ExplorerConfig(n_sequences=2)),
    )
    # what each step's heatmap must show: that checkpoint's pattern (IC sequence 1)
    stored = stored_patterns(load_run(run_dir), (0, 10, 30))
    tril = np.tril_indices(len(stored[0][0]))
    errors, requests = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            def offline(route):
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    requests.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("document.querySelector('.ex-heatmap .main-svg') !== null")

            rendered = page.eval_on_selector_all(
                ".plotly-graph-div, .report-plot",
                "els => els.map(e => e.querySelector('.main-svg') !== null)",
            )
            # training dynamics, progress measures, the explorer's heatmap and measures
            assert len(rendered) == 4 and all(rendered)
            ticks = page.evaluate("document.querySelector('.ex-heatmap').data[0].x")
            assert ticks[0].startswith("x1 ") and ticks[1].startswith("l1 y")
            assert ticks[-1].startswith("q ")

            # the slider starts at the last checkpoint (step 30); Home moves it to step 0
            assert page.inner_text(".ex-step-value") == "30"
            before = _z(page)
            page.focus(".ex-step")
            page.keyboard.press("Home")
            page.wait_for_function("document.querySelector('.ex-step-value').textContent === '0'")
            after = _z(page)
            assert after != before
            np.testing.assert_allclose(_lower(before), stored[30][0][tril], atol=6e-4)
            np.testing.assert_allclose(_lower(after), stored[0][0][tril], atol=6e-4)
            cursor = page.evaluate("document.querySelector('.ex-measures').layout.shapes[0].x0")
            assert cursor == 0
            page.keyboard.press("ArrowRight")  # one checkpoint on: step 10
            page.wait_for_function("document.querySelector('.ex-step-value').textContent === '10'")
            assert _z(page) not in (before, after)
            np.testing.assert_allclose(_lower(_z(page)), stored[10][0][tril], atol=6e-4)

            page.select_option(".ex-layer", "1")
            assert "layer 2, step 10" in page.evaluate(
                "document.querySelector('.ex-heatmap').layout.title.text"
            )
            np.testing.assert_allclose(_lower(_z(page)), stored[10][1][tril], atol=6e-4)

            # the second IC sequence, then the IW set (the sequence picked stays), step 10, layer 2
            page.select_option(".ex-seq", "1")
            assert page.evaluate(
                "document.querySelector('.ex-heatmap').layout.title.text"
            ).endswith("layer 2, step 10, IC sequence 2")
            second = stored_patterns(load_run(run_dir), (10,), "ic", 1)[10][1]
            np.testing.assert_allclose(_lower(_z(page)), second[tril], atol=6e-4)
            page.select_option(".ex-set", "iw")
            assert page.evaluate(
                "document.querySelector('.ex-heatmap').layout.title.text"
            ).endswith("layer 2, step 10, IW sequence 2")
            iw = stored_patterns(load_run(run_dir), (10,), "iw", 1)[10][1]
            np.testing.assert_allclose(_lower(_z(page)), iw[tril], atol=6e-4)
        finally:
            browser.close()
    assert errors == []
    assert requests == []  # the page asked for nothing outside the file


def test_a_run_named_like_markup_renders_every_plot_and_shows_its_name_as_text(tmp_path):
    # a legal directory name that, unescaped inside the explorer's <script> data, would keep the
    # element open past its </script> and swallow the script that draws the explorer
    name = "x<!--<script>y<br>z"  # <br> is plotly's line break: a title shows it as text
    run_dir = tiny_run(tmp_path / name, steps=20)
    page_path = write_report(
        [run_dir],
        tmp_path / "report.html",
        ReportConfig(fit=False, explorer=ExplorerConfig(n_sequences=1)),
    )
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.resolve().as_uri())
            page.wait_for_load_state("load")
            rendered = page.eval_on_selector_all(
                ".plotly-graph-div, .report-plot",
                "els => els.map(e => e.querySelector('.main-svg') !== null)",
            )
            # training dynamics, progress measures, the explorer's heatmap and measures
            assert rendered == [True] * 4
            assert page.inner_text("h1") == f"induction-cliff report: {name}"
            assert page.title() == f"induction-cliff report: {name}"
            data = page.evaluate(
                "JSON.parse(document.querySelector('script.ex-data').textContent).run"
            )
            assert data == name
            heat_title = page.evaluate("document.querySelector('.ex-heatmap .gtitle').textContent")
            assert heat_title == f"{name}: layer 1, step 20, IC sequence 1"
        finally:
            browser.close()
    assert errors == []
