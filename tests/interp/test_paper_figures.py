"""Figures for print: any width, no text under 7 pt, PNGs that record their DPI, no machine
paths."""

import re
import struct
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from interp.viz import export, plots

needs_chromium = pytest.mark.skipif(
    export.find_chromium() is None,
    reason="no Chromium for static export (apt-get install -y chromium)",
)


def snapshot_fig(n_pairs: int = 8, n_steps: int = 4) -> go.Figure:
    """The attention-snapshot grid of the figure set: 2 layers x 4 checkpoints, 17 tokens."""
    rng = np.random.default_rng(0)
    n = 2 * n_pairs + 1
    patterns = rng.dirichlet(np.ones(n), size=(n_steps, 2, n))
    return plots.plot_attention_snapshots(
        patterns,
        [0, 100, 200, 300][:n_steps],
        plots.token_labels(n_pairs),
        captions=[f"IC acc 0.{i}" for i in range(n_steps)],
    )


def test_smallest_font_counts_explicit_and_inherited_sizes():
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    fig.update_layout(width=480, font={"size": 16})  # 480 px printed 5 in wide: 96 px per in
    assert export.smallest_font_pt(fig) == pytest.approx(12.0)  # 16 px = 12 pt
    fig.update_xaxes(tickfont={"size": 8})
    assert export.smallest_font_pt(fig) == pytest.approx(6.0)
    # the same figure printed at half the size: every point halves
    assert export.smallest_font_pt(fig, width_in=2.5) == pytest.approx(3.0)


def test_the_snapshot_grid_was_under_7_pt_and_is_not_once_styled():
    fig = snapshot_fig()
    # its own tick labels are 7 px: 5.25 pt at 96 px per inch
    assert export.smallest_font_pt(fig) == pytest.approx(5.25)
    for width, inches in (("single", 3.5), ("double", 7.0), (5.0, 5.0)):
        styled = export.apply_paper_style(fig, width)
        assert styled.layout.width == pytest.approx(inches * 96)
        assert export.smallest_font_pt(styled) >= 7.0 - 1e-9
    # 17 key labels do not fit a 3.5-in, four-column grid at 7 pt: label tokens and the query kept
    single = export.apply_paper_style(fig, "single")
    shown = [t for t in single.layout.xaxis.ticktext if t]
    assert 1 < len(shown) < 17 and shown[0] == "l1" and shown[-1] == "xq"


def test_paper_style_widths():
    assert export.paper_style("single").width_in == 3.5
    assert export.paper_style("DOUBLE").width_in == 7.0
    assert export.paper_style("5.5").width_in == 5.5
    assert export.paper_style(4).width_in == 4.0
    for bad in ("wide", "0", "-3", "1.5", "nan", True):
        with pytest.raises(ValueError, match="invalid: single .3.5 in., double .7 in. or a width"):
            export.paper_style(bad)


def _png(width: int = 2, height: int = 1) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_png_records_its_dpi():
    png = _png()
    assert export.png_dpi(png) is None
    marked = export.png_with_dpi(png, 300)
    assert export.png_dpi(marked) == pytest.approx((300, 300), abs=0.02)
    # 300 dpi is 11811 pixels per metre, unit 1 (metre), right after IHDR
    assert marked[33:41] == struct.pack(">I", 9) + b"pHYs"
    assert marked[41:50] == struct.pack(">IIB", 11811, 11811, 1)
    again = export.png_with_dpi(marked, 600)  # replaced, not added
    assert again.count(b"pHYs") == 1 and export.png_dpi(again)[0] == pytest.approx(600, abs=0.05)
    with pytest.raises(ValueError, match="not a PNG"):
        export.png_with_dpi(b"GIF89a", 300)


def test_a_figure_never_shows_an_absolute_path(tmp_path, monkeypatch):
    from phenomenology.sources import display_source

    monkeypatch.chdir(tmp_path)
    inside = tmp_path / "runs" / "a" / "metrics.csv"
    assert display_source(inside) == "runs/a/metrics.csv"
    assert display_source("runs/a/metrics.csv") == "runs/a/metrics.csv"
    outside = Path("/work/science_runs/i14/fig3-lr03/seed=3/metrics.csv")
    assert display_source(outside) == "fig3-lr03/seed=3/metrics.csv"


def _svg_font_pt(svg: Path, width_in: float) -> tuple[float, float]:
    """(the SVG's width in inches at print size, its smallest font-size in points)."""
    text = svg.read_text()
    root = ET.fromstring(text)
    width_px = float(root.get("width"))
    sizes = [float(s) for s in re.findall(r"font-size:\s*([0-9.]+)px", text)]
    assert sizes, "no text in the SVG"
    return width_px / 96.0, min(sizes) * 72.0 / (width_px / width_in)


@needs_chromium
def test_rendered_svg_text_is_at_least_7_pt_and_png_has_dpi(tmp_path):
    svg, png = export.export_figure(
        snapshot_fig(), tmp_path / "snap", ("svg", "png"), style="single", csv=False
    )
    inches, smallest = _svg_font_pt(svg, 3.5)
    assert inches == pytest.approx(3.5)
    assert smallest >= 6.999  # the SVG rounds sizes to 1e-5 px
    data = png.read_bytes()
    assert struct.unpack(">I", data[16:20])[0] == round(3.5 * 300)
    assert export.png_dpi(data) == pytest.approx((300, 300), abs=0.02)


@needs_chromium
def test_figures_width_single_gives_column_wide_figures_without_small_text(tmp_path, capsys):
    from interp import cli
    from tests.interp.tiny_runs import tiny_run

    run = tiny_run(tmp_path / "run")
    out = tmp_path / "figs"
    assert (
        cli.main(["figures", str(run), "--out", str(out), "--width", "single", "--formats", "svg"])
        == 0
    )
    svgs = sorted(out.glob("*.svg"))
    assert {p.stem for p in svgs} >= {
        "training_dynamics",
        "progress_measures",
        "attention_snapshots",
    }
    for svg in svgs:
        inches, smallest = _svg_font_pt(svg, 3.5)
        assert inches == pytest.approx(3.5), svg.name
        assert smallest >= 6.999, svg.name


def test_figures_width_is_checked_before_any_work(tmp_path, capsys):
    from interp import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["figures", str(tmp_path), "--out", str(tmp_path / "f"), "--width", "wide"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--width" in err[0] and "'wide' is invalid" in err[0]
    assert not (tmp_path / "f").exists()


def test_comparison_panels_keep_axis_titles_out_of_their_neighbours():
    import pandas as pd

    m = {
        name: pd.DataFrame(
            {"step": [0, 100, 200], "train_loss": [3, 2, 1], "ic_acc": [0.1, a, 0.9]}
        )
        for name, a in (("a", 0.5), ("b", 0.4))
    }
    fig = plots.plot_run_comparison(m, ["train_loss", "ic_acc"], title="Training dynamics")
    assert fig.layout.title.text == "Training dynamics"
    # only the first panel names its axis; the panel titles say what the others show
    assert fig.layout.yaxis.title.text == "loss" and fig.layout.yaxis2.title.text is None
    gap = fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]
    assert gap >= 0.08


def test_transition_lines_stop_below_the_panel_titles():
    import pandas as pd

    metrics = pd.DataFrame({"step": [0, 1, 2], "train_loss": [3, 2, 1], "ic_acc": [0.1, 0.5, 0.9]})
    fig = plots.plot_training_dynamics(metrics, transition_step=1)
    lines = [s for s in fig.layout.shapes if s.x0 == s.x1 == 1]
    assert lines and all(s.yref.endswith("domain") and s.y1 < 1 for s in lines)


def test_a_long_title_wraps_to_the_width():
    note = "adam lr 0.001 (paper: SGD lr 0.01); adam lr 0.003 (paper: SGD lr 0.01); compared"
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    fig.update_layout(
        title=f"Attention across training, average over 256 IC sequences<br><sup>{note}</sup>",
        width=900,
        height=400,
    )
    single = export.apply_paper_style(fig, "single").layout
    double = export.apply_paper_style(fig, "double").layout
    assert double.title.text == fig.layout.title.text  # fits 7 in
    lines = [
        x.removeprefix("<sup>").removesuffix("</sup>") for x in single.title.text.split("<br>")
    ]
    # 3.5 in holds ~45 characters of the title and ~65 of the smaller note
    assert len(lines) == 4 and len(lines[0]) <= 45 and all(len(x) <= 65 for x in lines[2:])
    assert " ".join(lines[:2]) == "Attention across training, average over 256 IC sequences"
    assert " ".join(lines[2:]) == note
    assert single.margin.t > double.margin.t
