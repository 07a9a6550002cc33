"""Stage 1, the data: Reddy's in-context classification task (:mod:`interp.data.task`: sequences,
the IC / IC2 / IW evaluation sets, batch metadata) and CoPE's own token tasks
(:mod:`interp.data.cope_tasks`). Nothing here trains or measures; everything downstream draws its
batches from here."""
