"""Training speed at the paper's configuration: plain PyTorch vs the hooked model vs the fast path.

All three run in one process, on the same machine, on the same batches (batch 128, N = 8,
d_model = 128, paper-fig3 task, SGD):

(a) ``plain``: the network written straightforwardly here (nn.Linear projections, one-hot
    concatenation, full attention in both layers), the baseline;
(b) ``hooked``: :class:`interp.model.network.InductionNet` (TransformerLens hook points);
(c) ``fast``: :func:`interp.model.fast.fast_logits` on the hooked model's parameters.

The FLOP limit counts the useful FLOPs of the straightforward computation; the fast path computes
the same function with fewer (it reassociates, see ``interp/model/fast.py``), so it can approach or pass
that limit. The script also prints the FLOPs the fast path performs and the rate it reaches.

Each is timed in alternating rounds and reported as the median steps/s. The FLOP limit is the
useful FLOPs of one step (forward + backward of what the loss depends on) divided by this machine's
measured fp32 matmul throughput at the same thread count. The last line reads ``fast/plain: R``.

Usage: python benchmarks/bench_train.py [--quick] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from interp.data.task import TaskGenerator
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
            nn.Linear(d, d_mlp), nn.ReLU(), nn.Linear(d_mlp, d_mlp), nn.ReLU(),
            nn.Linear(d_mlp, d_mlp), nn.ReLU(), nn.Linear(d_mlp, L),
        )  # fmt: skip

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

    It reassociates the same function (``interp/model/fast.py``): layer 1 applies ``W_Q W_K^T`` (formed
    once per step) to the content half of the tokens; layer 2 works through a few vectors per
    sequence, so no per-token projection remains in it.
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (under two minutes)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = get_preset("paper-fig3").task
    gen = TaskGenerator(task, 0)
    stream = torch.Generator().manual_seed(0)
    batches = [gen.sample(128, stream) for _ in range(20)]

    hooked = InductionNet(ModelConfig.from_task(task), seed=0)
    plain = PlainNet(task.D, task.P, task.L)
    contenders = {
        "plain": (plain, lambda b: plain(b.tokens, b.positions)),
        "hooked": (hooked, lambda b: hooked(b.tokens, b.positions)),
        "fast": (hooked, lambda b: fast_logits(hooked, b.tokens, b.positions)),
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
            loss = F.cross_entropy(fwd(b), b.target)
            opts[name].zero_grad()
            loss.backward()
            opts[name].step()
        return n / (time.perf_counter() - t0)

    rounds, per_round = (5, 20) if args.quick else (9, 60)
    for name in contenders:
        steps(name, 5)  # warm-up
    rates = {name: [] for name in contenders}
    for _ in range(rounds):  # alternate so that machine noise hits all three alike
        for name in contenders:
            rates[name].append(steps(name, per_round))
    med = {name: statistics.median(r) for name, r in rates.items()}

    flops = useful_flops_per_step(128, task.seq_len, task.D, task.D + task.P, 128, task.L)
    peak = matmul_flops_per_s(args.threads)
    limit = peak / flops
    print(
        f"threads: {args.threads}   batch 128, N={task.N}, d_model={task.D + task.P}   rounds: {rounds}x{per_round} steps"
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
        f"{med['fast'] * fast_flops / 1e9:.1f} GFLOP/s, {med['fast'] * fast_flops / peak:.2f} of the "
        "matmul throughput"
    )
    print(f"hooked/plain: {med['hooked'] / med['plain']:.2f}")
    print(f"fast/plain: {med['fast'] / med['plain']:.2f}")


if __name__ == "__main__":
    main()
