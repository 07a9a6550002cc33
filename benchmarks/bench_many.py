"""Many models at once: stacked models in one process versus one process per model.

Seeds of one configuration can train (a) one per process, each process on its own threads, or
(b) stacked in one process (:func:`interp.train.training.train_many`, :mod:`interp.model.stacked`),
or both (several processes, each with a stack). This benchmark measures the aggregate training rate
(model-steps per second, fresh batches sampled in the step as in training) of each arrangement at
the paper's configuration (paper-fig1d task, batch 128, SGD), in one run on one machine:

- ``single``: one model, the fast path (:func:`interp.model.fast.fast_logits`), the reference;
- ``stack S``: S models stacked in one process;
- ``P procs x stack S``: P processes at once, each with ``threads / P`` threads and a stack of S.

On a GPU (when torch sees one), it also reports stacks of 1, 8, 64 and 256 models on the GPU and the
ratio to the single-model rate, with the batches sampled on the CPU in each step (as training does)
and with batches sampled beforehand (the compute alone); ``--gpu-only`` prints these rows alone.
Prints medians over rounds; the last line is the best CPU arrangement's ratio to one single-model
process using all threads.

Usage: python benchmarks/bench_many.py [--quick] [--threads 2] [--gpu-only]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def _setup(n_models: int, device: str):
    from interp.data.task import TaskGenerator
    from interp.model.network import InductionNet, ModelConfig
    from interp.model.stacked import ModelStack
    from interp.train.presets import get_preset

    preset = get_preset("paper-fig1d")
    task = preset.task
    cfg = ModelConfig.from_task(task)
    gens = [TaskGenerator(task, s) for s in range(n_models)]
    streams = [torch.Generator().manual_seed(s) for s in range(n_models)]
    models = [InductionNet(cfg, seed=s).to(device) for s in range(n_models)]
    stack = ModelStack(models) if n_models > 1 or device != "cpu" else None
    params = stack.parameters() if stack is not None else list(models[0].parameters())
    opt = torch.optim.SGD(params, lr=0.01, weight_decay=1e-6)
    return gens, streams, models, stack, opt


def _timed_steps(
    n_models: int, device: str, steps: int, rounds: int, presampled: bool = False
) -> list[float]:
    """Model-steps per second of each round. Each step samples fresh batches on the CPU and moves
    them to ``device``, as training does; with ``presampled``, the steps cycle through four sets of
    batches sampled (and moved) beforehand, which times the model's compute alone."""
    from interp.model.fast import fast_logits
    from interp.model.stacked import stacked_logits

    gens, streams, models, stack, opt = _setup(n_models, device)

    def sample():
        return [g.sample(128, s).to(device) for g, s in zip(gens, streams)]

    ready = itertools.cycle([sample() for _ in range(4)]) if presampled else None

    def step():
        batches = sample() if ready is None else next(ready)
        if stack is None:
            b = batches[0]
            loss = F.cross_entropy(fast_logits(models[0], b.tokens, b.positions), b.target)
        else:
            tokens = torch.stack([b.tokens for b in batches])
            positions = torch.stack([b.positions for b in batches])
            target = torch.stack([b.target for b in batches])
            logits = stacked_logits(stack, tokens, positions)
            loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
            loss = loss.view(n_models, -1).mean(1).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    for _ in range(3):
        step()
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(n_models * steps / (time.perf_counter() - t0))
    return rates


def _worker(n_models, threads, steps, rounds, barrier, queue):
    torch.set_num_threads(threads)
    _timed_steps(n_models, "cpu", 2, 1)  # warm-up outside the barrier
    barrier.wait()
    queue.put(_timed_steps(n_models, "cpu", steps, rounds))


def processes(n_procs: int, n_models: int, threads: int, steps: int, rounds: int) -> float:
    """Aggregate model-steps/s of ``n_procs`` processes running at once (median round)."""
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(n_procs), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(n_models, threads, steps, rounds, barrier, queue))
        for _ in range(n_procs)
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(statistics.median(r) for r in results)


def device_stack_rates(
    device: str,
    steps: int,
    rounds: int,
    stacks: tuple[int, ...] = (8, 64, 256),
    presampled: bool = False,
) -> dict[int, float]:
    """Median model-steps/s of one model and of each stack size on ``device``: the GPU rows. The
    tests run it on ``"cpu"`` (there one model takes the fast path; on a GPU a stack of one).
    ``presampled``: the model's compute alone (see :func:`_timed_steps`)."""
    rates = {1: statistics.median(_timed_steps(1, device, steps * 5, rounds, presampled))}
    for S in stacks:
        rates[S] = statistics.median(_timed_steps(S, device, steps, rounds, presampled))
    return rates


def gpu_rows(steps: int, rounds: int) -> None:
    """Print the GPU rows: each stack size with sampling in the step (as training does) and with
    presampled batches (the compute alone)."""
    name = torch.cuda.get_device_name()
    with_sampling = device_stack_rates("cuda", steps, rounds)
    compute = device_stack_rates("cuda", steps, rounds, presampled=True)
    print(f"GPU ({name}), model-steps/s (median): sampling in the step / presampled batches")
    for S in with_sampling:
        print(
            f"GPU stack {S:4d}: {with_sampling[S]:10.1f}   "
            f"x{with_sampling[S] / with_sampling[1]:6.1f}"
            f"   | {compute[S]:10.1f}   x{compute[S] / compute[1]:6.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer steps (about two minutes)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gpu-only", action="store_true", help="the GPU rows alone")
    args = parser.parse_args()
    steps, rounds = (10, 3) if args.quick else (30, 5)
    if args.gpu_only:
        if not torch.cuda.is_available():
            sys.exit("bench_many: --gpu-only needs a GPU that torch sees; there is none here")
        gpu_rows(steps, rounds)
        return
    T = args.threads
    print(f"paper-fig1d, batch 128 per model, SGD; {T} threads in all; model-steps/s (median)")
    rows = {}
    rows[f"1 proc x single ({T} threads)"] = processes(1, 1, T, steps * 2, rounds)
    for S in (2, 4, 6, 8):
        rows[f"1 proc x stack {S} ({T} threads)"] = processes(1, S, T, max(steps // 2, 3), rounds)
    if T >= 2:
        P = T
        rows[f"{P} procs x single (1 thread each)"] = processes(P, 1, 1, steps * 2, rounds)
        for S in (2, 3, 4):
            rows[f"{P} procs x stack {S} (1 thread each)"] = processes(P, S, 1, steps // 2, rounds)
    base = rows[f"1 proc x single ({T} threads)"]
    for name, rate in rows.items():
        print(f"{name:34s} {rate:8.1f}   x{rate / base:.2f}")
    if torch.cuda.is_available():
        gpu_rows(steps, rounds)
    else:
        print("GPU: none here (the GPU rows are pending a machine with CUDA)")
    best = max(rows, key=rows.get)
    print(f"best CPU arrangement: {best}: x{rows[best] / base:.2f} the single-model process")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
