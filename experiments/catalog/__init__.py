"""The declared experiments, one module each; importing :mod:`experiments` imports every module
here and each registers its :class:`~interp.experiments.core.Experiment`."""
