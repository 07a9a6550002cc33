"""The marginal training step, one thread, CPU time: this checkout against another, same run.

Each measurement is a fresh process that builds a preset's run as ``train`` does (no output
folder), takes 60 warm-up steps, then times ``--steps`` steps of the loop's own step function
(sample, forward, backward, the author's weight decay, the update) by CPU time; this checkout and
``--against DIR`` (e.g. ``git worktree add /tmp/before main``) alternate in every round so that a
change in the machine's load hits them alike. Printed: each one's median ms per step and the
median per-round ratio against / this, and the machine's load average.

Usage: python benchmarks/bench_step.py [--preset paper-fig3] [--backend fast] [--steps 300]
    [--rounds 5] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import dataclasses, sys, time, torch
torch.set_num_threads(1)
from interp.model.network import ModelConfig
from interp.train import training
from interp.train.presets import get_preset
preset, backend, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = get_preset(preset)
model = ModelConfig.from_task(p.task, **p.model)
cfg = dataclasses.replace(p.train, backend=backend, steps=10**6)
run = training._RunState(p.task, model, cfg, None, False, False)
step = training._single_step(run)
for _ in range(60):
    step()
t0 = time.process_time()
for _ in range(steps):
    step()
print(1e3 * (time.process_time() - t0) / steps)
"""


def step_ms(root: Path, preset: str, backend: str, steps: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, preset, backend, str(steps)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"bench_step: the step failed in {root}:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="paper-fig3")
    ap.add_argument("--backend", default="fast")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", type=Path)
    args = ap.parse_args()
    trees = {"this": ROOT} | ({"against": args.against.resolve()} if args.against else {})
    ms: dict[str, list[float]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, root in trees.items():
            ms[name].append(step_ms(root, args.preset, args.backend, args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.2f} ms" for n, v in ms.items()))
    print(f"{args.preset}, backend {args.backend}, one thread, CPU ms per step (median):")
    for name, v in ms.items():
        print(f"  {name:8s} {statistics.median(v):.2f}")
    if args.against:
        ratio = statistics.median(a / b for a, b in zip(ms["against"], ms["this"]))
        print(f"against / this: {ratio:.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    from machine import announce

    announce()
    sys.exit(main())
