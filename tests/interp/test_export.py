"""Export: valid PDF/PNG/SVG files, self-contained HTML, a CSV that matches the traces, paper
style, and a clear error without Chromium."""

import struct
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from interp.viz import export, plots

needs_chromium = pytest.mark.skipif(
    export.find_chromium() is None,
    reason="no Chromium for static export (apt-get install -y chromium)",
)


def scatter_fig() -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 100, 200], y=[0.1, 0.5, 0.9], name="IC"))
    fig.add_trace(go.Scatter(x=[0, 100], y=[0.3, 0.2], name="IW"))
    fig.update_layout(title="test figure", width=600, height=400)
    return fig


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_figure_data_is_tidy_and_matches_traces():
    """A row per x value, a column per trace named by its legend entry; gaps where a trace has
    no point at that x."""
    fig = scatter_fig()
    fig.update_xaxes(title_text="training step")
    data = export.figure_data(fig)
    assert list(data.columns) == ["training step", "IC", "IW"]
    np.testing.assert_allclose(data["training step"], [0, 100, 200])
    np.testing.assert_allclose(data["IC"], [0.1, 0.5, 0.9])
    np.testing.assert_allclose(data["IW"][:2], [0.3, 0.2])
    assert np.isnan(data["IW"][2])
    assert export.figure_data(go.Figure()).empty


def test_figure_data_heatmap_cells():
    """A row per cell, named by the token roles (the tick labels), not by the hover text."""
    patterns = np.tril(np.ones((1, 1, 3, 3))) / np.arange(1, 4)[:, None]
    hover = ["x1: item", "l1: its label", "xq: the query"]
    fig = plots.plot_attention_maps(patterns, [5], ["x1", "l1", "xq"], hover=hover)
    data = export.figure_data(fig)
    assert list(data.columns) == ["panel", "query", "key", "attention"]
    assert len(data) == 9 and set(data["panel"]) == {"layer 1, step 5"}
    cell = data[(data["query"] == "xq") & (data["key"] == "l1")]
    assert cell["attention"].item() == 0.3333  # 1/3, rounded to the 4 decimals figures keep
    assert data[(data["query"] == "x1") & (data["key"] == "l1")]["attention"].isna().all()


def test_html_is_self_contained_and_needs_no_browser(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-browser"))
    paths = export.export_figure(scatter_fig(), tmp_path / "fig", formats=("html",))
    assert [p.name for p in paths] == ["fig.html", "fig.csv"]
    html = paths[0].read_text()
    assert "<html>" in html and "test figure" in html
    assert len(html) > 1_000_000  # plotly.js embedded
    assert "<script src=" not in html  # nothing loaded from elsewhere (no CDN, no MathJax)
    csv = pd.read_csv(paths[1])
    pd.testing.assert_frame_equal(csv, export.figure_data(scatter_fig()), check_dtype=False)


def test_missing_chromium_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.setattr(export.shutil, "which", lambda name: None)
    monkeypatch.setattr(export, "_downloaded_chrome", lambda: None)
    monkeypatch.setattr(export, "_server", None)  # as if no browser was started yet
    assert export.find_chromium() is None
    with pytest.raises(RuntimeError, match=r"apt-get install -y chromium.*BROWSER_PATH"):
        export.export_figure(scatter_fig(), tmp_path / "fig", formats=("pdf",))
    assert not list(tmp_path.iterdir())  # failed before writing anything


def test_bad_browser_path_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "nothing"))
    monkeypatch.setattr(export, "_server", None)
    with pytest.raises(RuntimeError, match="BROWSER_PATH=.*nothing.*apt-get install -y chromium"):
        export.export_figure(scatter_fig(), tmp_path / "fig", formats=("png",))


def test_unknown_format_and_style(tmp_path):
    with pytest.raises(ValueError, match="unknown formats"):
        export.export_figure(scatter_fig(), tmp_path / "fig", formats=("gif",))
    with pytest.raises(ValueError, match="width 'triple' is invalid: single .* double"):
        export.apply_paper_style(scatter_fig(), "triple")
    with pytest.raises(ValueError, match="width_in"):
        export.PaperStyle(width_in=0)


def test_paper_style_sizes_and_fonts():
    fig = scatter_fig()
    single = export.apply_paper_style(fig, "single")
    assert single.layout.width == pytest.approx(3.5 * 96)
    # the plot keeps the figure's aspect ratio; the legend below gets extra room
    assert single.layout.height >= 3.5 * 96 * 400 / 600
    assert single.layout.font.size == pytest.approx(9 * 96 / 72)
    assert list(single.layout.colorway) == list(plots.OKABE_ITO)
    assert export.apply_paper_style(fig, "double").layout.width == pytest.approx(7 * 96)
    assert fig.layout.width == 600  # the original is untouched
    assert export.PAPER_STYLES["single"].png_scale == pytest.approx(300 / 96)


@needs_chromium
def test_static_export_writes_valid_files(tmp_path):
    fig = plots.plot_training_dynamics(
        pd.DataFrame({"step": [0, 1, 2], "train_loss": [3, 2, 1], "ic_acc": [0.1, 0.5, 0.9]}),
        transition_step=1,
        note="Adam lr 1e-3 (author's code: SGD 0.01)",
    )
    paths = export.export_figure(
        fig, tmp_path / "sub" / "dyn", ("pdf", "svg", "png"), style="single"
    )
    pdf, svg, png, csv = paths
    assert [p.suffix for p in paths] == [".pdf", ".svg", ".png", ".csv"]
    assert pdf.read_bytes().startswith(b"%PDF-") and pdf.stat().st_size > 5_000
    root = ET.fromstring(svg.read_bytes())
    assert root.tag.endswith("svg") and svg.stat().st_size > 5_000
    width, height = png_size(png)
    assert width == round(3.5 * 300)  # 3.5 in at 300 dpi
    assert height > 500 and png.stat().st_size > 20_000
    data = pd.read_csv(csv)
    assert list(data.columns) == ["training step", "train loss", "IC"]
    np.testing.assert_allclose(data["IC"], [0.1, 0.5, 0.9])


@needs_chromium
def test_one_browser_per_process(tmp_path):
    export.export_figure(scatter_fig(), tmp_path / "a", ("png",), csv=False)
    server = export._server
    assert server is not None
    export.export_figure(scatter_fig(), tmp_path / "b", ("png",), csv=False)
    assert export._server is server
    width, _ = png_size(tmp_path / "b.png")
    assert width == 1200  # screen figures: 600 px at scale 2


def test_no_styled_figure_is_taller_than_a_page():
    """A page's text block is about 7 x 9 in: the four-panel progress figure, 11 in tall at
    double width before, keeps 9 in; a short figure keeps its aspect."""
    steps = np.arange(0, 3001, 100)
    s = 1 / (1 + np.exp(-(steps - 2000) / 120))
    columns = ["ila1", "tila2", "cla", "ic_acc", "prev_token_score", "active_h1", "active_h2"]
    metrics = pd.DataFrame({"step": steps, **{c: 0.1 + 0.8 * s for c in columns}})
    fig = plots.plot_progress_measures(metrics, 2000)
    assert len({t.yaxis for t in fig.data}) == 4  # attention, accuracy, scores, active units
    for width, inches in (("single", 3.5), ("double", 7.0)):
        styled = export.apply_paper_style(fig, width)
        assert styled.layout.width == pytest.approx(inches * 96)
        assert styled.layout.height <= 9 * 96
    assert export.apply_paper_style(fig, "double").layout.height == pytest.approx(9 * 96)
    short = export.apply_paper_style(scatter_fig(), "double")
    assert short.layout.height == pytest.approx(7 * 96 * 400 / 600, rel=0.1)
    with pytest.raises(ValueError, match="max_height_in"):
        export.PaperStyle(width_in=7, max_height_in=0)


def test_crowded_token_labels_keep_the_label_tokens_and_the_query():
    """17 tokens do not fit a print panel at 7 pt: the labels kept are the label tokens (the
    rows of layer 1's previous-token diagonal, the keys layer 2's query attends to) and xq."""
    n_pairs = 8
    rng = np.random.default_rng(0)
    n = 2 * n_pairs + 1
    fig = plots.plot_attention_snapshots(
        rng.dirichlet(np.ones(n), size=(4, 2, n)), [0, 100, 200, 300], plots.token_labels(8)
    )
    labels = [f"l{i}" for i in range(1, n_pairs + 1)]
    for width in ("single", "double"):
        styled = export.apply_paper_style(fig, width)
        for axis in (styled.layout.xaxis5, styled.layout.yaxis1):  # the labelled outer axes
            shown = [t for t in axis.ticktext if t]
            assert shown[-1] == "xq" and set(shown[:-1]) <= set(labels), (width, shown)
            assert "l1" in shown and len(shown) < n
    double = export.apply_paper_style(fig, "double")
    assert [t for t in double.layout.yaxis1.ticktext if t] == [*labels, "xq"]
