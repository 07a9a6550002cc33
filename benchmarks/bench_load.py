"""Training beside a competing CPU-bound process: the shipped thread default against explicit ones.

Times ``induction-cliff train --preset PRESET --set steps=S --set eval_every=S`` end to end (a fresh
process each: imports, evaluation sets, the steps, two evaluations, the final checkpoint) while
``--competitors`` other processes spin on the CPU, as a browser, a notebook kernel or a second run
would. The variants, in alternating rounds (medians):

- ``shipped``: no thread setting at all (``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` are removed
  from the environment), what a user gets;
- ``num_threads=T`` for every T from 1 to the CPU count (``--threads`` to choose others); the
  fastest of them is the best setting;
- ``baseline shipped`` (with ``--baseline PATH``): another checkout of the toolkit, e.g. a ``git
  worktree`` of an older commit, also without a thread setting.

The order of the variants rotates from round to round, so that each takes each place in turn:
a run that follows a two-thread run starts against a competitor the scheduler owes time to, and
in a fixed order the variant in that place pays for it (on ``demo``, ``shipped`` and
``num_threads=1``, one code path under two names, came out far apart with ``shipped`` always
after ``num_threads=2``). Use a multiple of the number of variants as ``--rounds``.

The machine's load average is printed before and after (what else ran). The last line reads
``shipped/best: R`` (the shipped default's wall time over the best setting's; 1.0 is the best).

Usage: python benchmarks/bench_load.py [--preset demo] [--steps 300] [--rounds 6]
    [--competitors 1] [--threads 1,2] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPIN = "while True:\n    pass\n"


def _fail(message: str) -> None:
    print(f"bench_load: {message}", file=sys.stderr)
    sys.exit(1)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def timed_run(tree: Path, preset: str, steps: int, threads: int | None, out: Path) -> float:
    """Wall seconds of one ``train`` process of the checkout at ``tree`` (``threads`` None: no
    thread setting anywhere)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(tree)
    cmd = [sys.executable, "-m", "interp.cli", "train", "--preset", preset, "--quiet"]
    cmd += ["--set", f"steps={steps}", "--set", f"eval_every={steps}", "--out", str(out)]
    if threads is not None:
        cmd += ["--set", f"num_threads={threads}"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    if done.returncode != 0:
        _fail(f"the run {' '.join(cmd[2:])} failed: {done.stderr.strip()[-500:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--competitors", type=int, default=1, help="spinning processes beside")
    parser.add_argument("--threads", default=None, help="explicit settings (default 1..CPUs)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    args = parser.parse_args()
    if args.steps < 1:
        _fail(f"--steps={args.steps} is invalid: an integer >= 1")
    if args.rounds < 1:
        _fail(f"--rounds={args.rounds} is invalid: an integer >= 1")
    if args.competitors < 0:
        _fail(f"--competitors={args.competitors} is invalid: an integer >= 0")
    try:
        settings = (
            [int(t) for t in args.threads.split(",")]
            if args.threads
            else list(range(1, (os.cpu_count() or 1) + 1))
        )
    except ValueError:
        settings = [0]
    if not settings or min(settings) < 1:
        _fail(f"--threads={args.threads!r} is invalid: comma-separated integers >= 1")
    settings = sorted(set(settings) | {1})  # the one-thread row is always there
    if args.baseline is not None and not (args.baseline / "interp" / "cli.py").is_file():
        _fail(f"--baseline {args.baseline} is not a checkout of this toolkit")
    from interp.train.presets import PRESETS

    if args.preset not in PRESETS:
        _fail(f"--preset={args.preset!r} is invalid: one of {sorted(PRESETS)}")

    variants: dict[str, tuple[Path, int | None]] = {"shipped": (ROOT, None)}
    variants.update({f"num_threads={t}": (ROOT, t) for t in settings})
    if args.baseline is not None:
        variants["baseline shipped"] = (args.baseline.resolve(), None)
    print(f"before: {_load()}", flush=True)
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.DEVNULL)
        for _ in range(args.competitors)
    ]
    walls: dict[str, list[float]] = {name: [] for name in variants}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
            names = list(variants)
            for r in range(args.rounds):  # alternate so that the machine's noise hits all alike
                order = names[r % len(names) :] + names[: r % len(names)]  # each in each place
                for name in order:
                    tree, threads = variants[name]
                    wall = timed_run(tree, args.preset, args.steps, threads, Path(tmp) / "run")
                    walls[name].append(wall)
                    print(f"round {r + 1} {name}: {wall:.1f} s", flush=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    print(f"after: {_load()}")
    med = {name: statistics.median(w) for name, w in walls.items()}
    explicit = [f"num_threads={t}" for t in settings]
    best = min(explicit, key=med.get)
    print(
        f"{args.preset}, {args.steps} steps per process, {args.competitors} competing spinning "
        f"process(es), {args.rounds} alternating rounds, median wall seconds:"
    )
    for name in variants:
        print(f"  {name:18s} {med[name]:8.1f} s   x{med[name] / med[best]:.2f} the best")
    print(f"best setting: {best}")
    if args.baseline is not None:
        print(f"baseline shipped/best: {med['baseline shipped'] / med[best]:.2f}")
    print(f"shipped/num_threads=1: {med['shipped'] / med['num_threads=1']:.2f}")
    print(f"shipped/best: {med['shipped'] / med[best]:.2f}")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
