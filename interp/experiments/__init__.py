"""Orchestration, above every other stage: the standard run (:mod:`interp.experiments.standard`:
the one training loop with the standard evaluation and the live forecast handed in), and sweeps
that train, summarise and draw one run per point of a grid (:mod:`interp.experiments.sweep`)."""
