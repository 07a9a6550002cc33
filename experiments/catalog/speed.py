"""Speed: the fast training path against the hooked model, and six seeds of 1e5 steps."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from interp.experiments import register_experiment
from interp.experiments.core import Check, Column, Experiment, Tier


def time_backends(steps: int, rounds: int, threads: int = 1) -> pd.DataFrame:
    """Training steps per second of the paper-fig3 network through the hooked model and the
    fast path, in this process, alternating rounds; medians, and the ratio to the hooked one."""
    import dataclasses

    from interp.train.overrides import build_configs
    from interp.train.training import train

    task, model_cfg, train_cfg, _ = build_configs("paper-fig3", {"n_eval": "128"}, 0)
    rates: dict[str, list[float]] = {"hooked": [], "fast": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for backend in rates:
                cfg = dataclasses.replace(
                    train_cfg,
                    steps=steps,
                    eval_every=steps,
                    checkpoint_every=steps,
                    n_log_checkpoints=0,
                    backend=backend,
                    num_threads=threads,
                )
                t0 = time.perf_counter()
                train(task, model_cfg, cfg, Path(tmp) / f"{backend}-{r}", progress=False)
                rates[backend].append(steps / (time.perf_counter() - t0))
    base = statistics.median(rates["hooked"])
    return pd.DataFrame(
        [
            {
                "benchmark": "training steps/s, paper-fig3 shapes (start-up and two evaluations "
                "included)",
                "arrangement": b,
                "backend": b,
                "threads": threads,
                "value": statistics.median(v),
                "unit": "steps/s",
                "ratio": statistics.median(v) / base,
            }
            for b, v in rates.items()
        ]
    )


QUICK = dict(steps=150, rounds=3)
FULL = dict(steps=2000, rounds=5)


def _by_tier(experiment: Experiment, tier: str, dirs: Sequence[Path]) -> pd.DataFrame:
    return time_backends(**(QUICK if tier == "quick" else FULL))


def _headline(rows: pd.DataFrame) -> str:
    """The fast path's steps/s over the hooked model's, per benchmark and thread count; said as
    transcribed, with its commits, when the rows it rests on were not produced by this page's
    command."""
    ratios, transcribed, commits = [], False, []
    for _, g in rows.groupby(["benchmark", "threads"], sort=False, dropna=False):
        by = dict(zip(g["arrangement"].astype(str), pd.to_numeric(g["value"], errors="coerce")))
        if "fast" in by and "hooked" in by:
            ratios.append(by["fast"] / by["hooked"])
            transcribed |= bool((g.get("source", pd.Series(dtype=str)) == "transcribed").any())
            commits += [str(c) for c in g.get("commit", ())]
    commits = list(dict.fromkeys(commits))
    text = "fast path " + ", ".join(f"{v:.2f}x" for v in ratios) + " the hooked model's steps/s"
    return text + (f" (transcribed from {', '.join(commits)})" if transcribed else "")


EXPERIMENT = register_experiment(
    Experiment(
        name="speed",
        title="Speed: the fast path, stacked seeds, and six seeds of 1e5 steps",
        question=(
            "How much faster than the hooked model does the hook-free fast path train, and how "
            "long do six paper-fig3 seeds of 1e5 steps (the toolkit's default length; the paper "
            "gives none) take on 2 CPU cores and on a GPU?"
        ),
        analyse=_by_tier,
        tiers={
            "quick": Tier(
                cost="about 40 s on one core",
                cost_s=40,
                note="150 training steps of the paper-fig3 network per backend, three "
                "alternating rounds, one thread, in one process.",
            ),
            "full": Tier(
                cost="about 8 min on one core (the benchmarks in benchmarks/: hours)",
                cost_s=480,
                note="2000 steps per backend, five rounds; the transcribed rows come from "
                "benchmarks/bench_train.py, bench_protocol.py and bench_many.py (ratios against a "
                "baseline measured in the same run); each row names its commit and backend (the "
                "training path it timed, as its benchmark's output named it; `not recorded` where "
                "the output named none).",
            ),
        },
        columns=(
            Column(key="benchmark", header="benchmark"),
            Column(key="arrangement", header="arrangement"),
            Column(key="backend", header="backend"),
            Column(key="threads", header="threads", fmt="{:.0f}"),
            Column(key="value", header="value", fmt="{:.4g}"),
            Column(key="unit", header="unit"),
            Column(key="ratio", header="ratio to the baseline", fmt="{:.2f}"),
            Column(key="commit", header="commit"),
            Column(key="source", header="source"),
        ),
        deviations=("Not a paper experiment.",),
        checks=(
            Check(
                what="the fast path is faster than the hooked model",
                column="ratio",
                where={"arrangement": "fast"},
                low=1.2,
            ),
        ),
        reading=(
            "On a CPU the fast path is the main lever and one process per core the next; "
            "stacking seeds adds little on a CPU but scales the GPU's compute, where sampling "
            "batches on the CPU then caps each process, so one worker per seed was fastest. "
            "Six seeds of 1e5 steps reach the 20-minute goal only with six workers sharing a "
            "GPU (extrapolated), not on 2 CPU cores."
        ),
        headline=_headline,
    )
)
