"""Stage 3, the model: the paper's hooked attention-only network (:mod:`interp.model.network`), its
attention layer, the positional-encoding registry, the hook-free fast path that training runs on,
several seeds stacked as one computation, and training-time interventions on attention heads. A
model here knows nothing of runs, files or training loops."""
