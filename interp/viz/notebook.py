"""How the notebooks show figures: interactive, with a static PNG beside it.

A plotly figure shown in a notebook (the last expression of a cell, or ``fig.show()``) becomes one
output that holds both the interactive figure (plotly's own MIME type, which JupyterLab renders)
and a PNG of it, so a saved notebook still reads where no JavaScript runs (a code-hosting site, a
static export). The PNG is drawn by the same single Chromium that :mod:`interp.viz.export` uses.
Without Chromium the figures stay interactive only, and one log line says how to get the PNGs.

Usage, in a notebook's first cell::

    from interp.viz.notebook import show_static_images
    show_static_images()
"""

from __future__ import annotations

import base64
import logging

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io._base_renderers import MimetypeRenderer

__all__ = ["StaticPngRenderer", "show_static_images", "STATIC_RENDERER"]

logger = logging.getLogger(__name__)

# Name under which the PNG renderer is registered with plotly.
STATIC_RENDERER = "induction_cliff_png"

# Screen size of a figure that sets none, in CSS px; PNGs are drawn at 1 px per CSS px, which
# keeps a notebook with a dozen figures well under 1 MB.
_DEFAULT_SIZE = (700, 450)


class StaticPngRenderer(MimetypeRenderer):
    """A plotly renderer that adds an ``image/png`` of the figure to the output.

    Args:
        scale: pixels per CSS pixel of the PNG.
    """

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def to_mimebundle(self, fig_dict: dict) -> dict:
        """The PNG, base64-encoded, as Jupyter expects binary data in a MIME bundle."""
        from interp.viz.export import _get_server

        fig = go.Figure(fig_dict)
        width = fig.layout.width or _DEFAULT_SIZE[0]
        height = fig.layout.height or _DEFAULT_SIZE[1]
        image = _get_server().render(fig, "png", width, height, self.scale)
        return {"image/png": base64.b64encode(image).decode("ascii")}


def show_static_images(enabled: bool | None = None) -> str:
    """Make plotly figures in this kernel show interactively and as a PNG beside it.

    Args:
        enabled: ``True`` to add PNGs (an error without Chromium), ``False`` for interactive
            figures only, ``None`` (default) to add them when Chromium is found.

    Returns:
        The plotly renderer now in use: ``"plotly_mimetype+induction_cliff_png"`` or
        ``"plotly_mimetype"``.

    Raises:
        RuntimeError: ``enabled=True`` and no Chromium was found (the message says how to install
            it).
    """
    from interp.viz.export import _INSTALL_HINT, find_chromium

    pio.renderers[STATIC_RENDERER] = StaticPngRenderer()
    if enabled is None:
        enabled = find_chromium() is not None
        if not enabled:
            logger.warning("figures are interactive only, with no static PNG: %s", _INSTALL_HINT)
    elif enabled and find_chromium() is None:
        raise RuntimeError(_INSTALL_HINT)
    pio.renderers.default = f"plotly_mimetype+{STATIC_RENDERER}" if enabled else "plotly_mimetype"
    return pio.renderers.default
