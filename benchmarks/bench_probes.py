"""Cost of the progress measures relative to training (issue 3 target: < 5%).

Measures, in one process and on the same machine:
- the median time of one training step of the paper's network (batch 128, paper-fig3 task), with
  the training backend the runs use (``fast``), times the default evaluation interval (500 steps);
- the median time of computing every progress measure on a 10k-sequence IC set
  (``cache_patterns`` + ``progress_measures``), and of the plain accuracy/loss forward on the same
  set for comparison.
Prints medians and the ratio ``measures / (eval_every * step)``.

Usage: python benchmarks/bench_probes.py [--quick] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from interp.evaluation import accuracy_and_loss
from interp.fast import fast_logits
from interp.model import InductionNet, ModelConfig
from interp.presets import get_preset
from interp.probes import cache_patterns, progress_measures
from interp.task import TaskGenerator


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ic", type=int, default=10_000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    preset = get_preset("paper-fig3")
    task, train_cfg = preset.task, preset.train
    gen = TaskGenerator(task, 0)
    model = InductionNet(ModelConfig.from_task(task), seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-6)
    stream = torch.Generator().manual_seed(0)
    steps_per_rep = 20 if args.quick else 50

    def train_steps():
        for _ in range(steps_per_rep):
            b = gen.sample(128, stream)
            loss = F.cross_entropy(fast_logits(model, b.tokens, b.positions), b.target)
            opt.zero_grad()
            loss.backward()
            opt.step()

    ic = gen.eval_sets(seed=1, n=args.n_ic)["ic"]

    def measures():
        logits, patterns = cache_patterns(model, ic)
        progress_measures(patterns, logits, ic)

    @torch.no_grad()
    def plain_eval():
        accuracy_and_loss(model(ic.tokens, ic.positions), ic)

    reps = 3 if args.quick else 7
    train_steps()  # warm-up
    t_step = median_time(train_steps, reps) / steps_per_rep
    t_measures = median_time(measures, reps)
    t_plain = median_time(plain_eval, reps)
    interval = train_cfg.eval_every
    print(f"threads: {args.threads}   IC set: {args.n_ic} sequences   eval_every: {interval}")
    print(f"training step (fast backend, batch 128): median {t_step * 1e3:.2f} ms")
    print(f"training between evaluations ({interval} steps): {t_step * interval:.2f} s")
    print(
        f"all progress measures on IC: median {t_measures:.3f} s (plain forward: {t_plain:.3f} s)"
    )
    print(f"measures / training time: {t_measures / (t_step * interval):.4f}")


if __name__ == "__main__":
    main()
