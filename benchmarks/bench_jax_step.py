"""The marginal training step, one thread, CPU time: the paper's network in JAX against the toolkit.

The JAX side is ``plain_reddy.py``'s network and step ported as the paper's author would write it:
jax.numpy and jax.random, one ``jax.jit``-compiled step that takes the parameters and a PRNG key,
draws the batch of 128 bursty sequences inside the jit (so both sides include sampling, as the
toolkit's step does), runs the forward pass, the cross-entropy loss and its gradient, and applies
SGD lr 0.01 with the author's multiplicative weight decay 1e-6. It runs in a fresh process under
``--jax-python`` (JAX is not a dependency of the toolkit) with XLA held to one thread; after the
compile and 60 warm-up steps it times ``--steps`` steps by CPU time, blocking on each step's result
(the toolkit's step is synchronous, so per-step blocking charges JAX the same way and keeps its
asynchronous dispatch from queueing steps past the clock). The toolkit's side is
``bench_step.py``'s child (the preset's run, backend fast). The two alternate in fresh processes
for ``--rounds`` rounds so that the machine's load hits them alike. Printed: a short JAX training
run showing the loss falls from log(32) = 3.47, both parameter counts, each round, the median ms
per step of each and the median per-round ratio jax / toolkit, and the load average.

Usage: python benchmarks/bench_jax_step.py [--steps 300] [--rounds 5] [--jax-python PATH]
    [--check]   (only the training check)
Install JAX for it elsewhere, e.g. ``python -m venv /tmp/jax && /tmp/jax/bin/pip install
"jax[cpu]"``, and pass ``--jax-python /tmp/jax/bin/python``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from bench_step import ROOT, step_ms

JAX_CHILD = """
import math, sys, time
import jax, jax.numpy as jnp
K, L, N, B, D, EPS, P_C, N_MAX, BATCH = 256, 32, 8, 1, 63, 0.1, 0.8, 32, 128
P, T, LR, WD = 2 * N_MAX + 1, 2 * N + 1, 0.01, 1e-6
mode, steps = sys.argv[1], int(sys.argv[2])

def linear(key, n_in, n_out, bias=True):  # nn.Linear's initialisation
    kw, kb = jax.random.split(key)
    s = 1 / math.sqrt(n_in)
    w = jax.random.uniform(kw, (n_in, n_out), minval=-s, maxval=s)
    return (w, jax.random.uniform(kb, (n_out,), minval=-s, maxval=s)) if bias else w

def init(key):
    d, h = D + P, 128
    ks = jax.random.split(key, 6)
    mlp = [linear(k, i, o) for k, i, o in zip(ks[2:], (d, h, h, h), (h, h, h, L))]
    return {"qkv": [linear(ks[0], d, 3 * d, False), linear(ks[1], d, 3 * d, False)], "mlp": mlp}

def make_task(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return (jax.random.normal(k1, (K, D)) / math.sqrt(D), jax.random.randint(k2, (K,), 0, L),
            jax.random.normal(k3, (L, D)) / math.sqrt(D))

def sample(task, key, n, novel):  # bursty sequences; with probability novel, fresh classes
    means_k, class_label, label_vecs = task
    ks = jax.random.split(key, 9)
    cls = jnp.argsort(jax.random.uniform(ks[0], (n, K)), 1)[:, : N // B]
    cls = jnp.repeat(cls, B, 1)
    cls = jnp.take_along_axis(cls, jnp.argsort(jax.random.uniform(ks[1], (n, N)), 1), 1)
    fresh = jax.random.uniform(ks[2], (n,)) < novel
    means = jnp.where(fresh[:, None, None],
                      jax.random.normal(ks[3], (n, N, D)) / math.sqrt(D), means_k[cls])
    labels = jnp.where(fresh[:, None], jax.random.randint(ks[4], (n, N), 0, L), class_label[cls])
    q = jax.random.randint(ks[5], (n,), 0, N)
    rows = jnp.arange(n)
    items = means + EPS * jax.random.normal(ks[6], (n, N, D)) / math.sqrt(D)
    query = means[rows, q] + EPS * jax.random.normal(ks[7], (n, D)) / math.sqrt(D)
    pairs = jnp.stack([items / math.sqrt(1 + EPS**2), label_vecs[labels]], 2).reshape(n, 2 * N, D)
    tokens = jnp.concatenate([pairs, query[:, None] / math.sqrt(1 + EPS**2)], 1)
    offset = jax.random.randint(ks[8], (n, 1), 0, P - 2 * N)
    return tokens, offset + jnp.arange(T), labels[rows, q]

def forward(params, tokens, positions):
    u = jnp.concatenate([tokens, jax.nn.one_hot(positions, P)], -1)
    mask = jnp.tril(jnp.ones((T, T), bool))
    for w in params["qkv"]:
        q, k, v = jnp.split(u @ w, 3, -1)
        scores = jnp.where(mask, q @ k.transpose(0, 2, 1), -jnp.inf)
        u = u + jax.nn.softmax(scores, -1) @ v
    x = u[:, -1]
    for i, (w, b) in enumerate(params["mlp"]):
        x = x @ w + b
        x = jax.nn.relu(x) if i < 3 else x
    return x

def loss_fn(params, tokens, positions, y):
    logp = jax.nn.log_softmax(forward(params, tokens, positions))
    return -jnp.take_along_axis(logp, y[:, None], 1).mean()

@jax.jit
def train_step(params, task, key):
    key, sub = jax.random.split(key)
    loss, grads = jax.value_and_grad(loss_fn)(params, *sample(task, sub, BATCH, P_C))
    params = jax.tree_util.tree_map(lambda p, g: p * (1 - WD) - LR * g, params, grads)
    return params, key, loss

kp, kt, key = jax.random.split(jax.random.PRNGKey(0), 3)
params, task = init(kp), make_task(kt)
if mode == "check":
    n_params = sum(p.size for p in jax.tree_util.tree_leaves(params))
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, parameters {n_params}")
    losses = []
    for s in range(1, steps + 1):
        params, key, loss = train_step(params, task, key)
        losses.append(float(loss))
        if s % (steps // 6) == 0 or s == 1:
            print(f"  step {s:5d}  loss {sum(losses[-50:]) / len(losses[-50:]):.3f} (last 50)")
    x, pos, y = sample(task, jax.random.PRNGKey(1), 2048, 0.0)
    acc = float((forward(params, x, pos).argmax(-1) == y).mean())
    print(f"  trained classes, 2048 sequences: loss {float(loss_fn(params, x, pos, y)):.3f}"
          f", accuracy {acc:.3f} (chance {1 / L:.3f})")
else:
    for _ in range(60):  # the first call compiles
        params, key, loss = train_step(params, task, key)
    jax.block_until_ready(params)
    t0 = time.process_time()
    for _ in range(steps):
        params, key, loss = train_step(params, task, key)
        jax.block_until_ready(params)
    print(1e3 * (time.process_time() - t0) / steps)
"""


def jax_env() -> dict[str, str]:
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return dict(os.environ, XLA_FLAGS=flags, OMP_NUM_THREADS="1", JAX_PLATFORMS="cpu")


def run_jax(python: str, mode: str, steps: int) -> str:
    done = subprocess.run(
        [python, "-c", JAX_CHILD, mode, str(steps)], env=jax_env(), capture_output=True, text=True
    )
    if done.returncode or not done.stdout.strip():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench_jax_step: the JAX {mode} under {python} failed: {last}")
    return done.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jax-python", default=sys.executable)
    ap.add_argument("--check", action="store_true", help="only the JAX training check")
    ap.add_argument("--check-steps", type=int, default=3000)
    args = ap.parse_args()
    for name, value, least in (
        ("--steps", args.steps, 1),
        ("--rounds", args.rounds, 1),
        ("--check-steps", args.check_steps, 6),
    ):
        if value < least:
            print(f"bench_jax_step: {name}={value} is invalid: at least {least}")
            return 2
    try:
        probe = subprocess.run(
            [args.jax_python, "-c", "import jax"], env=jax_env(), capture_output=True
        )
    except OSError as err:
        print(f"bench_jax_step: --jax-python {args.jax_python}: {err.strerror}")
        return 2
    if probe.returncode:
        print(f'bench_jax_step: no JAX under {args.jax_python}; install it: pip install "jax[cpu]"')
        return 2
    from plain_reddy import Net

    print(f"plain_reddy.py Net parameters {sum(p.numel() for p in Net().parameters())}")
    print(f"JAX check, {args.check_steps} steps of SGD from seed 0 (log 32 = 3.466):")
    print(run_jax(args.jax_python, "check", args.check_steps), end="", flush=True)
    if args.check:
        return 0
    ms: dict[str, list[float]] = {"jax": [], "toolkit": []}
    for r in range(args.rounds):
        ms["jax"].append(float(run_jax(args.jax_python, "time", args.steps).split()[-1]))
        ms["toolkit"].append(step_ms(ROOT, "paper-fig3", "fast", args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.2f} ms" for n, v in ms.items()))
    print(f"paper-fig3, {args.steps} steps, one thread, CPU ms per step (median):")
    for name, v in ms.items():
        print(f"  {name:8s} {statistics.median(v):.2f}")
    ratio = statistics.median(a / b for a, b in zip(ms["jax"], ms["toolkit"]))
    print(f"jax / toolkit: {ratio:.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    from machine import announce

    announce()
    sys.exit(main())
