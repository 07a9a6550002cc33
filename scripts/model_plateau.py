"""What the nested-logit model's plateau does: its loss along gradient descent, up to the cliff.

Usage: ``python scripts/model_plateau.py`` prints the table of docs/science.md section 4 (task
L = 32, N = 8, B = 1, so n = 8 context labels and ``log n = 2.079``; plain gradient descent at
lr 0.01 from ``beta1 = -2`` and ``-6`` with ``alpha = xi = 0``), as markdown.
``tests/phenomenology/test_model_plateau.py`` checks that the page shows this output.

For each start: the cliff step (``phenomenology.landscape.detect_cliff``, the steepest drop in
log-step), then the loss, ``xi``, ``alpha``, ``beta1`` and accuracy at the start, at the end of the
fast early drop (the plateau's start, as ``detect_cliff`` reads it), at half the cliff step and at
the cliff's onset (the plateau's end).
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASK = {"L": 32, "N": 8, "B": 1}
LR = 0.01
STARTS = (-2.0, -6.0)


@functools.cache
def rows(beta1_0: float) -> list[dict]:
    import numpy as np

    from phenomenology.landscape import detect_cliff, gradient_descent

    steps = 100_000  # both cliffs come well before
    df = gradient_descent((beta1_0, 0.0, 0.0), **TASK, lr=LR, steps=steps, record_every=10)
    c = detect_cliff(df["step"].to_numpy(float) + 1, df["loss"].to_numpy())
    out = []
    points = (
        ("start", 0),
        ("plateau start", c.plateau_start - 1),
        ("half the cliff step", (c.transition - 1) / 2),
        ("onset (plateau end)", c.onset - 1),
    )
    for what, step in points:
        r = df.iloc[int(np.searchsorted(df["step"], step))]
        out.append(
            {
                "beta1_0": beta1_0,
                "cliff": int(c.transition - 1),
                "point": what,
                "step": int(r["step"]),
                "loss": r["loss"],
                "xi": r["xi"],
                "alpha": r["alpha"],
                "beta1": r["beta1"],
                "acc": r["acc"],
            }
        )
    return out


def table() -> str:
    n = TASK["N"] // TASK["B"]
    lines = [
        "| start `beta1` | cliff step | point | step | loss "
        "| `xi` | `alpha` | `beta1` | accuracy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in STARTS:
        for r in rows(b):
            lines.append(
                f"| {r['beta1_0']:g} | {r['cliff']} | {r['point']} | {r['step']} | "
                f"{r['loss']:.3f} | {r['xi']:.2f} | {r['alpha']:.2f} | {r['beta1']:.2f} | "
                f"{r['acc']:.3f} |"
            )
    lines.append("")
    lines.append(
        f"(L = {TASK['L']}, N = {TASK['N']}, B = {TASK['B']}: `log L` = "
        f"{math.log(TASK['L']):.3f}, `log n` = {math.log(n):.3f}; gradient descent at lr {LR:g}.)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
