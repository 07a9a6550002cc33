"""Stage 2, the data: Reddy's in-context classification task (:mod:`interp.data.task`: sequences,
the IC / IC2 / IW evaluation sets, batch metadata), which every later stage draws its batches
from, and CoPE's own token tasks (:mod:`interp.data.cope_tasks`: flip-flop, selective copy and
counting, with the small token network and the comparison of encodings that make them a positive
control)."""

# The built-in tasks register themselves (interp.data.tasks: the standard task; CoPE's token
# tasks; the in-context task as token ids).
from interp.data import cope_tasks, tasks, token_task  # noqa: E402, F401
