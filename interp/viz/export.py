"""Write figures to disk: static files through kaleido, self-contained HTML, and the plotted data.

Static export (PDF, SVG, PNG) drives a headless Chromium through kaleido 1.x. One Chromium is
started on first use and kept for the life of the process, so that writing a figure set costs
one browser start, not one per file. Nothing is fetched from the network: plotly.js comes from
the installed plotly package, MathJax is off, and Chromium is pointed at a dead proxy so that a
stray request fails instead of leaving the machine.

Every export writes, beside the figure, a tidy CSV of the data the figure plots (a row per step
and a column per plotted quantity, or a row per heatmap cell), so that numbers in a paper can be
checked without the plotting code.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import math
import os
import shutil
import struct
import textwrap
import threading
import zlib
from collections.abc import Sequence
from numbers import Real
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from interp.io.atomic import write_bytes_atomic, write_text_atomic
from interp.io.paths import enclosing_root, open_directory
from interp.viz.plots import OKABE_ITO

STATIC_FORMATS = ("pdf", "svg", "png")
FORMATS = (*STATIC_FORMATS, "html")

# Executable names tried, in order, when BROWSER_PATH is not set.
_CHROMIUM_NAMES = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
)

# Chromium sends every http(s) request through this proxy; nothing listens on port 9 (discard),
# so any request that slipped past the local plotly.js and disabled MathJax fails at once.
_NO_NETWORK_PROXY = "127.0.0.1:9"

# Seconds to wait for Chromium to start, and for one figure to render.
_START_TIMEOUT_S = 120.0
_RENDER_TIMEOUT_S = 120.0

# CSS pixels per inch: kaleido lays out PDF and SVG in CSS px, and 1 pt = 1/72 in.
_PX_PER_IN = 96.0
_PX_PER_PT = _PX_PER_IN / 72.0

_INSTALL_HINT = (
    "static export (PDF, SVG, PNG) needs Chromium: run `apt-get install -y chromium` (Debian/"
    "Ubuntu), or set BROWSER_PATH to a Chrome or Chromium executable, or run `kaleido_get_chrome`"
    " to download one. HTML export (formats=('html',)) works without it."
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PaperStyle:
    """Size and typography of a figure in print.

    Attributes:
        width_in: figure width in inches (a journal column or the full text width).
        font_pt: base font size in points; tick labels and legends use it.
        title_pt: title font size in points.
        dpi: resolution of PNG output (also written into the PNG's ``pHYs`` chunk, so that
            programs that read it place the figure at ``width_in``); vector formats ignore it.
        aspect: height / width used when the figure does not set its own size.
        colorway: trace colours in order (colour-blind safe).
        min_font_pt: no text of the styled figure is smaller (tick labels, legends, panel
            titles, colour bars, text in cells); crowded category tick labels are thinned out
            instead of shrunk.
        max_height_in: no styled figure is taller (a page's text block: about 7 x 9 in).
    """

    width_in: Real
    font_pt: Real = 9.0
    title_pt: Real = 10.0
    dpi: Real = 300.0
    aspect: Real = 0.75
    colorway: tuple[str, ...] = OKABE_ITO
    min_font_pt: Real = 7.0
    max_height_in: Real = 9.0

    def __post_init__(self) -> None:
        for field in (f.name for f in dataclasses.fields(self) if f.name != "colorway"):
            if not getattr(self, field) > 0:
                raise ValueError(f"PaperStyle.{field} must be > 0, got {getattr(self, field)}")

    @property
    def width_px(self) -> float:
        """Width in CSS pixels, the unit plotly lays out in."""
        return self.width_in * _PX_PER_IN

    @property
    def png_scale(self) -> float:
        """Scale factor that turns CSS pixels into ``dpi`` pixels per inch in a PNG."""
        return self.dpi / _PX_PER_IN


# Two-column journal layout (e.g. ICLR/NeurIPS single column is ~5.5 in; two-column venues have
# ~3.3-3.5 in columns and ~7 in text width).
PAPER_STYLES = {
    "single": PaperStyle(width_in=3.5),
    "double": PaperStyle(width_in=7.0),
}

# Below this width (inches) a figure's plot area is at least this tall relative to its width.
_NARROW_IN = 5.0
_NARROW_MIN_ASPECT = 0.7

# Widths a figure may be asked for, in inches: below 2 in no panel has room for 7 pt text.
_WIDTH_RANGE_IN = (2.0, 20.0)


def paper_style(width: str | Real | PaperStyle) -> PaperStyle:
    """The print style of a width: ``"single"`` (3.5 in), ``"double"`` (7 in), a number of inches
    (``5.5`` or ``"5.5"``) or a :class:`PaperStyle` (returned as it is).

    Raises:
        ValueError: anything else, or a width outside 2-20 in (one line naming the width).
    """
    if isinstance(width, PaperStyle):
        return width
    if isinstance(width, str) and width.strip().lower() in PAPER_STYLES:
        return PAPER_STYLES[width.strip().lower()]
    try:
        inches = float(width)
    except (TypeError, ValueError):
        inches = math.nan
    low, high = _WIDTH_RANGE_IN
    if isinstance(width, bool) or not low <= inches <= high:
        raise ValueError(
            f"width {width!r} is invalid: single (3.5 in), double (7 in) or a width in inches "
            f"from {low:g} to {high:g}"
        )
    return PaperStyle(width_in=inches)


def apply_paper_style(fig: go.Figure, style: str | PaperStyle) -> go.Figure:
    """A copy of ``fig`` sized and typeset for print.

    The width becomes the style's column width; the height keeps the figure's own aspect ratio
    (or the style's, if the figure sets no size; at least 0.7 below 5 in, so that a wide figure
    put in a column keeps panels of some height), up to ``style.max_height_in`` (9 in: a page's
    text block) with the legend and the title. Fonts shrink to print sizes, margins tighten,
    the background turns white and traces without an explicit colour take the Okabe-Ito palette.

    No text ends up smaller than ``style.min_font_pt`` (7 pt by default): sizes a figure set
    smaller are raised to it, and category tick labels too crowded at that size are thinned out
    (every second, third, ... label kept).

    Args:
        fig: the figure; it is not modified.
        style: ``"single"`` (3.5 in), ``"double"`` (7 in), a width in inches or a
            :class:`PaperStyle` (see :func:`paper_style`).

    Returns:
        The styled copy.
    """
    style = paper_style(style)
    out = go.Figure(fig)
    width, height = out.layout.width, out.layout.height
    aspect = height / width if width and height else style.aspect
    if style.width_in < _NARROW_IN:  # a wide figure in a column: panels not squashed flat
        aspect = max(aspect, _NARROW_MIN_ASPECT)
    font_px = style.font_pt * _PX_PER_PT
    title_px = style.title_pt * _PX_PER_PT
    title = _wrap_title(out.layout.title.text, style.width_px - 20, title_px)
    top = _top_margin(out, title, title_px, font_px)
    # the panels keep their height when a wrapped title needs more room above them; they give up
    # some where the figure would not fit a page
    height = style.width_px * aspect + _legend_height(out, style, font_px) + max(0, top - 70)
    out.update_layout(
        template="simple_white",
        width=style.width_px,
        height=min(height, style.max_height_in * _PX_PER_IN),
        font={"family": "Arial, Helvetica, sans-serif", "size": font_px, "color": "black"},
        title={"font": {"size": title_px}},
        # Below the panels, laid out in rows: a column-wide figure has no room at the side.
        legend={
            "font": {"size": font_px * 0.9},
            "orientation": "h",
            "tracegroupgap": 0,
            "x": 0.5,
            "xanchor": "center",
            "yref": "container",
            "y": 0.0,
            "yanchor": "bottom",
        },
        colorway=list(style.colorway),
        # Room for a second title line (the deviation note) when there is one, and for
        # two-line subplot titles, which would otherwise run into it.
        margin={"l": 50, "r": 15, "t": top, "b": 40},
    )
    if title:
        out.layout.title.text = title
    # Subplot titles are annotations; make them print-sized too.
    out.update_annotations(font_size=font_px)
    _widen_panel_gaps(out, font_px)
    _raise_small_fonts(out, style.min_font_pt * _PX_PER_PT)
    _thin_crowded_ticks(out, style.min_font_pt * _PX_PER_PT)
    return out


# Where plotly keeps text sizes in a figure: layout parts and per-trace parts, as attribute paths.
_AXIS_FONTS = ("tickfont", "title.font")
_TRACE_FONTS = ("textfont", "colorbar.tickfont", "colorbar.title.font")


def _get_path(obj, path: str):
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def _axes(fig: go.Figure) -> list:
    return [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]


def _font_sizes(fig: go.Figure) -> list[float]:
    """The size in CSS px of every text element a static export prints: explicit sizes, and
    the base font (``layout.font.size``, plotly's 12 px if unset) where an element inherits."""
    base = fig.layout.font.size or 12.0
    sizes = [base]
    title = fig.layout.title
    if title.text:
        sizes.append(title.font.size or base * 1.4)
    if fig.layout.showlegend is not False and fig.data:
        sizes.append(fig.layout.legend.font.size or base)
    sizes += [a.font.size or base for a in fig.layout.annotations if a.text]
    for axis in _axes(fig):
        sizes += _axis_font_sizes(axis, base)
    for trace in fig.data:
        sizes += _trace_font_sizes(trace, base)
    for slider in fig.layout.sliders:
        sizes.append(slider.font.size or base)
        sizes.append(slider.currentvalue.font.size or base)
    return [float(s) for s in sizes]


def _axis_font_sizes(axis, base: float) -> list[float]:
    """The sizes of an axis's tick labels (when shown) and title (when it has one)."""
    sizes = []
    if axis.showticklabels is not False and axis.visible is not False:
        sizes.append(axis.tickfont.size or base)
    if axis.title.text:
        sizes.append(axis.title.font.size or base)
    return sizes


def _trace_font_sizes(trace, base: float) -> list[float]:
    """The sizes of a trace's text in cells and of its colour bar's tick labels."""
    sizes = []
    if getattr(trace, "text", None) is not None or getattr(trace, "texttemplate", None):
        sizes.append(_get_path(trace, "textfont.size") or base)
    if trace.type in ("heatmap", "contour") and trace.showscale is not False:
        sizes.append(_get_path(trace, "colorbar.tickfont.size") or base)
    return sizes


def smallest_font_pt(fig: go.Figure, width_in: Real | None = None) -> float:
    """The smallest text of a figure in points when it is printed ``width_in`` inches wide
    (default: its layout width at 96 px per inch, the size :func:`apply_paper_style` sets).

    Walks the title, legend, annotations (panel titles), axes' tick labels and titles, text in
    cells, colour bars and sliders, with the base font where an element sets no size.
    """
    px_per_in = _PX_PER_IN if width_in is None else (fig.layout.width or 700) / width_in
    return min(_font_sizes(fig)) * 72.0 / px_per_in


def _raise_font(font, min_px: float) -> None:
    """A font (None: there is none) whose explicit size is below ``min_px`` raised to it."""
    if font is not None and getattr(font, "size", None) is not None and font.size < min_px:
        font.size = min_px


def _raise_small_fonts(fig: go.Figure, min_px: float) -> None:
    """Every explicit text size below ``min_px`` raised to it (the base font included)."""
    if (fig.layout.font.size or 12.0) < min_px:
        fig.layout.font.size = min_px
    for part in (fig.layout.legend, fig.layout.title, *fig.layout.annotations):
        _raise_font(part.font, min_px)
    for axis in _axes(fig):
        for path in _AXIS_FONTS:
            _raise_font(_get_path(axis, path), min_px)
    for trace in fig.data:
        for path in _TRACE_FONTS:
            _raise_font(_get_path(trace, path), min_px)
    fig.update_layout(uniformtext={"minsize": min_px, "mode": "hide"})


def _thin_crowded_ticks(fig: go.Figure, min_px: float) -> None:
    """Category axes that label every token (``tickmode="array"``) keep every k-th label, so
    that labels at least ``min_px`` high do not overlap at the figure's size."""
    width = fig.layout.width or 700
    height = fig.layout.height or 500
    margin = fig.layout.margin
    plot_w = width - (margin.l or 80) - (margin.r or 80)
    plot_h = height - (margin.t or 100) - (margin.b or 80)
    for key in fig.layout:
        if not key.startswith(("xaxis", "yaxis")):
            continue
        axis = fig.layout[key]
        if axis.tickmode != "array" or not axis.ticktext or not axis.tickvals:
            continue
        domain = axis.domain or (0.0, 1.0)
        length = (plot_w if key.startswith("xaxis") else plot_h) * (domain[1] - domain[0])
        size = max(axis.tickfont.size or fig.layout.font.size or 12.0, min_px)
        _thin_labels(axis, math.ceil(len(axis.ticktext) * size * 1.15 / max(length, 1.0)))


def _thin_labels(axis, every: int) -> None:
    """Keep the last label of a category axis (the query, xq) and every ``every``-th from the
    second, none nearer the last than ``every - 1`` (xq's short glyphs leave room): an even step
    keeps the label tokens l1, l2, ..., the rows and keys that the attention points at."""
    if every > 1:
        every += every % 2
        last = len(axis.ticktext) - 1
        keep = {last} | {i for i in range(1, last - every + 2, every)}
        axis.ticktext = [t if i in keep else "" for i, t in enumerate(axis.ticktext)]


# Room a y axis needs left of its panel, in font sizes: tick labels of up to ~4 characters
# ("0.25", "1.5k"), the title's line and the gaps between them, with room for the left
# margin that plotly widens for the first panel's own axis.
_Y_AXIS_EMS = 4 * 0.6 + 1.3 + 2.3


def _widen_panel_gaps(fig: go.Figure, font_px: float) -> None:
    """Panels side by side moved apart where the gap left of a panel is too narrow for its y
    axis's tick labels and title, which would otherwise be drawn inside the panel to its left.

    Panel widths shrink in proportion; panel titles (annotations centred on a panel) move with
    their panel.
    """
    margin = fig.layout.margin
    plot_w = (fig.layout.width or 700) - _or(margin.l, 80) - _or(margin.r, 80)
    columns = sorted(
        {tuple(fig.layout[k].domain or (0.0, 1.0)) for k in fig.layout if k.startswith("xaxis")}
    )
    if len(columns) < 2 or plot_w <= 0:
        return
    pairs = list(zip(columns, columns[1:], strict=False))
    gaps = _needed_gaps(pairs, _labelled_columns(fig), _Y_AXIS_EMS * font_px / plot_w)
    free = columns[-1][1] - columns[0][0] - sum(gaps)
    total = sum(c[1] - c[0] for c in columns)
    wide_enough = all(b[0] - a[1] >= g - 1e-9 for (a, b), g in zip(pairs, gaps, strict=False))
    if free <= 0 or total <= 0 or wide_enough:
        return
    moved, x = {}, columns[0][0]
    for i, (lo, hi) in enumerate(columns):
        width_i = (hi - lo) * free / total
        moved[(lo, hi)] = (x, x + width_i)
        x += width_i + (gaps[i] if i < len(gaps) else 0.0)
    _move_panels(fig, moved)


def _needed_gaps(pairs: list, labelled: set, need: float) -> list[float]:
    """The gap left of each panel after the first: at least ``need`` where its y axis is
    labelled, else as it is."""
    return [max(b[0] - a[1], need) if b in labelled else b[0] - a[1] for a, b in pairs]


def _or(value, default):
    return default if value is None else value


def _move_panels(fig: go.Figure, moved: dict) -> None:
    """Each x axis whose domain is a key of ``moved`` gets its value; a panel title centred on an
    old domain is centred on the new one."""
    for key in fig.layout:
        if key.startswith("xaxis"):
            axis = fig.layout[key]
            old = tuple(axis.domain or (0.0, 1.0))
            axis.domain = moved.get(old, old)
    for note in fig.layout.annotations:
        if note.xref != "paper" or note.x is None:
            continue
        for (lo, hi), (new_lo, new_hi) in moved.items():
            if abs(note.x - (lo + hi) / 2) < 1e-6:
                note.x = (new_lo + new_hi) / 2
                break


def _labelled_columns(fig: go.Figure) -> set[tuple[float, float]]:
    """x domains of the panels whose y axis shows tick labels or a title."""
    out = set()
    for key in fig.layout:
        if not key.startswith("yaxis"):
            continue
        y = fig.layout[key]
        if y.anchor is None or y.anchor == "free" or y.visible is False:
            continue
        if y.showticklabels is False and not y.title.text:
            continue
        x = fig.layout[y.anchor.replace("x", "xaxis", 1)]
        out.add(tuple(x.domain or (0.0, 1.0)))
    return out


def _wrap_title(text: str | None, width_px: float, size_px: float) -> str | None:
    """A title whose lines fit ``width_px``: each ``<br>``-separated line (a ``<sup>`` line at
    plotly's 70% size) broken at spaces where it would run past the figure's edges."""
    if not text:
        return text
    lines = []
    for line in text.split("<br>"):
        sup = line.startswith("<sup>") and line.endswith("</sup>")
        plain = line[5:-6] if sup else line
        chars = max(10, int(width_px / (0.52 * size_px * (0.7 if sup else 1.0))))
        parts = textwrap.wrap(plain, chars, break_long_words=False) if "<" not in plain else []
        parts = parts or [plain]
        lines += [f"<sup>{p}</sup>" if sup else p for p in parts]
    return "<br>".join(lines)


_LINE = 1.3  # line height / font size


def _top_margin(fig: go.Figure, title: str | None, title_px: float, font_px: float) -> int:
    """Room above the panels for the title's lines and the panel titles (one or two lines).

    Plotly puts the title's first baseline at the middle of the top margin and further lines
    below it, so the margin is twice what lies below that baseline: the other title lines, a
    gap, and the panel titles."""
    extra_lines = (title or "").count("<br>") if title else 0
    panel_lines = 2 if _two_line_panel_titles(fig) else 1
    below = extra_lines * _LINE * title_px + 0.15 * title_px + 4 + panel_lines * _LINE * font_px
    return round(max(2 * below, 1.5 * title_px + 4))


def _two_line_panel_titles(fig: go.Figure) -> bool:
    """Whether a subplot title (an annotation at the top of a panel) has a line break."""
    return any(
        "<br>" in (a.text or "") and a.yref == "paper" and a.yanchor == "bottom"
        for a in fig.layout.annotations
    )


def _legend_height(fig: go.Figure, style: PaperStyle, font_px: Real) -> float:
    """Rough height of a horizontal legend below the panels, so they keep their size."""
    # Heatmaps and contours show a colour bar, not a legend entry, unless asked to.
    no_entry = ("heatmap", "contour")
    entries = sum(
        1 for t in fig.data if t.showlegend or (t.showlegend is None and t.type not in no_entry)
    )
    entries += sum(1 for s in fig.layout.shapes if s.showlegend)
    if not entries or fig.layout.showlegend is False:
        return 0.0
    per_row = max(1, int(style.width_in / 1.5))  # about 1.5 in per entry at print font sizes
    rows = -(-entries // per_row)
    return rows * font_px * 1.9


def find_chromium() -> str | None:
    """Path of a Chrome/Chromium executable, or None.

    Looks at ``BROWSER_PATH`` first (an explicit setting that points nowhere is an error, not a
    reason to try elsewhere), then the usual executable names on ``PATH``, then a browser that
    ``kaleido_get_chrome`` downloaded.

    Returns:
        The executable's path, or None when no browser is found.

    Raises:
        RuntimeError: ``BROWSER_PATH`` is set but is not an executable file.
    """
    explicit = os.environ.get("BROWSER_PATH")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise RuntimeError(f"BROWSER_PATH={explicit!r} is not an executable file; {_INSTALL_HINT}")
    for name in _CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return _downloaded_chrome()


def _downloaded_chrome() -> str | None:
    """A browser fetched by ``kaleido_get_chrome``, or one at a typical install path, if any."""
    from choreographer.browsers.chromium import Chromium

    found = Chromium.find_browser(skip_local=False)
    return found if found and os.path.isfile(found) else None


class _KaleidoServer:
    """One kaleido browser for the whole process, driven from a background event loop.

    kaleido's own ``start_sync_server`` hides start-up failures in its thread (a browser that
    fails to start leaves later calls waiting forever); this keeps the same design, one browser
    and one loop in a daemon thread, but reports start-up errors and applies timeouts.
    """

    def __init__(self, browser_path: str) -> None:
        import kaleido

        self.browser_path = browser_path
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kaleido-server", daemon=True
        )
        self._thread.start()

        async def start() -> kaleido.Kaleido:
            k = kaleido.Kaleido(
                path=browser_path,
                mathjax=False,  # no MathJax at all: its default is a CDN URL
                proxy_server=_NO_NETWORK_PROXY,
                timeout=_RENDER_TIMEOUT_S,
            )
            await k.open()
            return k

        try:
            self._kaleido = self._submit(start(), _START_TIMEOUT_S)
        except BaseException:
            self._stop_loop()
            raise

    def _submit(self, coroutine, timeout: Real):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def render(self, fig: go.Figure, fmt: str, width: Real, height: Real, scale: Real) -> bytes:
        opts = {"format": fmt, "width": width, "height": height, "scale": scale}
        return self._submit(self._kaleido.calc_fig(fig, opts=opts), _RENDER_TIMEOUT_S + 10)

    def close(self) -> None:
        try:
            self._submit(self._kaleido.close(), 30)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()


_server: _KaleidoServer | None = None
_server_lock = threading.Lock()


def _get_server() -> _KaleidoServer:
    global _server
    with _server_lock:
        if _server is None:
            path = find_chromium()
            if path is None:
                raise RuntimeError(_INSTALL_HINT)
            _server = _KaleidoServer(path)
            atexit.register(_close_at_exit)
        return _server


def close_export_server() -> None:
    """Stop the process's Chromium, if one was started; the next static export starts another."""
    global _server
    with _server_lock:
        server, _server = _server, None
    if server is not None:
        server.close()


def _close_at_exit() -> None:
    # At interpreter exit a browser that does not close in time is left to the OS (it is a child
    # of this process); a traceback there would only alarm the user of a command that succeeded.
    try:
        close_export_server()
    except Exception as err:  # noqa: BLE001
        logging.getLogger(__name__).debug("chromium did not close cleanly at exit: %r", err)


def figure_data(fig: go.Figure) -> pd.DataFrame:
    """The data a figure plots, as a tidy table.

    Line and marker traces: one row per x value (per training step, on a step axis), one column
    per plotted quantity, named by its legend entry (``IC``, ``IC loss (fit)``, ...; a trace
    without a name takes its panel's y title); the first column is the x axis's title
    (``training step``). Heatmaps and contours: one row per cell, with the panel (the trace's
    name, e.g. ``layer 1, step 500``), the cell's row and column by their tick labels (token roles
    ``x1``, ``l1``, ..., ``xq``, not hover text) and its value. A figure with both stacks the two
    tables. Traces hidden behind a slider are included; their names say which checkpoint they
    belong to.

    Args:
        fig: the figure.

    Returns:
        The table (empty if the figure has no data).
    """
    lines, cells = [], []
    names = None
    for i, trace in enumerate(fig.data):
        if getattr(trace, "z", None) is not None:
            names = names or _cell_names(fig, trace)
            cells.append(_cell_rows(fig, trace, i, names))
        elif getattr(trace, "x", None) is not None or getattr(trace, "y", None) is not None:
            lines.append((i, trace))
    parts = [_line_table(fig, lines)] if lines else []
    parts += cells
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _axis_of(fig: go.Figure, trace, letter: str):
    ref = getattr(trace, f"{letter}axis", None) or letter
    return fig.layout[ref.replace(letter, f"{letter}axis", 1)]


def _line_table(fig: go.Figure, traces) -> pd.DataFrame:
    """One row per x value, one column per line or marker trace (see :func:`figure_data`)."""
    # the step axis is titled once, under the bottom panel of a stack sharing it
    titles = (_axis_of(fig, trace, "x").title.text for _, trace in traces)
    x_title = next((t for t in titles if t), "x")
    table = None
    seen: dict[str, int] = {}
    for i, trace in traces:
        y = np.asarray(trace.y) if trace.y is not None else None
        x = np.asarray(trace.x) if trace.x is not None else np.arange(len(y))
        y = y if y is not None else np.arange(len(x))
        if x.dtype.kind in "iub":  # steps: one numeric key for every trace
            x = x.astype(float)
        name = trace.name or _axis_of(fig, trace, "y").title.text or f"trace {i}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # the same legend entry on another panel
            name = f"{name} [{seen[name]}]"
        column = pd.DataFrame({x_title: x, name: y}).drop_duplicates(x_title, keep="last")
        table = column if table is None else table.merge(column, on=x_title, how="outer")
    return table.sort_values(x_title, kind="stable").reset_index(drop=True)


def _cell_names(fig: go.Figure, trace) -> tuple[str, str, str]:
    """Column names of the cell table: the row axis's title, the column axis's and the colour
    bar's, the first set in the figure (outer panels name the shared axes)."""

    def first(letter: str) -> str:
        titles = (fig.layout[k].title.text for k in fig.layout if k.startswith(f"{letter}axis"))
        return next((t for t in titles if t), letter)

    value = getattr(getattr(trace, "colorbar", None), "title", None)
    return first("y"), first("x"), (value.text if value is not None else None) or "value"


def _cell_rows(fig: go.Figure, trace, index: int, names: tuple[str, str, str]) -> pd.DataFrame:
    """One row per heatmap or contour cell, named by the axes' tick labels."""
    z = np.asarray(trace.z, dtype=float)
    n_y, n_x = z.shape
    xs = np.asarray(trace.x) if trace.x is not None else np.arange(n_x)
    ys = np.asarray(trace.y) if trace.y is not None else np.arange(n_y)
    x_axis, y_axis = _axis_of(fig, trace, "x"), _axis_of(fig, trace, "y")
    xs, ys = _tick_names(x_axis, xs), _tick_names(y_axis, ys)
    yy, xx = np.meshgrid(ys, xs, indexing="ij")
    panel = trace.name if trace.name is not None else f"trace {index}"
    y_name, x_name, value = names
    return pd.DataFrame({"panel": panel, y_name: yy.ravel(), x_name: xx.ravel(), value: z.ravel()})


def _tick_names(axis, values: np.ndarray) -> np.ndarray:
    """Category values by the axis's full tick labels where it sets them (``tickvals`` ->
    ``ticktext``); print styling may blank crowded labels, the table keeps them all."""
    if axis.tickmode != "array" or not axis.tickvals or not axis.ticktext:
        return values
    names = dict(zip(axis.tickvals, axis.ticktext, strict=False))
    return np.array([names.get(v, v) for v in values], dtype=object)


def png_with_dpi(png: bytes, dpi: Real) -> bytes:
    """A PNG with its resolution recorded (a ``pHYs`` chunk in pixels per metre, replacing any
    there is), so that a figure placed in a document takes its intended size."""
    signature = b"\x89PNG\r\n\x1a\n"
    if not png.startswith(signature):
        raise ValueError("not a PNG file")
    per_metre = round(float(dpi) / 0.0254)
    payload = struct.pack(">IIB", per_metre, per_metre, 1)
    chunk = struct.pack(">I", len(payload)) + b"pHYs" + payload
    chunk += struct.pack(">I", zlib.crc32(b"pHYs" + payload) & 0xFFFFFFFF)
    out, pos, inserted = [signature], len(signature), False
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        end = pos + 12 + length
        if kind != b"pHYs":
            out.append(png[pos:end])
        if kind == b"IHDR" and not inserted:
            out.append(chunk)
            inserted = True
        pos = end
    return b"".join(out)


def png_dpi(png: bytes) -> tuple[float, float] | None:
    """The resolution a PNG records (``pHYs`` in metres, as dots per inch), or None."""
    pos = 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        if png[pos + 4 : pos + 8] == b"pHYs":
            x, y, unit = struct.unpack(">IIB", png[pos + 8 : pos + 17])
            return (x * 0.0254, y * 0.0254) if unit == 1 else None
        pos += 12 + length
    return None


def _rendered(server, styled: go.Figure, fmt: str, style: PaperStyle | None) -> bytes:
    """The static image of ``styled`` in ``fmt``: a PNG at the style's scale and resolution (a
    screen figure's at twice its size, for high-density displays)."""
    png = fmt == "png"
    scale = (style.png_scale if style is not None else 2.0) if png else 1.0
    try:
        image = server.render(
            styled, fmt, styled.layout.width or 700, styled.layout.height or 500, scale
        )
    except Exception:
        # A crashed or hung browser is not reused: the next export starts a fresh one.
        close_export_server()
        raise
    if png:
        image = png_with_dpi(image, style.dpi if style is not None else _PX_PER_IN * scale)
    return image


def export_figure(
    fig: go.Figure,
    path_stem: str | os.PathLike,
    formats: Sequence[str] = ("pdf", "png"),
    *,
    style: str | PaperStyle | None = None,
    csv: bool = True,
) -> list[Path]:
    """Write a figure in several formats, and the data it plots as CSV, side by side.

    ``export_figure(fig, "out/dynamics", ("pdf", "png", "html"))`` writes
    ``out/dynamics.pdf``, ``out/dynamics.png``, ``out/dynamics.html`` and ``out/dynamics.csv``.

    Args:
        fig: the figure; it is not modified.
        path_stem: output path without extension; missing folders are created.
        formats: any of ``"pdf"``, ``"svg"``, ``"png"`` (through Chromium) and ``"html"``
            (self-contained: plotly.js embedded, no MathJax, opens offline).
        style: ``"single"``, ``"double"``, a width in inches or a :class:`PaperStyle` to
            typeset for print (see :func:`apply_paper_style`); None keeps the figure's own size
            and fonts.
        csv: also write ``<path_stem>.csv`` (see :func:`figure_data`).

    Returns:
        The paths written, figure files in the order of ``formats``, then the CSV.

    Raises:
        ValueError: an unknown format.
        RuntimeError: a static format was asked for and no Chromium was found; the message says
            how to install it.
    """
    formats = [f.lower().lstrip(".") for f in formats]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown formats {unknown}; choose from {list(FORMATS)}")
    stem = Path(path_stem)
    # Missing folders are created without following links (inside a run or sweep directory, a
    # link on the way is refused: interp.io.paths).
    os.close(open_directory(stem.parent, enclosing_root(stem.parent)))
    styled = apply_paper_style(fig, style) if style is not None else go.Figure(fig)
    if style is not None:
        style = paper_style(style)

    static = [f for f in formats if f in STATIC_FORMATS]
    server = _get_server() if static else None  # fail before writing anything

    written = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        if fmt == "html":
            html = styled.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True)
            write_text_atomic(path, html)
        else:
            write_bytes_atomic(path, _rendered(server, styled, fmt, style))
        written.append(path)
    if csv:
        path = stem.with_name(f"{stem.name}.csv")
        write_text_atomic(path, figure_data(fig).to_csv(index=False))
        written.append(path)
    return written
