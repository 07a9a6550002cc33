"""Stage 3, training: the one training loop (:mod:`interp.train.training`) and how it is configured
(:class:`~interp.train.train_config.TrainConfig`, named presets, ``--set`` overrides, ``--plugin``
modules), and sweeps that train one run per point of a grid (in process, in a process pool or on
Ray)."""
