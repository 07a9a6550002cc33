"""Stage 3, how a run trains (:class:`~interp.config.train_config.TrainConfig`: optimiser,
schedule, seed, device), below the run directory that records it and the training loop that
follows it. The task's
and the model's configs live beside their owners (:mod:`interp.data.task`,
:mod:`interp.model.network`)."""
