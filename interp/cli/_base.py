"""The parser every command shares: one-line usage errors, defaults shown, help without markup.

A command is one module of :mod:`interp.cli.commands` that declares ``NAME``, ``HELP`` (one
line), ``EPILOG`` (an example), ``add_arguments(parser)`` and ``run(args) -> int``;
:func:`make_parser` builds the whole command line from those modules.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from interp.io.escape import for_terminal

__all__ = [
    "OneLineErrors",
    "HelpFormatter",
    "make_parser",
    "plain",
    "command_modules",
    "print_error",
]

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def plain(text: str) -> str:
    """Text without reStructuredText markup, as a terminal shows it:
    ``:func:`~interp.a.b``` -> ``b``, ``:data:`interp.a.B``` -> ``interp.a.B``, double and
    single backquotes dropped, a closing ``::`` made ``:``."""

    def role(match: re.Match) -> str:
        target = match.group(1).strip()
        return target.rsplit(".", 1)[-1] if match.group(0).split("`")[1].startswith("~") else target

    text = _ROLE.sub(role, text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.M)


def print_error(message) -> None:
    """The one way an error line reaches the terminal: ``error: MESSAGE`` on stderr, one line,
    its control characters shown escaped (:func:`interp.io.escape.for_terminal`): a message that
    quotes a file, a directory name or a library's text cannot drive the terminal."""
    sys.stderr.write(f"error: {for_terminal(message)}\n")
    sys.stderr.flush()


class OneLineErrors(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``error: PROG: what``) and exit 2,
    like every other error of the command; ``-h`` still prints the whole usage. Sub-command
    parsers inherit the class. An ``epilog`` may be a function, called when help is shown (so
    that what it reads, e.g. the config classes, is imported only then)."""

    def error(self, message: str):
        print_error(f"{self.prog}: {message}")
        sys.exit(2)

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the layout of descriptions and epilogs (examples, tables) and appends
    ``(default: X)`` to every option whose help does not already say its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS, []):
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def command_modules() -> list:
    """The command modules, in the order ``--help`` lists them."""
    from interp.cli.commands import COMMANDS

    return [importlib.import_module(f"interp.cli.commands.{name}") for name in COMMANDS]


def make_parser() -> argparse.ArgumentParser:
    """The ``induction-cliff`` parser: the global ``--plugin`` option and one sub-parser per
    command module, each with its one-line description, its example and its arguments."""
    from interp import cli

    lines = (cli.__doc__ or "").strip().splitlines()
    parser = OneLineErrors(
        prog="induction-cliff",
        description=lines[0],
        epilog="\n".join(lines[1:]).strip()
        + "\n\nRun `induction-cliff COMMAND --help` for a command's options.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="PATH_OR_MODULE",
        help="import a .py file or module that registers measures, encodings or models, before "
        "the command runs (repeatable; may stand anywhere on the line; recorded in config.json "
        "by train)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in command_modules():
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.HELP[0].upper() + module.HELP[1:] + ".",
            epilog=module.EPILOG,
            formatter_class=HelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    return parser
