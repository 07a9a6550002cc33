"""The declared experiments, one module each; :mod:`interp.experiments` imports every module
here and each registers its :class:`~interp.experiments.core.Experiment`."""
