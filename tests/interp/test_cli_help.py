"""The command line explains itself: every command's help, the ``--set`` keys from the config
classes, one-line usage errors, a progress bar only on a terminal, and a parser built from small
command modules."""

import argparse
import ast
import re
import shlex
from pathlib import Path

import pytest

from interp import cli
from interp.cli._base import command_modules, make_parser, plain
from interp.train.overrides import build_configs, field_docs, settable_fields

ROOT = Path(__file__).resolve().parents[2]
MARKUP = re.compile(r"``|:(func|data|class|meth|mod|attr):`")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_has_a_description_an_example_and_its_defaults():
    parser = make_parser()
    commands = _subparsers(parser)
    assert set(commands) >= {
        "train",
        "measures",
        "transition",
        "fit",
        "figures",
        "quanta",
        "report",
        "evaluate",
        "sweep",
        "sweep-summary",
        "llc",
        "presets",
        "list",
    }
    for name, sub in commands.items():
        text = sub.format_help()
        assert sub.description and len(sub.description.splitlines()) == 1, name
        assert "example" in text and "induction-cliff " + name in text, name
        assert not MARKUP.search(text), (name, MARKUP.search(text))
        for action in sub._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            assert action.help, (name, action.option_strings)
            if action.default not in (None, False, []) and action.dest != "help":
                assert "default" in sub._get_formatter()._get_help_string(action), (
                    name,
                    action.option_strings,
                )
    assert "--n-boot N_BOOT" in commands["fit"].format_help()
    assert "(default: 50)" in commands["fit"].format_help()


def test_positional_arguments_have_the_same_names_everywhere():
    allowed = {"RUN_DIR", "PATH", "SWEEP_DIR", "REGISTRY", "EXPERIMENT"}
    for name, sub in _subparsers(make_parser()).items():
        for action in sub._actions:
            if not action.option_strings and action.dest != "help":
                assert action.metavar in allowed, (name, action.dest, action.metavar)


def test_every_example_in_the_help_parses():
    parser = make_parser()
    examples = []
    for sub in _subparsers(parser).values():
        epilog = sub.epilog() if callable(sub.epilog) else sub.epilog
        examples += [x for x in epilog.splitlines() if x.startswith("  induction-cliff ")]
    examples += [x for x in parser.epilog.splitlines() if x.startswith("  induction-cliff ")]
    assert len(examples) > 20
    for line in examples:
        argv = shlex.split(line.split("#")[0])[1:]
        argv = [a for i, a in enumerate(argv) if a != "--plugin" and argv[i - 1] != "--plugin"]
        assert parser.parse_args(argv).func, line


def test_train_help_lists_every_set_key_with_type_default_and_meaning():
    text = _subparsers(make_parser())["train"].format_help()
    fields = settable_fields()
    for f in fields:
        assert re.search(rf"^    {re.escape(f.key)} +{re.escape(f.type)} = ", text, re.M), f.key
        assert f.doc, f"{f.group}.{f.key} has no entry in its class's Attributes docstring"
    assert "K                   int = 512: number of classes; must be a multiple of L." in text
    assert "  model (RopeConfig, with positional=rope):\n    rope_base " in text
    assert {f.owner for f in fields} >= {"TaskConfig", "ModelConfig", "TrainConfig"}
    assert not MARKUP.search(text)
    # the keys shown are exactly the keys --set accepts
    with pytest.raises(ValueError, match="allowed keys are") as err:
        build_configs("demo", {"no_such_key": "1"}, None)
    allowed = set(ast.literal_eval(str(err.value).split("allowed keys are ")[1]))
    assert allowed == {f.key for f in fields}


def test_field_docs_reads_an_attributes_section():
    class Example:
        """Summary.

        Attributes:
            a: first line
                continued here.
            b_c (int): typed entry.

        Raises:
            nothing: not an attribute.
        """

    assert field_docs(Example) == {"a": "first line continued here.", "b_c": "typed entry."}


def test_plain_drops_markup():
    assert plain("see :func:`~interp.a.fast_logits` and :data:`interp.b.X`") == (
        "see fast_logits and interp.b.X"
    )
    assert plain("``none`` or `x`; an example::") == "none or x; an example:"


def test_usage_errors_are_one_line(capsys):
    for argv in (["train", "--no-such-option"], ["list", "nothing"], ["frobnicate"], []):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: induction-cliff"), (argv, err)


def test_progress_bar_only_on_a_terminal(tmp_path, capsys):
    args = [
        "train",
        "--preset",
        "tiny",
        "--set",
        "steps=20",
        "--set",
        "eval_every=10",
        "--set",
        "num_threads=1",
        "--set",
        "n_log_checkpoints=0",
        "--set",
        "n_eval=64",
        "--set",
        "live_forecast=false",
    ]
    # capsys's stderr is not a terminal: no bar unless asked for
    assert cli.main([*args, "--out", str(tmp_path / "a")]) == 0
    quiet = capsys.readouterr().err
    assert "step/s" not in quiet and "\r" not in quiet and len(quiet) < 1000
    assert cli.main([*args, "--out", str(tmp_path / "b"), "--progress"]) == 0
    forced = capsys.readouterr().err
    assert "20/20" in forced and "step" in forced


def test_the_command_line_is_small_modules_of_small_functions():
    files = sorted((ROOT / "interp" / "cli").rglob("*.py"))
    assert len(files) >= 10
    for path in files:
        source = path.read_text()
        assert len(source.splitlines()) <= 800, path
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno + 1 <= 100, (path.name, node.name)
    for module in command_modules():
        assert {"NAME", "HELP", "EPILOG", "add_arguments", "run"} <= set(dir(module)), module


def test_the_contributing_guide_command_is_one_module(tmp_path, monkeypatch, capsys):
    """docs/contributing.md's "Add a command" example, as written, becomes a working command."""
    import sys
    import types

    import interp.cli.commands as commands
    from tests.interp.tiny_runs import tiny_run

    page = (ROOT / "docs" / "contributing.md").read_text()
    section = page.split("## Add a command", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("interp.cli.commands.summary")
    exec(compile(code, "summary.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "interp.cli.commands.summary", module)
    monkeypatch.setattr(commands, "COMMANDS", (*commands.COMMANDS, "summary"))
    run = tiny_run(tmp_path / "run", steps=20)
    assert cli.main(["summary", str(run)]) == 0
    out = capsys.readouterr().out.split()
    assert out[0] == str(run) and 0 <= float(out[1]) <= 1
    assert "summary" in _subparsers(make_parser())
    assert "(default: ic_acc)" in _subparsers(make_parser())["summary"].format_help()


def test_train_help_reads_the_set_keys_without_the_model_stack():
    """``train --help`` lists the keys from the config classes themselves: no torch, no
    TransformerLens are imported (they cost seconds)."""
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from interp.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['train', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'rope_base' in out.getvalue() and 'sample_on' in out.getvalue()\n"
        "heavy = {'torch', 'transformer_lens', 'pandas', 'numpy'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
