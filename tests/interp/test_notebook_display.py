"""interp.viz.notebook: interactive figures with a PNG beside them, and the fallback without
Chromium."""

import logging

import plotly.io as pio
import pytest

import interp.viz.export
from interp.viz.notebook import STATIC_RENDERER, show_static_images


@pytest.fixture(autouse=True)
def keep_renderer(monkeypatch):
    """Each test changes plotly's default renderer; put the original back afterwards."""
    monkeypatch.setattr(pio.renderers, "default", pio.renderers.default)


def test_without_chromium_figures_stay_interactive_and_one_line_says_why(monkeypatch, caplog):
    monkeypatch.setattr(interp.viz.export, "find_chromium", lambda: None)
    with caplog.at_level(logging.WARNING, logger="interp.viz.notebook"):
        assert show_static_images() == "plotly_mimetype"
    assert pio.renderers.default == "plotly_mimetype"
    (record,) = caplog.records
    assert "apt-get install -y chromium" in record.getMessage()
    with pytest.raises(RuntimeError, match="chromium"):
        show_static_images(enabled=True)


def test_with_chromium_each_figure_gets_a_png(monkeypatch):
    monkeypatch.setattr(interp.viz.export, "find_chromium", lambda: "/usr/bin/chromium")
    assert show_static_images() == f"plotly_mimetype+{STATIC_RENDERER}"
    assert show_static_images(enabled=False) == "plotly_mimetype"
