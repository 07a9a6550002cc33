"""The toolkit's whole process against a plain PyTorch implementation, one thread, CPU time.

Each arrangement is one fresh process doing 5000 ``paper-fig3`` steps with its evaluations (every
500 steps), its CPU time (user + sys, from the kernel's accounting of the finished child) taken
whole: start-up, imports, compiling, sampling, training, evaluating, writing. Arrangements:

- ``plain``: ``benchmarks/plain_reddy.py``, the paper's network and task written plainly;
- ``toolkit, cache empty``: ``induction-cliff train --preset paper-fig3`` with the shipped defaults
  (``backend=auto``) and an empty compile cache (a new ``INDUCTION_CLIFF_CACHE`` folder);
- ``toolkit, cache warm``: the same command after a one-step ``--set backend=compiled`` run (not
  timed) has put these shapes' compile in the cache, as a user's earlier run would have. (With the
  cache empty, ``auto`` does not compile a 5000-step run, so the cold run leaves the cache empty.)

Rounds alternate the arrangements (plain, cold, warm) so that a change in the machine's load hits
them alike; the ratios ``plain / toolkit`` are medians of the per-round ratios. Also printed: the
machine's one-thread float32 matmul rate in this run and the toolkit's marginal step (CPU time per
step of the training step alone, after its first 50 steps, with the backend ``auto`` chose).

Usage: python benchmarks/bench_whole_process.py [--steps 5000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cpu(cmd: list[str], env: dict) -> float:
    """CPU seconds of ``cmd`` as a whole process, from RUSAGE_CHILDREN before and after."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if line.startswith("backend:"):
            print(f"    {line}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def matmul_gflops(n: int = 512, repeats: int = 20) -> float:
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        a @ b
        times.append(time.process_time() - t0)
    return 2 * n**3 / statistics.median(times) / 1e9


def marginal_step_ms(steps: int = 300) -> tuple[str, float]:
    """CPU ms per training step of paper-fig3 as ``train`` runs it (the backend auto chooses for
    a 5000-step run with the cache as it is now), after 50 steps of warm-up."""
    import dataclasses
    import logging

    logging.getLogger("interp").setLevel(logging.WARNING)
    from interp.train.backend_choice import choose_backend
    from interp.train.overrides import build_configs
    from interp.train.training import _RunState, _single_step

    task, model, cfg, _ = build_configs("paper-fig3", {"steps": "5000"}, None)
    run = _RunState(task, model, cfg, None, False, False)
    backend = choose_backend(run)
    run.cfg = dataclasses.replace(cfg, backend=backend, steps=10**6, eval_every=10**6)
    step = _single_step(run)
    for _ in range(50):
        step()
        run.step += 1
    t0 = time.process_time()
    for _ in range(steps):
        step()
        run.step += 1
    return backend, (time.process_time() - t0) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    py = sys.executable
    cache = Path(tempfile.mkdtemp(prefix="bench-compile-cache-"))
    env = {**os.environ, "INDUCTION_CLIFF_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = Path(tempfile.mkdtemp(prefix="bench-runs-"))
    train = [py, "-m", "interp.cli", "train", "--preset", "paper-fig3", "--quiet", "--overwrite"]
    train += ["--set", f"steps={args.steps}"]
    times: dict[str, list[float]] = {"plain": [], "cold": [], "warm": []}
    for r in range(args.rounds):
        for sub in cache.iterdir():  # empty again
            subprocess.run(["rm", "-rf", str(sub)], check=True)
        print(f"round {r + 1}:")
        times["plain"].append(
            run_cpu([py, "benchmarks/plain_reddy.py", "--steps", str(args.steps)], env)
        )
        print(f"  plain: {times['plain'][-1]:.1f} s CPU")
        times["cold"].append(run_cpu([*train, "--out", str(out / "cold")], env))
        print(f"  toolkit, cache empty: {times['cold'][-1]:.1f} s CPU")
        # A user's earlier compiled run of these shapes (not timed): the cache holds its compile.
        run_cpu(
            [*train, "--out", str(out / "prime"), "--set", "steps=1", "--set", "backend=compiled"],
            env,
        )
        times["warm"].append(run_cpu([*train, "--out", str(out / "warm")], env))
        print(f"  toolkit, cache warm: {times['warm'][-1]:.1f} s CPU")
    os.environ["INDUCTION_CLIFF_CACHE"] = str(cache)
    backend, step_ms = marginal_step_ms()
    gflops = matmul_gflops()
    print(f"\n{args.steps} paper-fig3 steps with evaluations, one thread, {args.rounds} round(s):")
    for name in times:
        print(f"  {name}: median {statistics.median(times[name]):.1f} s CPU  {times[name]}")
    for name in ("cold", "warm"):
        ratios = [p / t for p, t in zip(times["plain"], times[name])]
        print(f"plain/toolkit ({name} cache): {statistics.median(ratios):.2f}")
    print(f"marginal step ({backend}): {step_ms:.2f} ms CPU")
    print(f"one-thread f32 matmul (512x512): {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
