"""Overhead of the live forecast during training (target: under 1% of training time).

Trains the same run twice, with ``live_forecast`` on and off (same seed, one thread), and prints
the wall times and their ratio, and, from the run with it on, the time spent inside the forecast
itself against the whole run (robust on a shared machine, where two wall times differ by more than
the forecast costs), and how many evaluations got a forecast. The first forecast of a
process builds the model's trajectory bank for the task (a few seconds, counted here)::

    python benchmarks/bench_live_forecast.py [--preset demo] [--steps N] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd


def _train(preset: str, out: Path, live: bool, steps: int | None) -> float:
    from interp.cli import main

    args = ["train", "--preset", preset, "--out", str(out), "--quiet", "--overwrite"]
    args += ["--set", "num_threads=1", "--set", f"live_forecast={str(live).lower()}"]
    if steps:
        args += ["--set", f"steps={steps}"]
    t0 = time.perf_counter()
    if main(args) != 0:
        raise SystemExit(f"training failed: {args}")
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--preset", default="demo")
    p.add_argument("--steps", type=int, default=None, help="override the preset's steps")
    p.add_argument("--out", default=None, help="folder for the two runs (default: a temp dir)")
    args = p.parse_args()
    base = Path(args.out or tempfile.mkdtemp(prefix="bench_live_"))
    import phenomenology.live as live

    spent = []
    inner = live.live_forecast

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent.append(time.perf_counter() - t0)

    live.live_forecast = timed  # LiveForecast looks it up in its module at each evaluation
    off = _train(args.preset, base / "off", False, args.steps)
    on = _train(args.preset, base / "on", True, args.steps)
    live.live_forecast = inner
    m = pd.read_csv(base / "on" / "metrics.csv")
    n = int(m["forecast_step"].notna().sum()) if "forecast_step" in m else 0
    print(
        f"preset {args.preset}: without live forecast {off:.1f} s, with {on:.1f} s; "
        f"ratio {on / off:.4f} (overhead {100 * (on / off - 1):+.2f}%); "
        f"{n} of {len(m)} evaluations carry a forecast"
    )
    inside = sum(spent)
    print(
        f"inside the live forecast: {inside:.2f} s in {len(spent)} calls = "
        f"{100 * inside / (on - inside):.2f}% of the rest of the run"
    )


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
