"""Cost of the progress measures relative to training (target: < 5%).

For the paper's two tasks (``paper-fig3``: B = 1; ``paper-fig1d``: B = 2, where the induction score
also reads item rows of layer 2), measures in one process, on the same machine:

- the median time of one training step of the paper's network (batch 128, fresh batch sampled in
  the step, as in training), with the backend runs use (``fast``), times the default evaluation
  interval (500 steps): the training time between two evaluations;
- the median time of every progress measure on a 10k-sequence IC set, exactly as the training
  loop's evaluation computes them (:func:`interp.analysis.evaluation.logits_and_measures`: logits,
  both layers' patterns on the rows the measures read, all measures);
- the median time of the logits alone on the same set (what IC accuracy costs without measures).

Prints medians and the ratio ``measures / (eval_every * step)``, and the same ratio for the part
beyond the IC-accuracy forward. The last line reads ``measures / training time: R`` (paper-fig3).

Usage: python benchmarks/bench_probes.py [--quick] [--threads 2] [--n-ic 10000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from interp.analysis.evaluation import logits_and_measures
from interp.data.task import TaskGenerator
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.train.presets import get_preset


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(preset_name: str, n_ic: int, quick: bool) -> dict[str, float]:
    preset = get_preset(preset_name)
    task = preset.task
    gen = TaskGenerator(task, 0)
    model = InductionNet(ModelConfig.from_task(task), seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-6)
    stream = torch.Generator().manual_seed(0)
    steps_per_rep = 20 if quick else 50

    def train_steps():
        for _ in range(steps_per_rep):
            b = gen.sample(128, stream)
            loss = F.cross_entropy(fast_logits(model, b.tokens, b.positions), b.target)
            opt.zero_grad()
            loss.backward()
            opt.step()

    ic = gen.eval_sets(seed=1, n=n_ic)["ic"]

    def measures():
        logits_and_measures(model, ic)

    @torch.no_grad()
    def logits_only():
        for i in range(0, len(ic), 512):
            part = ic[i : i + 512]
            fast_logits(model, part.tokens, part.positions)

    reps = 5 if quick else 9
    train_steps()  # warm-up
    measures()
    t_step, t_measures, t_logits = [], [], []
    for _ in range(reps):  # alternate, so that machine noise hits all three alike
        t_step.append(median_time(train_steps, 1) / steps_per_rep)
        t_measures.append(median_time(measures, 1))
        t_logits.append(median_time(logits_only, 1))
    return {
        "step": statistics.median(t_step),
        "measures": statistics.median(t_measures),
        "logits": statistics.median(t_logits),
        "interval": preset.train.eval_every,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ic", type=int, default=10_000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads: {args.threads}   IC set: {args.n_ic} sequences")
    results = {}
    for name in ("paper-fig1d", "paper-fig3"):
        r = results[name] = measure(name, args.n_ic, args.quick)
        train_time = r["step"] * r["interval"]
        print(
            f"{name}: step (fast, incl. sampling) {r['step'] * 1e3:.2f} ms -> "
            f"{r['interval']} steps {train_time:.2f} s | all measures {r['measures']:.3f} s "
            f"(logits alone {r['logits']:.3f} s) | "
            f"measures / training {r['measures'] / train_time:.4f}"
            f", beyond the accuracy forward {(r['measures'] - r['logits']) / train_time:.4f}"
        )
    r = results["paper-fig3"]
    print(f"measures / training time: {r['measures'] / (r['step'] * r['interval']):.4f}")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
