"""The paper's network and task written plainly in PyTorch, for the whole-process benchmark.

Reddy (2024): two causal attention-only layers on ``[token ; one-hot position]`` (no layer norm, no
MLP between them), the query's residual through a 3-layer ReLU MLP to ``L`` logits; bursty
sequences of ``N`` item-label pairs and a query; plain SGD lr 0.01 with the author's
multiplicative weight decay 1e-6, batch 128; the IC, IC2 and IW accuracies and losses on 2048
held-out sequences every 500 steps. Written the obvious way, as a reader of the paper would
(nn.Linear projections, full attention in both layers, the data drawn with torch on the CPU),
with no part of the toolkit. The task's constants are paper-fig3's.

Usage: python benchmarks/plain_reddy.py [--steps 5000] [--out metrics.csv]
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

K, L, N, B, D, EPS, P_C, N_MAX, BATCH, N_EVAL = 256, 32, 8, 1, 63, 0.1, 0.8, 32, 128, 2048
P = 2 * N_MAX + 1  # one-hot position table


class Net(nn.Module):
    def __init__(self, d_mlp: int = 128) -> None:
        super().__init__()
        d = D + P
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(2))
        layers = [nn.Linear(d, d_mlp), nn.ReLU(), nn.Linear(d_mlp, d_mlp), nn.ReLU()]
        self.mlp = nn.Sequential(*layers, nn.Linear(d_mlp, d_mlp), nn.ReLU(), nn.Linear(d_mlp, L))

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        u = torch.cat([tokens, F.one_hot(positions, P).float()], dim=-1)
        n = u.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        for layer in self.qkv:
            q, k, v = layer(u).chunk(3, dim=-1)
            scores = (q @ k.transpose(1, 2)).masked_fill(~mask, float("-inf"))
            u = u + torch.softmax(scores, -1) @ v
        return self.mlp(u[:, -1])


class Task:
    def __init__(self, g: torch.Generator) -> None:
        self.means = torch.randn(K, D, generator=g) / math.sqrt(D)
        self.class_label = torch.randint(0, L, (K,), generator=g)
        self.label_vecs = torch.randn(L, D, generator=g) / math.sqrt(D)

    def sample(self, n: int, g: torch.Generator, bursty: bool, novel: float):
        """``n`` sequences: ``N / B`` classes repeated ``B`` times (bursty) or ``N`` classes
        (not), the query one of them; with probability ``novel`` fresh classes and labels."""
        distinct = N // B if bursty else N
        cls = torch.rand(n, K, generator=g).argsort(1)[:, :distinct]  # distinct classes
        cls = cls.repeat_interleave(B, 1) if bursty else cls
        cls = torch.gather(cls, 1, torch.argsort(torch.rand(n, N, generator=g), 1))
        means, labels = self.means[cls], self.class_label[cls]
        fresh = torch.rand(n, generator=g) < novel
        if fresh.any():
            means[fresh] = torch.randn(int(fresh.sum()), N, D, generator=g) / math.sqrt(D)
            labels[fresh] = torch.randint(0, L, (int(fresh.sum()), N), generator=g)
        q = torch.randint(0, N, (n,), generator=g)
        rows = torch.arange(n)
        items = means + EPS * torch.randn(n, N, D, generator=g) / math.sqrt(D)
        query = means[rows, q] + EPS * torch.randn(n, D, generator=g) / math.sqrt(D)
        tokens = torch.empty(n, 2 * N + 1, D)
        tokens[:, 0:-1:2], tokens[:, 1::2] = items / math.sqrt(1 + EPS**2), self.label_vecs[labels]
        tokens[:, -1] = query / math.sqrt(1 + EPS**2)
        offset = torch.randint(0, P - 2 * N, (n, 1), generator=g)
        return tokens, offset + torch.arange(2 * N + 1), labels[rows, q]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    task, net = Task(g), Net()
    sets = {  # IC: novel classes; IC2: another draw of them; IW: trained classes, not bursty
        "ic": task.sample(N_EVAL, g, True, 1.0),
        "ic2": task.sample(N_EVAL, g, True, 1.0),
        "iw": task.sample(N_EVAL, g, False, 0.0),
    }
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    rows = []
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            with torch.no_grad():
                row = {"step": step}
                for name, (x, pos, y) in sets.items():
                    logits = net(x, pos)
                    row[f"{name}_loss"] = F.cross_entropy(logits, y).item()
                    row[f"{name}_acc"] = (logits.argmax(-1) == y).float().mean().item()
                rows.append(row)
        if step == args.steps:
            break
        x, pos, y = task.sample(BATCH, g, True, P_C)
        loss = F.cross_entropy(net(x, pos), y)
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(1 - 1e-6)  # the author's multiplicative weight decay
        opt.step()
    if args.out:
        with open(args.out, "w") as f:
            f.write(",".join(rows[0]) + "\n")
            f.writelines(",".join(f"{v:g}" for v in r.values()) + "\n" for r in rows)
    print(f"done: step {args.steps}  IC acc {rows[-1]['ic_acc']:.3f}")


if __name__ == "__main__":
    main()
