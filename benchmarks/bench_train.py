"""Training speed at the paper's configuration: plain PyTorch vs the hooked model vs the fast path.

All three run in one process, on the same machine, on the same batches (batch 128, N = 8,
d_model = 128, paper-fig3 task, SGD):

(a) ``plain``: the network written straightforwardly here (nn.Linear projections, one-hot
    concatenation, full attention in both layers), the baseline;
(b) ``hooked``: :class:`interp.model.network.InductionNet` (TransformerLens hook points);
(c) ``fast``: :func:`interp.model.fast.fast_logits` on the hooked model's parameters;
(d) ``compiled``: the same loss through ``torch.compile`` (:mod:`interp.model.compiled`, the paper
    presets' ``backend``), compiled before the timing starts.

The FLOP limit counts the useful FLOPs of the straightforward computation; the fast path computes
the same function with fewer (it reassociates, see ``interp/model/fast.py``), so it can approach or
pass that limit. The script also prints the FLOPs the fast path performs and the rate it reaches.

Each is timed in alternating rounds and reported as the median steps/s. The FLOP limit is the
useful FLOPs of one step (forward + backward of what the loss depends on) divided by this machine's
measured fp32 matmul throughput at the same thread count.

Then the per-phase breakdown of a training step as the training loop runs it (a fresh batch from
the checkout's default sampler, the preset's forward (its ``backend``; the fast forward in a
checkout without :mod:`interp.model.backends`), backward, the author's weight decay and the
optimiser update, and the evaluation with its progress measures, spread over ``eval_every`` =
500 steps), each variant in a fresh process, in
alternating rounds, medians per phase (the sampling phase: the mean over the steps, as the device
sampler draws eight batches at a time):

- ``this``: this checkout, as ``induction-cliff train`` runs it;
- ``this, glibc malloc defaults``: the same with :mod:`interp.train.allocator` switched off;
- ``baseline`` (with ``--baseline PATH``): another checkout of the toolkit, e.g. a ``git
  worktree`` of an older commit, imported from ``PATH``.

The evaluation share is also given for ``paper-fig1d`` (B = 2, whose measures read more rows).
The last lines read ``compiled/fast: R`` and ``fast/plain: R``.

Usage: python benchmarks/bench_train.py [--quick] [--threads 2] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from interp.data.task import TaskGenerator
from interp.model.compiled import CompiledLoss
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.train.presets import get_preset


class PlainNet(nn.Module):
    """The paper's network, written the obvious way (no hooks, no shortcuts)."""

    def __init__(self, D: int, P: int, L: int, d_mlp: int = 128) -> None:
        super().__init__()
        d = D + P
        self.P = P
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(2))
        self.mlp = nn.Sequential(
            nn.Linear(d, d_mlp),
            nn.ReLU(),
            nn.Linear(d_mlp, d_mlp),
            nn.ReLU(),
            nn.Linear(d_mlp, d_mlp),
            nn.ReLU(),
            nn.Linear(d_mlp, L),
        )

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        u = torch.cat([tokens, F.one_hot(positions, self.P).float()], dim=-1)
        n = u.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        for layer in self.qkv:
            q, k, v = layer(u).chunk(3, dim=-1)
            scores = (q @ k.transpose(1, 2)).masked_fill(~mask, float("-inf"))
            u = u + torch.softmax(scores, -1) @ v
        return self.mlp(u[:, -1])


def useful_flops_per_step(batch: int, T: int, D: int, d_model: int, d_mlp: int, L: int) -> float:
    """Forward + backward FLOPs of what the loss depends on (backward = 2x forward)."""
    d = d_model
    layer1 = 3 * 2 * T * D * d + 2 * 2 * T * T * d / 2  # one-hot half is a gather; causal half
    layer2 = 2 * 2 * T * d * d + 2 * d * d + 2 * 2 * T * d  # K,V all tokens; q and the row: query
    mlp = 2 * (d * d_mlp + 2 * d_mlp * d_mlp + d_mlp * L)
    return 3.0 * batch * (layer1 + layer2 + mlp)


def fast_path_flops_per_step(batch: int, T: int, D: int, d: int, d_mlp: int, L: int) -> float:
    """Forward + backward FLOPs the fast path actually performs (backward = 2x forward).

    It reassociates the same function (``interp/model/fast.py``): layer 1 applies ``W_Q W_K^T``
    (formed once per step) to the content half of the tokens; layer 2 works through a few vectors
    per sequence, so no per-token projection remains in it.
    """
    e = d
    per_step = 2 * d * e * d  # W_Q W_K^T
    layer1 = 2 * T * D * d + 2 * T * T * d  # one projection, full score matrix
    query_row = 2 * T * d + 2 * d * d  # r_last
    query_row += 2 * d * e + 2 * e * d + 2 * d * d  # w = W_K W_Q^T r_last, W_VO w
    query_row += 2 * 2 * T * d + 2 * 2 * T * T + 2 * 2 * T * d + 2 * d * d + 2 * d * e
    mlp = 2 * (d * d_mlp + 2 * d_mlp * d_mlp + d_mlp * L)
    return 3.0 * (batch * (layer1 + query_row + mlp) + per_step)


def matmul_flops_per_s(threads: int, n: int = 1024, repeats: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times)


PHASES = ("sample", "forward", "backward", "optimiser", "evaluation")


def measure_phases(threads: int, steps: int) -> dict:
    """Milliseconds per training step in each phase (medians over ``steps`` steps), as the training
    loop does them, in this process; and the evaluation's share of training time for paper-fig3
    and paper-fig1d. Imports the toolkit from wherever ``sys.path`` finds it (``--baseline``)."""
    from interp.analysis.evaluation import evaluate
    from interp.train import training

    try:
        from interp.train.allocator import retain_freed_memory
    except ImportError:  # an older checkout
        allocator = "absent"
    else:
        allocator = "on" if retain_freed_memory() else "off"
    torch.set_num_threads(threads)
    out: dict = {"allocator": allocator}
    for preset in ("paper-fig3", "paper-fig1d"):
        p = get_preset(preset)
        task, cfg = p.task, p.train
        gen = TaskGenerator(task, 0)
        stream = torch.Generator().manual_seed(0)
        sampler = None
        if getattr(cfg, "sample_on", "host") == "device":  # the checkout's default sampler
            from interp.data.device_sampler import DeviceSampler

            sampler = DeviceSampler([gen], [0], cfg.batch_size, "cpu")
        model = InductionNet(ModelConfig.from_task(task), seed=0)
        opt = training._make_optimizer([w for w in model.parameters() if w.requires_grad], cfg)
        try:  # the loss as the checkout's training loop computes it
            from interp.model.backends import training_loss
        except ImportError:  # an older checkout: the fast forward

            def loss_fn(tokens, positions, target, model=model):
                return F.cross_entropy(fast_logits(model, tokens, positions), target)
        else:
            loss_fn = training_loss(model, cfg.backend)
        times: dict[str, list[float]] = {k: [] for k in PHASES[:-1]}
        for i in range(steps + 10):
            t0 = time.perf_counter()
            batch = sampler.next_batch() if sampler else gen.sample(cfg.batch_size, stream)
            t1 = time.perf_counter()
            loss = loss_fn(batch.tokens, batch.positions, batch.target)
            t2 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            t3 = time.perf_counter()
            if hasattr(training, "_update"):  # the loop's update (a baseline may predate it)
                training._update(opt, cfg)
            else:
                training._shrink_weights(opt, cfg)
                opt.step()
            loss.item()
            t4 = time.perf_counter()
            if i >= 10:  # warm-up
                for k, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    times[k].append(dt)
        eval_sets = gen.eval_sets(1)
        evals = []
        for _ in range(3):
            t0 = time.perf_counter()
            evaluate(model, eval_sets)
            evals.append(time.perf_counter() - t0)
        # The sampling phase as a mean: a sampler that draws several batches per call (the device
        # sampler) costs nothing at most steps and all of it at one, which a median would hide.
        ms = {
            k: 1e3 * (statistics.fmean(v) if k == "sample" else statistics.median(v))
            for k, v in times.items()
        }
        ms["evaluation"] = 1e3 * statistics.median(evals) / cfg.eval_every
        out[preset] = ms
    return out


def phase_rounds(trees: dict[str, tuple[Path, dict]], threads: int, steps: int, rounds: int):
    """Run :func:`measure_phases` for each variant in a fresh process, alternating; medians."""
    got: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, (tree, env) in trees.items():
            done = subprocess.run(
                [sys.executable, __file__, "--phases-json", str(steps), "--threads", str(threads)],
                env={**os.environ, **env, "PYTHONPATH": str(tree)},
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(f"bench_train: the phase run of {name} failed:\n{done.stderr[-2000:]}")
            got[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        name: {
            "allocator": runs[0]["allocator"],
            **{
                preset: {k: statistics.median(r[preset][k] for r in runs) for k in PHASES}
                for preset in ("paper-fig3", "paper-fig1d")
            },
        }
        for name, runs in got.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about two minutes)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--phases-json", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phases_json is not None:  # one phase run, in its own process (phase_rounds)
        print(json.dumps(measure_phases(args.threads, args.phases_json)))
        return
    if args.baseline is not None and not (args.baseline / "interp" / "model" / "fast.py").is_file():
        sys.exit(f"bench_train: --baseline {args.baseline} is not a checkout of this toolkit")
    torch.set_num_threads(args.threads)
    task = get_preset("paper-fig3").task
    gen = TaskGenerator(task, 0)
    stream = torch.Generator().manual_seed(0)
    batches = [gen.sample(128, stream) for _ in range(20)]

    hooked = InductionNet(ModelConfig.from_task(task), seed=0)
    plain = PlainNet(task.D, task.P, task.L)
    compiled = CompiledLoss(hooked)
    contenders = {  # the loss of a batch
        "plain": (plain, lambda b: F.cross_entropy(plain(b.tokens, b.positions), b.target)),
        "hooked": (hooked, lambda b: F.cross_entropy(hooked(b.tokens, b.positions), b.target)),
        "fast": (
            hooked,
            lambda b: F.cross_entropy(fast_logits(hooked, b.tokens, b.positions), b.target),
        ),
        "compiled": (hooked, lambda b: compiled(b.tokens, b.positions, b.target)),
    }
    opts = {
        name: torch.optim.SGD(m.parameters(), lr=0.01, weight_decay=1e-6)
        for name, (m, _) in contenders.items()
    }

    def steps(name: str, n: int) -> float:
        model, fwd = contenders[name]
        t0 = time.perf_counter()
        for i in range(n):
            b = batches[i % len(batches)]
            loss = fwd(b)
            opts[name].zero_grad()
            loss.backward()
            opts[name].step()
        return n / (time.perf_counter() - t0)

    rounds, per_round = (5, 20) if args.quick else (9, 60)
    for name in contenders:
        steps(name, 5)  # warm-up
    rates = {name: [] for name in contenders}
    for _ in range(rounds):  # alternate so that machine noise hits all alike
        for name in contenders:
            rates[name].append(steps(name, per_round))
    med = {name: statistics.median(r) for name, r in rates.items()}

    flops = useful_flops_per_step(128, task.seq_len, task.D, task.D + task.P, 128, task.L)
    peak = matmul_flops_per_s(args.threads)
    limit = peak / flops
    print(
        f"threads: {args.threads}   batch 128, N={task.N}, d_model={task.D + task.P}   "
        f"rounds: {rounds}x{per_round} steps"
    )
    for name in contenders:
        spread = f"[{min(rates[name]):.1f}, {max(rates[name]):.1f}]"
        print(f"{name:7s} median {med[name]:8.1f} steps/s  (range {spread})")
    print(
        f"useful FLOPs/step: {flops / 1e6:.1f} MFLOP   matmul throughput: {peak / 1e9:.1f} GFLOP/s"
    )
    print(f"FLOP limit: {limit:.1f} steps/s   fast / limit: {med['fast'] / limit:.2f}")
    fast_flops = fast_path_flops_per_step(128, task.seq_len, task.D, task.D + task.P, 128, task.L)
    print(
        f"the fast path reassociates and performs {fast_flops / 1e6:.1f} MFLOP/step "
        f"({fast_flops / flops:.2f} of the useful FLOPs): it runs at "
        f"{med['fast'] * fast_flops / 1e9:.1f} GFLOP/s, "
        f"{med['fast'] * fast_flops / peak:.2f} of the matmul throughput"
    )
    print(f"hooked/plain: {med['hooked'] / med['plain']:.2f}")

    root = Path(__file__).resolve().parents[1]
    variants = {
        "this": (root, {}),
        "this, glibc malloc defaults": (root, {"INDUCTION_CLIFF_MALLOC": "default"}),
    }
    if args.baseline is not None:
        variants["baseline"] = (args.baseline.resolve(), {})
    steps, n_rounds = (100, 3) if args.quick else (300, 5)
    phases = phase_rounds(variants, args.threads, steps, n_rounds)
    print(
        f"phases of a training step, ms/step (fresh process each, {n_rounds} alternating rounds "
        f"of {steps} steps, medians; evaluation spread over eval_every = 500):"
    )
    for name, got in phases.items():
        ms = got["paper-fig3"]
        total = sum(ms.values())
        parts = " | ".join(f"{k} {ms[k]:.2f}" for k in PHASES)
        eval_b2 = got["paper-fig1d"]
        share_b2 = eval_b2["evaluation"] / sum(eval_b2[k] for k in PHASES[:-1])
        print(
            f"  {name} (allocator {got['allocator']}): {parts} | total {total:.2f} "
            f"({1e3 / total:.1f} steps/s); "
            f"evaluation {ms['evaluation'] / (total - ms['evaluation']):.1%} "
            f"of training (B=1), {share_b2:.1%} (paper-fig1d, B=2)"
        )
    if args.baseline is not None:
        this = sum(phases["this"]["paper-fig3"].values())
        base = sum(phases["baseline"]["paper-fig3"].values())
        print(f"step this/baseline: {base / this:.2f}")
    print(f"compiled/fast: {med['compiled'] / med['fast']:.2f}")
    print(f"fast/plain: {med['fast'] / med['plain']:.2f}")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
