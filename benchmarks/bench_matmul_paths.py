"""One-thread f32 matmul rates on this CPU by library, at the paper-fig3 step's own shapes.

The marginal ``paper-fig3`` step is about 224 MFLOP (forward and backward, counted by
``torch.utils.flop_counter``), nearly all of it in the matrix products listed in ``SHAPES`` (from
``torch.profiler`` with ``record_shapes``: the layer-1 projection and its weight gradient, the
batched score and value products, the 128 x 128 weight products). This prints, for each shape, the
GFLOP/s of torch (its BLAS: MKL in the CPU wheel), of numpy (OpenBLAS) and, when ``--jax-python``
names an interpreter with JAX, of XLA under ``jax.jit``: whether another matmul path on this CPU
would make the step's products faster. Each library runs in a fresh process limited to one thread,
CPU time over ``--reps`` calls after a warm-up, alternated for ``--rounds`` rounds; medians.

Usage: python benchmarks/bench_matmul_paths.py [--rounds 3] [--reps 200] [--jax-python PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

# (batch, m, k, n): batch 0 is a plain 2-D product
SHAPES = [
    (0, 512, 512, 512),
    (0, 2176, 63, 128),
    (0, 63, 2176, 128),
    (128, 17, 128, 17),
    (128, 17, 17, 128),
    (0, 128, 128, 128),
]

CHILD = """
import sys, time
lib, reps = sys.argv[1], int(sys.argv[2])
shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[3:]]
if lib == "torch":
    import torch
    torch.set_num_threads(1)
    def make(s):
        a = torch.randn(*((s[0],) if s[0] else ()), s[1], s[2])
        b = torch.randn(*((s[0],) if s[0] else ()), s[2], s[3])
        return lambda: a @ b
elif lib == "numpy":
    import numpy as np
    rng = np.random.default_rng(0)
    def make(s):
        lead = (s[0],) if s[0] else ()
        a = rng.standard_normal((*lead, s[1], s[2]), dtype=np.float32)
        b = rng.standard_normal((*lead, s[2], s[3]), dtype=np.float32)
        return lambda: a @ b
else:
    import jax, jax.numpy as jnp
    f = jax.jit(lambda a, b: a @ b)
    def make(s):
        lead = (s[0],) if s[0] else ()
        a = jnp.ones((*lead, s[1], s[2]), jnp.float32)
        b = jnp.ones((*lead, s[2], s[3]), jnp.float32)
        return lambda: f(a, b).block_until_ready()
for s in shapes:
    call = make(s)
    for _ in range(20):
        call()
    t0 = time.process_time()
    for _ in range(reps):
        call()
    flop = 2 * max(s[0], 1) * s[1] * s[2] * s[3]
    print(flop * reps / (time.process_time() - t0) / 1e9)
"""

ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def rates(python: str, lib: str, reps: int) -> list[float]:
    shapes = ["x".join(str(v) for v in s) for s in SHAPES]
    done = subprocess.run(
        [python, "-c", CHILD, lib, str(reps), *shapes],
        env=dict(os.environ, **ONE_THREAD),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench_matmul_paths: {lib} failed under {python}: {last}")
    got = done.stdout.split()
    if len(got) != len(SHAPES):
        raise SystemExit(
            f"bench_matmul_paths: {lib} under {python} printed {len(got)} rates, not {len(SHAPES)}"
        )
    return [float(v) for v in got]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--jax-python", help="an interpreter with jax installed (optional)")
    args = ap.parse_args()
    for name, value in (("--rounds", args.rounds), ("--reps", args.reps)):
        if value < 1:
            print(f"{name}={value} is invalid: at least 1")
            return 2
    libs = {"torch": sys.executable, "numpy": sys.executable}
    if args.jax_python:
        try:
            probe = subprocess.run([args.jax_python, "-c", "import jax"], capture_output=True)
        except OSError as err:
            print(f"--jax-python {args.jax_python}: {err.strerror}")
            return 2
        if probe.returncode:
            print(f'--jax-python: {args.jax_python} has no jax (pip install "jax[cpu]")')
            return 2
        libs["xla"] = args.jax_python
    got: dict[str, list[list[float]]] = {lib: [] for lib in libs}
    for r in range(args.rounds):
        for lib, python in libs.items():
            got[lib].append(rates(python, lib, args.reps))
        print(f"round {r + 1} done")
    print("one thread, f32, GFLOP/s (median of rounds):")
    print("shape (batch x m x k x n)   " + "".join(f"{lib:>8s}" for lib in libs))
    for i, s in enumerate(SHAPES):
        name = ("" if not s[0] else f"{s[0]} x ") + f"{s[1]} x {s[2]} x {s[3]}"
        cells = "".join(f"{statistics.median(r[i] for r in got[lib]):8.0f}" for lib in libs)
        print(f"{name:28s}{cells}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    from machine import announce

    announce()
    sys.exit(main())
