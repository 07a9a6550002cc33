"""Write figures to disk: static files through kaleido, self-contained HTML, and the plotted data.

Static export (PDF, SVG, PNG) drives a headless Chromium through kaleido 1.x. One Chromium is
started on first use and kept for the life of the process, so that writing a figure set costs
one browser start, not one per file. Nothing is fetched from the network: plotly.js comes from
the installed plotly package, MathJax is off, and Chromium is pointed at a dead proxy so that a
stray request fails instead of leaving the machine.

Every export writes, beside the figure, a CSV of the data the figure plots (one row per point,
or per cell for heatmaps), so that numbers in a paper can be checked without the plotting code.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import os
import shutil
import threading
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
        dpi: resolution of PNG output; vector formats ignore it.
        aspect: height / width used when the figure does not set its own size.
        colorway: trace colours in order (colour-blind safe).
    """

    width_in: Real
    font_pt: Real = 9.0
    title_pt: Real = 10.0
    dpi: Real = 300.0
    aspect: Real = 0.75
    colorway: tuple[str, ...] = OKABE_ITO

    def __post_init__(self) -> None:
        for field in ("width_in", "font_pt", "title_pt", "dpi", "aspect"):
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


def apply_paper_style(fig: go.Figure, style: str | PaperStyle) -> go.Figure:
    """A copy of ``fig`` sized and typeset for print.

    The width becomes the style's column width; the height keeps the figure's own aspect ratio
    (or the style's, if the figure sets no size). Fonts shrink to print sizes, margins tighten,
    the background turns white and traces without an explicit colour take the Okabe-Ito palette.

    Args:
        fig: the figure; it is not modified.
        style: ``"single"`` (3.5 in), ``"double"`` (7 in) or a :class:`PaperStyle`.

    Returns:
        The styled copy.
    """
    if isinstance(style, str):
        if style not in PAPER_STYLES:
            raise ValueError(
                f"style must be one of {sorted(PAPER_STYLES)} or a PaperStyle, got {style!r}"
            )
        style = PAPER_STYLES[style]
    out = go.Figure(fig)
    width = out.layout.width
    height = out.layout.height
    aspect = height / width if width and height else style.aspect
    font_px = style.font_pt * _PX_PER_PT
    out.update_layout(
        template="simple_white",
        width=style.width_px,
        height=style.width_px * aspect + _legend_height(out, style, font_px),
        font={"family": "Arial, Helvetica, sans-serif", "size": font_px, "color": "black"},
        title={"font": {"size": style.title_pt * _PX_PER_PT}},
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
        margin={
            "l": 50,
            "r": 15,
            "t": (70 if "<br>" in (out.layout.title.text or "") else 45)
            + (round(font_px * 1.3) if _two_line_panel_titles(out) else 0),
            "b": 40,
        },
    )
    # Subplot titles are annotations; make them print-sized too.
    out.update_annotations(font_size=font_px)
    return out


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
    """The data a figure plots, in tidy form: one row per point (or per heatmap/contour cell).

    Columns: ``trace`` (index in ``fig.data``), ``name``, ``type``, ``x``, ``y`` and, for
    heatmaps and contours, ``z``. Traces hidden behind a slider are included; their names say
    which checkpoint they belong to.

    Args:
        fig: the figure.

    Returns:
        The tidy table (empty, with those columns, if the figure has no data).
    """
    frames = []
    for i, trace in enumerate(fig.data):
        name = trace.name if trace.name is not None else f"trace {i}"
        z = getattr(trace, "z", None)
        if z is not None:
            z = np.asarray(z, dtype=float)
            n_y, n_x = z.shape
            xs = np.asarray(trace.x) if trace.x is not None else np.arange(n_x)
            ys = np.asarray(trace.y) if trace.y is not None else np.arange(n_y)
            yy, xx = np.meshgrid(ys, xs, indexing="ij")
            frame = pd.DataFrame({"x": xx.ravel(), "y": yy.ravel(), "z": z.ravel()})
        else:
            x = np.asarray(trace.x) if trace.x is not None else None
            y = np.asarray(trace.y) if trace.y is not None else None
            if x is None and y is None:
                continue
            if x is None:
                x = np.arange(len(y))
            if y is None:
                y = np.arange(len(x))
            frame = pd.DataFrame({"x": x, "y": y})
        frame.insert(0, "type", trace.type)
        frame.insert(0, "name", name)
        frame.insert(0, "trace", i)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["trace", "name", "type", "x", "y", "z"])
    data = pd.concat(frames, ignore_index=True)
    if "z" not in data.columns:
        data["z"] = np.nan
    return data


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
        style: ``"single"``, ``"double"`` or a :class:`PaperStyle` to typeset for print (see
            :func:`apply_paper_style`); None keeps the figure's own size and fonts.
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
    if isinstance(style, str):
        style = PAPER_STYLES[style]

    static = [f for f in formats if f in STATIC_FORMATS]
    server = _get_server() if static else None  # fail before writing anything

    written = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        if fmt == "html":
            html = styled.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True)
            write_text_atomic(path, html)
        else:
            width = styled.layout.width or 700
            height = styled.layout.height or 500
            scale = style.png_scale if (style is not None and fmt == "png") else 1.0
            if style is None and fmt == "png":
                scale = 2.0  # screen figures: sharp on high-density displays
            try:
                image = server.render(styled, fmt, width, height, scale)
            except Exception:
                # A crashed or hung browser is not reused: the next export starts a fresh one.
                close_export_server()
                raise
            write_bytes_atomic(path, image)
        written.append(path)
    if csv:
        path = stem.with_name(f"{stem.name}.csv")
        write_text_atomic(path, figure_data(fig).to_csv(index=False))
        written.append(path)
    return written
