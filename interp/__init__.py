"""induction-cliff: Reddy's in-context classification task, its network, probes and figures.

The subpackages are the pipeline's stages, numbered as in docs/contributing.md (each imports only
itself and the stages before it): 1 :mod:`interp.data` (the task), 2 :mod:`interp.model` (the
network), 3 :mod:`interp.config` (how a run trains), 4 :mod:`interp.io` (the run directory),
5 :mod:`interp.train` (the training loop), 6 :mod:`interp.analysis` (progress measures, evaluation,
transitions), 7 :mod:`phenomenology` (dynamics models, fits and forecasts), 8 :mod:`interp.viz`
(figures), 9 :mod:`interp.experiments` (orchestration: the standard run, sweeps, experiments) and
10 :mod:`interp.cli`, the command line on top. Below them all, :mod:`interp.registry` is the one
registry mechanism every kind of plug-in uses.

``import interp`` imports nothing heavy; the main user API and the registries are reached lazily
(loaded on first use, so that ``import interp.cli`` stays light)::

    from interp import TaskConfig, ModelConfig, TrainConfig, InductionNet, load_run
    from interp import register_measure, MEASURES            # progress measures
    from interp import register_positional, PositionalEncoding  # positional encodings

The training entry point is :func:`interp.train.training.train` (``interp.train`` is the
training subpackage, so the function is not re-exported under that name).
"""

from __future__ import annotations

import importlib

# name -> module that defines it
_LAZY = {
    "TaskConfig": "interp.data.task",
    "ModelConfig": "interp.model.network",
    "InductionNet": "interp.model.network",
    "TrainConfig": "interp.config.train_config",
    "load_run": "interp.io.rundir",
    "MEASURES": "interp.analysis.measures",
    "get_measure": "interp.analysis.measures",
    "register_measure": "interp.analysis.measures",
    "register_positional": "interp.model.positional",
    "PositionalEncoding": "interp.model.positional",
    "POSITIONAL_ENCODINGS": "interp.model.positional",
}

__all__ = sorted(_LAZY)


def _version() -> str:
    """The installed distribution's version; for a checkout imported without installing it,
    the version in its pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("induction-cliff")
    except PackageNotFoundError:
        import re
        from pathlib import Path

        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
        return re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)


def __getattr__(name: str):
    if name == "__version__":
        return _version()
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, "__version__"])
