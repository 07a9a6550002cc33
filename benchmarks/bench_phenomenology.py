"""Timings of the phenomenology package: trajectories and fits.

Targets: a 1e5-step trajectory under 1 s, one fit under 10 s, one forecast
fit (the fit on 80% of the plateau with its 50-replicate bootstrap interval) under 10 s. Run with
``python benchmarks/bench_phenomenology.py [--repeats 5]``; prints medians (and min / max).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from phenomenology.fit import NestedLogitFit, fit_curve
from phenomenology.landscape import gradient_descent, gradient_flow, landscape_grid

TASK = {"L": 32, "N": 8, "B": 2}
START = (-6.0, 0.0, 0.5)


def _time(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _report(name: str, times: list[float], target: float | None = None) -> None:
    med = statistics.median(times)
    verdict = "" if target is None else ("  OK" if med < target else f"  OVER {target:g} s")
    print(f"{name:<48s} median {med:8.3f} s  (min {min(times):.3f}, max {max(times):.3f}){verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    r = args.repeats

    _report(
        "gradient descent, 1e5 steps, every step kept",
        _time(lambda: gradient_descent(START, **TASK, lr=0.01, steps=100_000), r),
        target=1.0,
    )
    _report(
        "gradient flow (LSODA), t in [0, 1000], 1e5 points",
        _time(lambda: gradient_flow(START, **TASK, t_max=1000.0, n_points=100_000), r),
        target=1.0,
    )
    _report(
        "landscape grid 201 x 201",
        _time(
            lambda: landscape_grid(
                "alpha",
                "xi",
                {"alpha": (0, 8), "xi": (0, 20)},
                {"beta1": -2.0},
                **TASK,
                n_points=201,
            ),
            r,
        ),
    )

    steps = np.arange(0.0, 100_001.0, 250.0)  # a 1e5-step run evaluated every 250 steps
    truth = gradient_flow(START, **TASK, t_eval=steps / 150.0)
    rng = np.random.default_rng(0)
    y = truth["loss"].to_numpy() + rng.normal(0.0, 0.02, steps.size)
    _report(
        f"fit IC loss ({steps.size} points)",
        _time(lambda: NestedLogitFit(**TASK).fit(steps, y), max(1, r // 2)),
        target=10.0,
    )
    import pandas as pd

    curve = pd.DataFrame({"step": steps, "ic_loss": y})
    _report(
        "forecast fit: IC loss, 80% of the plateau, interval",
        _time(
            lambda: fit_curve(curve, task=TASK, fraction=0.8, options={"free_floor": False}),
            max(1, r // 2),
        ),
        target=10.0,
    )
    Y = pd.DataFrame(
        {
            "ic_loss": y,
            "cla": truth["cla"] + rng.normal(0.0, 0.02, steps.size),
            "ila1": 0.1 + 0.8 * truth["s1"] + rng.normal(0.0, 0.02, steps.size),
            "tila2": truth["p"] + rng.normal(0.0, 0.02, steps.size),
        }
    )
    _report(
        "fit IC loss + CLA + ILA1 + TILA2 jointly",
        _time(
            lambda: NestedLogitFit(**TASK, aux=("cla", "ila1", "tila2")).fit(steps, Y),
            max(1, r // 2),
        ),
        target=10.0,
    )


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
