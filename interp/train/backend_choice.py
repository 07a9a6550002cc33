"""``backend="auto"``: the faster training loss for the run in front of it, chosen from facts of
the run and the machine only.

``compiled`` (:mod:`interp.model.compiled`) makes each step faster, but its first step compiles:
about 48 s of CPU with an empty compile cache, about 5 s when the cache already holds these shapes
(``train --preset paper-fig3 --set steps=1``, 1 thread: 58.0 s CPU compiled with the cache empty,
14.2 s with it warm, 9.7 s with ``backend=fast``). It pays for itself only past a break-even
number of steps, ``compile cost / per-step gain``; below it, ``fast`` finishes first. ``auto``
takes ``compiled`` when the steps left exceed the break-even and the compiled loss applies (the
two-layer one-hot network on the CPU, no training hooks, a C++ compiler), else ``fast``; and says
which, and why, in one line on stderr. The run records the backend that trained it in
``config.json`` (``trained_backends``, docs/run-format.md).

The compile cost in the break-even is always the one of an empty cache (:data:`COLD_COMPILE_S`),
never what the cache folder holds now: the two backends agree only to float rounding, so a choice
that followed the cache would train the same command on the same machine once ``fast`` (cache
empty) and once ``compiled`` (cache warm), with two different answers. With the cold figure a
run that compiles repays the compile even when it has to compile from nothing, and a warm cache
only makes it finish sooner.
"""

from __future__ import annotations

import logging
import math
from typing import Any

__all__ = ["choose_backend", "break_even_steps", "STEP_GAIN_S", "COLD_COMPILE_S"]

log = logging.getLogger(__name__)

# Per-step gain of compiled over fast on the paper's network, batch 128, one thread: 7.80 ->
# 6.59 ms (benchmarks/bench_train.py, "compiled/fast"); scaled by batch size for other batches.
STEP_GAIN_S = 1.2e-3
COLD_COMPILE_S = 48.0  # CPU seconds of the first compiled step, compile cache empty (see above)


def break_even_steps(compile_s: float, batch_size: int) -> int:
    """Steps after which a compile of ``compile_s`` CPU seconds has paid for itself."""
    return math.ceil(compile_s / (STEP_GAIN_S * batch_size / 128))


def choose_backend(run: Any) -> str:
    """The backend ``run`` trains with: ``run.cfg.backend`` when the user named one, else the
    faster of ``fast`` and ``compiled`` for the steps left (logged in one line), from the run's
    model, device, hooks, batch size and steps left and the machine's C++ compiler only (never
    from the compile cache's contents: see the module docstring)."""
    cfg = run.cfg
    if cfg.backend != "auto":
        return cfg.backend
    from interp.model.compiled import check_compiler, supports_compile

    steps_left = cfg.steps - run.step
    if run.hooks or getattr(run, "task", None) is None or not supports_compile(run.model):
        choice, why = "fast", "the compiled loss does not apply to this model or device"
    else:
        even = break_even_steps(COLD_COMPILE_S, cfg.batch_size)
        choice = "compiled" if steps_left > even else "fast"
        why = (
            f"{steps_left} steps {'>' if choice == 'compiled' else '<='} break-even {even} "
            f"({COLD_COMPILE_S:.0f} s compile)"
        )
        if choice == "compiled":  # the compiler is looked for (importing it) only when needed
            try:
                check_compiler(cfg.device)
            except ValueError:
                choice, why = "fast", "no C++ compiler for torch.compile"
    log.info("backend: %s (auto: %s)", choice, why)
    return choice
