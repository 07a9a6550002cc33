"""The one escaper for text that reaches an HTML page and the one sanitiser for text that reaches a
terminal.

HTML (the report, the attention explorer): every string the package puts into a page goes through
:func:`html_text` (element content), :func:`html_attr` (a quoted attribute value) or
:func:`json_for_script` (data inside a ``<script>`` element); no other module escapes by hand
(``tests/test_escaping.py`` checks this). A run directory may be named ``x<!--<script>y``: inside
a ``<script>`` element such text would switch the HTML parser into a state where ``</script>`` no
longer ends the element, so :func:`json_for_script` writes ``<``, ``>`` and ``&`` (and the line
separators U+2028 / U+2029) as JSON ``\\u`` escapes, which ``JSON.parse`` reads back unchanged.
Figures embedded with plotly's ``Figure.to_html`` are escaped by plotly itself the same way.

Terminal (the command line's error, warning and log lines): :func:`for_terminal` shows control
characters escaped (``\\x1b``, ``\\n``), so that text read from a file (``config.json``, a
directory name) or an exception's message cannot set the window title, clear the screen or split
one error line into several.
"""

from __future__ import annotations

import html
import json
import re

__all__ = ["json_for_script", "html_text", "html_attr", "for_terminal"]

# Inside <script>: "<" could open "<!--" or "</script", ">" close "-->", "&" is escaped for
# symmetry with the HTML escapes; U+2028/U+2029 end a line in older JavaScript parsers.
_SCRIPT_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def json_for_script(obj) -> str:
    """``obj`` as JSON that is safe as the content of a ``<script>`` element.

    Args:
        obj: JSON-able data (no NaN or infinity: ``JSON.parse`` rejects them).

    Returns:
        Compact JSON in which ``<``, ``>``, ``&``, U+2028 and U+2029 appear only as ``\\u003c``,
        ``\\u003e``, ``\\u0026``, ``\\u2028``, ``\\u2029`` (outside strings JSON has none of them).

    Raises:
        ValueError: ``obj`` holds NaN or infinity.
        TypeError: ``obj`` holds something JSON cannot represent.
    """
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_ESCAPES)


def html_text(text) -> str:
    """``text`` (or ``str(text)``) escaped as the content of an HTML element: ``&``, ``<``,
    ``>``, ``"`` and ``'`` as character references."""
    return html.escape(str(text), quote=True)


def html_attr(text) -> str:
    """``text`` (or ``str(text)``) escaped as a quoted HTML attribute value (single or double
    quotes): the same references as :func:`html_text`."""
    return html.escape(str(text), quote=True)


# C0 controls (tab and newline included), DEL, C1 controls, the line and paragraph separators,
# the bidirectional embeddings, overrides and isolates (they reorder what a line shows), and
# lone surrogates (an undecodable byte of a file name, which no terminal encoding can write).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CONTROL_KEEP_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match) -> str:
    char = match.group(0)
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that os.fsdecode could not decode
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def for_terminal(text, *, lines: bool = False) -> str:
    """``text`` (or ``str(text)``) as it may be written to a terminal: control characters shown
    escaped, as Python writes them in a string literal.

    Args:
        text: what to show (a message, a path, an exception's text).
        lines: keep newlines and tabs (a multi-line note); by default they are escaped too, so
            the result is one line.

    Returns:
        The text with every C0 control (``\\t``, ``\\n``, ``\\r`` by name, the others as
        ``\\x1b``), DEL and C1 control (``\\x7f``, ``\\x9b``), line or paragraph separator and
        bidirectional control (``\\u202e``) escaped, and a lone surrogate (an undecodable byte
        of a file name) shown as the byte (``\\xff``). Everything else, backslashes included,
        is kept.
    """
    pattern = _CONTROL_KEEP_LINES if lines else _CONTROL
    return pattern.sub(_escaped, str(text))
