"""induction-cliff: train the network, measure, fit and forecast its loss cliff, draw figures.

examples:
  induction-cliff train --preset demo --out runs/demo
  induction-cliff train --preset paper-fig3 --set steps=60000 --seed 1 --out runs/fig3-s1
  induction-cliff train --resume --out runs/fig3-s1        # continue an interrupted run
  induction-cliff fit runs/fig3-s1                         # writes runs/fig3-s1/fit.json
  induction-cliff figures runs/demo --out runs/demo/figures --width single
  induction-cliff report runs/demo                         # writes runs/demo/report.html
  induction-cliff sweep --preset fig2-kb-quick --out runs/fig2-kb   # rerun it to resume
  induction-cliff --plugin my_measure.py train --preset tiny --out runs/t   # a new measure
  induction-cliff list measures                            # also positional, models, ...
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from interp.cli._base import make_parser, print_error
from interp.io.escape import for_terminal
from interp.train.overrides import build_configs, parse_overrides

__all__ = ["main", "make_parser", "parse_overrides", "build_configs"]


def _take_plugins(argv: list[str]) -> tuple[list[str], list[str]]:
    """``--plugin X`` / ``--plugin=X`` anywhere on the line -> (plugins, the other arguments)."""
    plugins, rest = [], []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            rest.extend([token, *tokens])
        elif token == "--plugin":
            value = next(tokens, None)
            if value is None or value.startswith("-"):
                raise ValueError("--plugin needs a value: a .py file or a module name")
            plugins.append(value)
        elif token.startswith("--plugin="):
            plugins.append(token.split("=", 1)[1])
        else:
            rest.append(token)
    return plugins, rest


def _check_runs_plugins(args) -> None:
    """Every command that opens a run (``RUN_DIR`` arguments, a fit's run-directory ``PATH``,
    ``train --resume --out``) first checks that the plugins the run was trained with are loaded:
    its metrics have their columns, its task or model may come from one."""
    named = [getattr(args, "run_dir", None)]
    named += [*(getattr(args, "run_dirs", None) or []), *(getattr(args, "paths", None) or [])]
    for path in named:
        if isinstance(path, str) and (Path(path) / "config.json").is_file():
            _check_recorded_plugins(path, "rerun with")
    out = getattr(args, "out", None)
    if getattr(args, "resume", False) and out and (Path(out) / "config.json").is_file():
        _check_recorded_plugins(out)


def _check_recorded_plugins(run_dir: str, what: str = "resume with") -> None:
    """A run trained with plugins is opened (or resumed) only with them loaded again; say which,
    rather than load code named in a file."""
    from interp.io.plugins import loaded_plugins
    from interp.io.rundir import recorded_plugins

    loaded = set(loaded_plugins())
    missing = [p for p in recorded_plugins(run_dir) if p not in loaded]
    if missing:
        again = " ".join(f"--plugin {p}" for p in missing)
        raise ValueError(
            f"{Path(run_dir) / 'config.json'} field plugins: the run was trained with {missing}; "
            f"{what} {again}"
        )


def _one_line(err: BaseException) -> str:
    """The first line of an exception's text (its type's name when it has none); printed only
    through :func:`interp.cli._base.print_error`, which escapes its control characters."""
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _TerminalFormatter(logging.Formatter):
    """The record's message with its control characters other than newlines and tabs shown
    escaped (:func:`interp.io.escape.for_terminal`): a note may quote a file or a library."""

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(super().format(record), lines=True)


def _setup_logging() -> None:
    """Library notes and warnings (``logging``) go to stderr as plain lines."""
    handler = _StderrHandler()
    handler.setFormatter(_TerminalFormatter("%(message)s"))
    for name in ("interp", "phenomenology"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``induction-cliff`` command.

    Every failure a user can cause ends in one line on stderr and a non-zero exit, the same code
    for the same kind of failure from every command (:mod:`interp.io.errors`,
    ``docs/run-format.md``): 2 invalid arguments or settings, 3 a run, sweep or file that cannot
    be used (or a diverged run), 4 a run or sweep another process is writing, 5 no space, no write
    access or not enough memory, 1 anything unexpected (``INDUCTION_CLIFF_TRACEBACK=1`` shows its
    traceback), 128 + the signal number when SIGINT or SIGTERM stopped training (its state saved).
    """
    try:
        plugins, argv = _take_plugins(sys.argv[1:] if argv is None else list(argv))
        from interp.io.plugins import load_plugins

        load_plugins(plugins)  # before parsing: registries they extend are read from here on
    except ValueError as err:
        print_error(err)
        return 2
    args = make_parser().parse_args(argv)
    _setup_logging()
    from interp.train.threads import apply_thread_policy

    apply_thread_policy()  # one torch thread; train's num_threads and llc's --threads override it
    from interp.io.rundir import register_lazy_run_kind

    # Every command reopens the minimal model's runs; its module (TransformerLens, pandas) is
    # imported only when one is opened.
    register_lazy_run_kind(
        "minimal_induction_head", "phenomenology.minimal", "MinimalConfig", "MinimalInductionHead"
    )
    from interp.io.errors import EXIT_UNEXPECTED, WriteError, exit_code
    from interp.io.interrupt import signal_of
    from interp.train.training import TrainingDiverged, TrainingInterrupted

    try:
        _check_runs_plugins(args)
        return args.func(args)
    except TrainingInterrupted as err:
        return 128 + err.signum
    except KeyboardInterrupt as err:  # 130 for Ctrl-C, 143 for SIGTERM (Interrupted.signum)
        return 128 + signal_of(err)
    except TrainingDiverged as err:
        print_error(_one_line(err))
        return 3
    except Exception as err:
        code = exit_code(err)
        if code == EXIT_UNEXPECTED:
            if os.environ.get("INDUCTION_CLIFF_TRACEBACK"):
                raise
            print_error(
                f"{type(err).__name__}: {_one_line(err)} (unexpected; rerun with "
                "INDUCTION_CLIFF_TRACEBACK=1 for the traceback)"
            )
        elif isinstance(err, OSError) and not isinstance(err, WriteError):
            where = f" {err.filename}" if getattr(err, "filename", None) else ""
            print_error(f"cannot access{where}: {err.strerror or _one_line(err)}")
        else:
            print_error(_one_line(err))
        return code
