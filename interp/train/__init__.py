"""Stage 5, training: the one training loop (:mod:`interp.train.training`) and how a run is set up
(named presets, ``--set`` overrides of :class:`~interp.config.train_config.TrainConfig` and the
task's and model's configs, the torch thread policy), and the token tasks' training. Sweeps, which
train one run per point of a grid, are orchestration (:mod:`interp.experiments.sweep`)."""
