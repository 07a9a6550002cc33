"""Stage 1, what a run is set to, validated without torch, below every stage that reads it: the
task's config (:mod:`interp.config.task_config`), the model's (:mod:`interp.config.model_config`)
with the positional encodings' registry and the rules a config asks of them
(:mod:`interp.config.positional`), how a run trains (:mod:`interp.config.train_config`) and whether
this machine can compile it (:mod:`interp.config.compiler`). A command that only builds or reads
configs (``forecast``, ``transition``) imports neither torch nor TransformerLens; the old paths
(:mod:`interp.data.task`, :mod:`interp.model.network`, :mod:`interp.model.positional`) re-export
them."""
