"""Stacks of models trained with their data drawn on the device (``sample_on="device"``), end to
end.

For each stack size (default 1, 16, 64 and 256 paper-fig3 models), on one device, medians over
rounds:

- ``sampling``: ms per step to draw every model's batch on the device
  (:class:`interp.data.device_sampler.DeviceSampler`, one generator per model; whole refills of
  ``CHUNK`` batches are timed);
- ``step``: ms per step of the stacked forward, backward, the author's weight decay and SGD on a
  ready batch (:func:`interp.model.stacked.stacked_logits`);
- ``evaluation``: ms per evaluation of one model (IC, IC2, IW and the progress measures), and what
  an evaluation of every model every 500 steps adds per step;
- ``end to end``: model-steps/s of sampling + step, and with the evaluations every 500 steps
  (``S * 500 / (500 * (sampling + step) + S * evaluation)``);
- with ``--compiled``: ``compiled step`` (ms per step of the same step with its stacked forward
  and loss compiled by ``torch.compile``, its backward the compiled one, the update as above) and
  ``compile`` (seconds of its first call: the compile, or a load from the per-user compile cache);
  ``nan`` with a line on stderr saying why when the compiler cannot build it here.

Every timed section ends with a device synchronisation. The last line is ``end to end at S
models: R model-steps/s`` for the largest stack (target on one H200 at 256 models: 25000).

Usage: python benchmarks/bench_device.py [--device cuda] [--stacks 1,16,64,256] [--steps 50]
    [--rounds 3] [--compiled] [--dry]   (--dry: the CPU, the same stacks, one step, one round,
    compiled too: the script's own check, its times not a measurement of anything)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

EVAL_EVERY = 500


def _fail(message: str) -> None:
    print(f"bench_device: {message}", file=sys.stderr)
    sys.exit(1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rows(
    device: torch.device, S: int, steps: int, rounds: int, n_eval: int, compiled: bool = False
) -> dict[str, float]:
    """The measured row of a stack of ``S`` paper-fig3 models on ``device``."""
    from interp.analysis.evaluation import evaluate
    from interp.data.device_sampler import CHUNK, DeviceSampler
    from interp.data.task import TaskGenerator
    from interp.model.network import InductionNet, ModelConfig
    from interp.model.stacked import ModelStack, stacked_logits
    from interp.train import training
    from interp.train.presets import get_preset

    p = get_preset("paper-fig3")
    task, cfg = p.task, p.train
    gens = [TaskGenerator(task, s) for s in range(S)]
    sampler = DeviceSampler(gens, list(range(S)), cfg.batch_size, device)
    mcfg = ModelConfig.from_task(task)
    stack = ModelStack([InductionNet(mcfg, seed=s).to(device) for s in range(S)])
    opt = training._make_optimizer(stack.parameters(), cfg)

    def step(tokens, positions, target) -> None:
        logits = stacked_logits(stack, tokens, positions)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
        opt.zero_grad(set_to_none=True)
        loss.view(S, -1).mean(1).sum().backward()
        training._update(opt, cfg)

    def timed(fn, n: int) -> float:  # ms per call
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        _sync(device)
        return 1e3 * (time.perf_counter() - t0) / n

    batch = sampler.next_stacked()
    step(*batch)  # warm-up
    eval_sets = {k: v.to(device) for k, v in gens[0].eval_sets(1, n=n_eval).items()}
    evaluate(stack.models[0], eval_sets)
    out: dict[str, list[float]] = {"sampling": [], "step": [], "evaluation": []}
    n_draw = -(-steps // CHUNK) * CHUNK  # whole refills
    for _ in range(rounds):
        while sampler.drawn % CHUNK:  # start at a refill
            sampler.next_stacked()
        out["sampling"].append(timed(sampler.next_stacked, n_draw))
        out["step"].append(timed(lambda: step(*batch), steps))
        out["evaluation"].append(timed(lambda: evaluate(stack.models[0], eval_sets), 1))
    med = {k: statistics.median(v) for k, v in out.items()}
    per_step = med["sampling"] + med["step"]
    med["end to end"] = 1e3 * S / per_step
    med["with evaluations"] = 1e3 * S * EVAL_EVERY / (EVAL_EVERY * per_step + S * med["evaluation"])
    if compiled:
        med |= compiled_rows(stack, cfg, batch, steps, rounds, timed)
    return med


def compiled_rows(stack, cfg, batch, steps: int, rounds: int, timed) -> dict[str, float]:
    """``compiled step`` (ms) and ``compile`` (s) of the stacked step with its forward and loss
    compiled (nan, and a line on stderr, when it cannot be built here)."""
    from interp.model.compiled import _own_cache_dir, _shape_checks_off
    from interp.model.position_range import positions_in_range
    from interp.model.stacked import stacked_logits
    from interp.train import training

    _own_cache_dir()  # the per-user compile cache, as training uses it
    S = len(stack)

    def loss_fn(tokens, positions, target):
        logits = stacked_logits(stack, tokens, positions)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
        return loss.view(S, -1).mean(1).sum()

    fn = torch.compile(loss_fn, dynamic=False)
    opt = training._make_optimizer(stack.parameters(), cfg)

    def step() -> None:
        with _shape_checks_off(), positions_in_range():
            loss = fn(*batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        training._update(opt, cfg)

    start = time.perf_counter()
    try:
        step()
    except Exception as err:  # noqa: BLE001 - the compiler raises many kinds
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"bench_device: no compiled step at {S} models: {first}", file=sys.stderr)
        return {"compiled step": math.nan, "compile": math.nan}
    compile_s = time.perf_counter() - start
    ms = statistics.median(timed(step, steps) for _ in range(rounds))
    return {"compiled step": ms, "compile": compile_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--stacks", default="1,16,64,256")
    parser.add_argument("--steps", type=int, default=50, help="steps timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compiled", action="store_true", help="also the compiled step")
    parser.add_argument("--dry", action="store_true", help="the CPU, one step, compiled too")
    args = parser.parse_args()
    if args.dry:
        args.device, args.steps, args.rounds, args.compiled = "cpu", 1, 1, True
    try:
        stacks = [int(s) for s in args.stacks.split(",")]
    except ValueError:
        stacks = [0]
    if not stacks or min(stacks) < 1:
        _fail(f"--stacks={args.stacks!r} is invalid: comma-separated integers >= 1")
    if args.steps < 1 or args.rounds < 1:
        _fail(f"--steps={args.steps} / --rounds={args.rounds} is invalid: integers >= 1")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        _fail(f"--device={args.device!r} is invalid: not a torch device")
    if device.type == "cuda" and not torch.cuda.is_available():
        _fail(f"--device={args.device!r} is invalid here: torch sees no CUDA device")
    torch.set_num_threads(1)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, one thread"
    n_eval = 128 if args.dry else None
    print(
        f"paper-fig3, batch 128 per model, SGD, data drawn on the device; {name}; "
        f"{args.rounds} rounds of {args.steps} steps, medians"
    )
    extra = f" {'compiled step ms':>17s} {'compile s':>10s}" if args.compiled else ""
    print(
        f"{'models':>6s} {'sampling ms':>12s} {'step ms':>9s} {'eval ms/model':>14s} "
        f"{'end to end':>12s} {'with evals every 500':>21s}{extra}  (model-steps/s)"
    )
    got = {}
    for S in stacks:
        r = got[S] = rows(device, S, args.steps, args.rounds, n_eval, args.compiled)
        extra = f" {r['compiled step']:17.2f} {r['compile']:10.1f}" if args.compiled else ""
        print(
            f"{S:6d} {r['sampling']:12.2f} {r['step']:9.2f} {r['evaluation']:14.1f} "
            f"{r['end to end']:12.1f} {r['with evaluations']:21.1f}{extra}",
            flush=True,
        )
    S = max(stacks)
    print(f"end to end at {S} models: {got[S]['end to end']:.1f} model-steps/s")
    if args.compiled:
        ms = got[S]["compiled step"]
        print(f"compiled step at {S} models: {ms:.2f} ms ({got[S]['step']:.2f} ms uncompiled)")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
