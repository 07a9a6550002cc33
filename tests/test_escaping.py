"""Text that reaches an HTML page goes through one escaper, text that reaches a terminal through
one sanitiser (:mod:`interp.io.escape`), and no module of the package escapes beside them."""

from __future__ import annotations

import ast
import json
import logging
import re
from pathlib import Path

import pytest

from interp.cli import main
from interp.io.escape import for_terminal, html_attr, html_text, json_for_script

ROOT = Path(__file__).resolve().parents[1]
ESCAPER = ROOT / "interp" / "io" / "escape.py"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"  # set the window title, clear the screen
TERMINAL_BYTES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # any control but the line's end


# ---- the escapers ----------------------------------------------------------------------------


def test_json_for_script_escapes_what_could_end_or_reopen_a_script_and_reads_back_unchanged():
    data = {"run": "x<!--<script>y", "a&b": "</script>\u2028\u2029", "n": [1, 2.5, None]}
    text = json_for_script(data)
    assert text == (
        '{"run":"x\\u003c!--\\u003cscript\\u003ey",'
        '"a\\u0026b":"\\u003c/script\\u003e\\u2028\\u2029","n":[1,2.5,null]}'
    )
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == data
    with pytest.raises(ValueError):
        json_for_script({"x": float("nan")})  # JSON.parse would reject the page's data


def test_html_text_and_attr_escape_markup_and_both_quotes():
    hostile = "x<!--<script>y\"'&"
    expected = "x&lt;!--&lt;script&gt;y&quot;&#x27;&amp;"
    assert html_text(hostile) == expected
    assert html_attr(hostile) == expected
    assert html_text(Path("a<b")) == "a&lt;b"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (HOSTILE, "\\x1b]0;pwned\\x07\\x1b[2J"),
        ("a\nb\r\tc\x00", "a\\nb\\r\\tc\\x00"),
        ("del\x7f csi\x9b nel\x85", "del\\x7f csi\\x9b nel\\x85"),
        ("ls\u2028ps\u2029 rlo\u202e iso\u2066", "ls\\u2028ps\\u2029 rlo\\u202e iso\\u2066"),
        ("bad byte \udcff", "bad byte \\xff"),  # os.fsdecode of an undecodable file name
        ("plain: é ü 中 \\x1b", "plain: é ü 中 \\x1b"),  # printable text and backslashes kept
    ],
)
def test_for_terminal_shows_control_characters_escaped(text, shown):
    assert for_terminal(text) == shown
    shown.encode("utf-8")  # writable to any UTF-8 terminal


def test_for_terminal_keeps_lines_and_tabs_only_when_asked():
    assert for_terminal("a\n\tb\x1b", lines=True) == "a\n\tb\\x1b"
    assert for_terminal("a\n\tb\x1b") == "a\\n\\tb\\x1b"


# ---- the command line ------------------------------------------------------------------------


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not TERMINAL_BYTES.search(err), repr(err)
    return lines[0]


def test_a_config_json_whose_plugins_hold_terminal_escapes_is_refused_without_them(
    tmp_path, capsys
):
    from interp.io.rundir import configs_dict
    from interp.model.network import ModelConfig
    from interp.train.presets import get_preset

    preset = get_preset("tiny")
    config = configs_dict(preset.task, ModelConfig.from_task(preset.task), preset.train)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config | {"plugins": [HOSTILE]}))
    assert main(["report", str(run), "--no-fit"]) == 2
    line = _one_error_line(capsys)
    assert f"{run / 'config.json'} field plugins" in line
    assert "--plugin \\x1b]0;pwned\\x07\\x1b[2J" in line
    assert list(run.iterdir()) == [run / "config.json"]  # nothing written


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        # a library's message (torch's CUDA errors are one such) with escapes and a second line
        (
            RuntimeError("CUDA error: \x1b[31mdevice-side assert\x1b[0m\ndetail"),
            1,
            "error: RuntimeError: CUDA error: \\x1b[31mdevice-side assert\\x1b[0m (unexpected;",
        ),
        (ValueError(f"field x: {HOSTILE!s} is invalid"), 2, "field x: \\x1b]0;pwned\\x07"),
        (
            FileNotFoundError(2, "No such file or directory", f"runs/{HOSTILE}"),
            3,
            "error: cannot access runs/\\x1b]0;pwned\\x07\\x1b[2J: No such file",
        ),
    ],
)
def test_a_library_error_with_terminal_escapes_is_one_sanitised_line(
    monkeypatch, capsys, error, code, words
):
    import interp.cli.commands.presets as presets_command

    def fail(args):
        raise error

    monkeypatch.setattr(presets_command, "run", fail)
    assert main(["presets"]) == code
    assert words in _one_error_line(capsys)


def test_usage_and_plugin_errors_are_sanitised(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["presets", f"--{HOSTILE}"])
    assert stop.value.code == 2
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in _one_error_line(capsys)
    assert main(["--plugin", f"no_such_module_{HOSTILE}", "presets"]) == 2
    assert "no_such_module_\\x1b]0;pwned" in _one_error_line(capsys)


def test_library_log_lines_keep_their_lines_but_not_their_escapes(capsys):
    from interp.cli import _setup_logging

    _setup_logging()
    logging.getLogger("interp.viz.report").warning("fit of %s failed:\n%s", "runs/a", HOSTILE)
    assert capsys.readouterr().err == "fit of runs/a failed:\n\\x1b]0;pwned\\x07\\x1b[2J\n"


# ---- no escaping beside the escapers ---------------------------------------------------------

# The rule, over every module of the package and of the checkout's experiments/, the escaper
# aside: (1) nothing imports the standard library's ``html`` (its ``escape`` is reached through
# html_text / html_attr only); (2) no ``.replace(OLD, ...)`` whose OLD is a string holding ``<``,
# ``>`` or ``&`` (escaping by hand, e.g. ``.replace("</", "<\\/")``); (3) no call passes
# ``escape=False`` (pandas' ``to_html`` escapes its cells by default); (4) a module that writes a
# ``<script`` element calls no ``json.dumps``/``json.dump`` (its data goes through
# json_for_script). Exception, by design: plotly's ``Figure.to_html`` embeds a figure's JSON
# escaped by plotly itself (``<``, ``>`` and ``/`` as ``\u`` escapes).
SOURCES = sorted(
    p
    for package in ("interp", "phenomenology", "experiments")
    for p in (ROOT / package).rglob("*.py")
    if p != ESCAPER
)


def _strings(tree: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _html_escaping_beside_the_escaper(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(root)
    found = []
    writes_script = any("<script" in s for s in _strings(tree))
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import) and any(a.name == "html" for a in node.names):
            found.append(f"{line}: import html")
        elif isinstance(node, ast.ImportFrom) and node.module == "html" and node.level == 0:
            found.append(f"{line}: from html import")
        elif isinstance(node, ast.Call):
            func = node.func
            first = node.args[0] if node.args else None
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "replace"
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and set("<>&") & set(first.value)
            ):
                found.append(f"{line}: .replace({first.value!r}, ...)")
            if any(
                k.arg == "escape" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in node.keywords
            ):
                found.append(f"{line}: escape=False")
            if (
                writes_script
                and isinstance(func, ast.Attribute)
                and func.attr in ("dumps", "dump")
                and isinstance(func.value, ast.Name)
                and func.value.id == "json"
            ):
                found.append(f"{line}: json.{func.attr} in a module that writes <script>")
    return found


def test_no_module_escapes_html_beside_the_escaper():
    assert len(SOURCES) > 100  # the scan sees the package
    found = [hit for path in SOURCES for hit in _html_escaping_beside_the_escaper(path)]
    assert found == []


def test_the_html_rule_catches_hand_rolled_escaping(tmp_path):
    planted = tmp_path / "page.py"
    planted.write_text(
        "import html\nimport json\n"
        "def page(d, df):\n"
        "    body = json.dumps(d).replace('</', '<\\\\/')\n"
        "    return f'<script>{body}</script>' + df.to_html(escape=False) + html.escape('x')\n"
    )
    found = _html_escaping_beside_the_escaper(planted, tmp_path)
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        ".replace('</', ...)",
        "escape=False",
        "import html",
        "json.dumps in a module that writes <script>",
    ]


# The rule for the terminal, over interp/cli/: an error line is written by print_error only (no
# other string of the command line begins "error:", and only print_error writes to
# sys.stderr directly).
CLI = sorted((ROOT / "interp" / "cli").rglob("*.py"))


def _error_lines_beside_print_error(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "print_error":
            inside |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        line = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        # a literal or the literal head of an f-string
        if isinstance(node, ast.Constant) and str(node.value).startswith("error:"):
            found.append(f"{line}: {node.value[:30]!r}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "write"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "stderr"
        ):
            found.append(f"{line}: sys.stderr.write")
    return found


def test_every_error_line_of_the_command_line_goes_through_print_error():
    assert len(CLI) > 10
    found = [hit for path in CLI for hit in _error_lines_beside_print_error(path)]
    assert found == []


def test_the_terminal_rule_catches_an_error_line_beside_print_error(tmp_path):
    planted = tmp_path / "command.py"
    planted.write_text(
        "import sys\n"
        "def print_error(m):\n    sys.stderr.write(f'error: {m}')\n"
        "def run(args, err):\n    print(f'error: {err}', file=sys.stderr)\n"
        "    sys.stderr.write('x')\n"
    )
    found = _error_lines_beside_print_error(planted, tmp_path)
    assert sorted(f.split(": ", 1)[1] for f in found) == ["'error: '", "sys.stderr.write"]
