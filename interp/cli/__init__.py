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

import importlib.abc
import importlib.util
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


def _raised_by_training(err: BaseException, name: str) -> bool:
    """Whether ``err`` is training's exception ``name`` (``TrainingInterrupted``,
    ``TrainingDiverged``). Only training raises them, so they are looked up where its module is
    already imported: a command that trains nothing does not import it (nor torch and
    TransformerLens with it) to name them."""
    training = sys.modules.get("interp.train.training")
    return training is not None and isinstance(err, getattr(training, name))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``then()`` once the module ``name`` has been imported, by whatever imports it first
    (a finder consulted before the others, once: it then steps aside)."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, then = loader.exec_module, self.then

        def exec_then(module) -> None:
            exec_module(module)
            then()

        loader.exec_module = exec_then
        return spec


def _apply_thread_policy() -> None:
    """One torch thread in every command (:func:`interp.train.threads.apply_thread_policy`;
    train's ``num_threads`` and llc's ``--threads`` override it): applied now if torch is
    imported, else as soon as anything imports it, so that a command that runs no model does not
    import torch for its policy."""
    from interp.train.threads import apply_thread_policy

    if "torch" in sys.modules:
        apply_thread_policy()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("torch", apply_thread_policy))


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
    _apply_thread_policy()
    from interp.io.run_kinds import register_lazy_run_kind

    # Every command reopens the minimal model's runs; its module (TransformerLens, pandas) is
    # imported only when one is opened.
    register_lazy_run_kind(
        "minimal_induction_head", "phenomenology.minimal", "MinimalConfig", "MinimalInductionHead"
    )
    from interp.io.errors import EXIT_UNEXPECTED, WriteError, exit_code
    from interp.io.interrupt import signal_of

    try:
        _check_runs_plugins(args)
        return args.func(args)
    except KeyboardInterrupt as err:  # 130 for Ctrl-C, 143 for SIGTERM (Interrupted.signum)
        if _raised_by_training(err, "TrainingInterrupted"):
            return 128 + err.signum
        return 128 + signal_of(err)
    except Exception as err:
        if _raised_by_training(err, "TrainingDiverged"):
            print_error(_one_line(err))
            return 3
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
