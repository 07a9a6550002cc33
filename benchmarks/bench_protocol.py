"""The paper's protocol on this machine: six ``paper-fig3`` seeds, evaluation every 500 steps.

Runs ``induction-cliff sweep --preset paper-fig3 --seeds 0-5`` exactly as a user would (a process
pool of one-thread workers, one per core, ``--no-figures``) into a temporary folder, and prints the
wall time and the aggregate model-steps/s. The full protocol is 1e5 steps per seed
(``--steps 100000``, about an hour or more). ``--quick`` runs two slices of it, 300 and 1800 steps
per seed: their difference gives the marginal rate (model-steps/s once running) and the fixed cost
(process start-up, imports, evaluation sets, final checkpoints), and the full protocol's wall time
is extrapolated as fixed + 6e5 / rate, labelled as extrapolated.

``--baseline PATH`` runs the same with the toolkit checked out at ``PATH`` (for example a
``git worktree`` of an older commit) in alternating rounds and prints ``this/baseline: R``, the
ratio of the marginal model-steps/s (median over rounds), as its last line.

``--keep DIR`` keeps the full protocol's sweep (six 1e5-step paper-fig3 runs) in ``DIR``.

``--sample-on host`` or ``device`` trains this checkout with ``--set sample_on=...`` (default:
its own default, the device sampler since run format 5); the baseline trains with its own
defaults.

``--device cuda`` trains on the GPU (``--set device=cuda``), for example with ``--workers 1
--stack 6``. On the CPU, ``--stack`` trains with ``--set backend=fast`` (the compiled backend, the
paper presets' choice, trains one model per process there) and says so.

Usage: python benchmarks/bench_protocol.py [--quick | --steps S] [--rounds R] [--stack N]
    [--baseline PATH] [--keep DIR] [--device DEVICE] [--sample-on host|device]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = 6
FULL_STEPS = 100_000


def run_slice(
    tree: Path,
    steps: int,
    workers: int,
    stack: int = 1,
    keep: Path | None = None,
    device: str = "cpu",
    extra: tuple[str, ...] = (),
) -> float:
    """Wall seconds of six seeds x ``steps`` steps of paper-fig3 with the toolkit at ``tree``. The
    sweep goes to a temporary folder, or to ``keep`` (which must not exist yet) to keep its runs."""
    with tempfile.TemporaryDirectory(prefix="bench-protocol-") as tmp:
        out = keep if keep is not None else Path(tmp) / "sweep"
        cmd = (
            [
                sys.executable,
                "-m",
                "interp.cli",
                "sweep",
                "--preset",
                "paper-fig3",
                "--seeds",
                f"0-{SEEDS - 1}",
                "--set",
                f"steps={steps}",
                "--workers",
                str(workers),
                "--no-figures",
                "--out",
                str(out),
            ]
            + (["--stack", str(stack)] if stack > 1 else [])
            + (["--set", f"device={device}"] if device != "cpu" else [])
            + list(extra)
        )
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
        # `python -m` also puts the cwd (tree) first; packages on PYTHONPATH stay reachable
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"bench_protocol: the sweep in {tree} failed:\n{done.stderr[-2000:]}")
        return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="slices of 300 and 1800 steps")
    parser.add_argument("--steps", type=int, default=None, help="steps per seed (default 1e5)")
    parser.add_argument("--rounds", type=int, default=1, help="repeats (alternating)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--stack", type=int, default=1, help="sweep --stack (seeds per worker)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--device", default="cpu", help="train on this torch device (cuda)")
    parser.add_argument(
        "--sample-on",
        default=None,
        choices=("host", "device"),
        help="this checkout's sample_on (default: its default; the baseline trains with its own)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the sweep's runs here (a new folder; "
        "one round of the full protocol only): its six curves serve other studies",
    )
    args = parser.parse_args()
    if args.quick and args.steps is not None:
        sys.exit("bench_protocol: give --quick or --steps, not both")
    lengths = (300, 1800) if args.quick else (FULL_STEPS if args.steps is None else args.steps,)
    if min(*lengths, args.rounds, args.workers, args.stack) < 1:
        sys.exit("bench_protocol: --steps, --rounds, --workers and --stack must be >= 1")
    if args.keep is not None and (args.quick or args.rounds > 1 or args.baseline):
        sys.exit("bench_protocol: --keep is for one round without --quick or --baseline")
    if args.keep is not None and args.keep.exists():
        sys.exit(f"bench_protocol: --keep {args.keep} exists already; name a new folder")
    if args.baseline is not None and not any(
        (args.baseline / "interp" / name).is_file() for name in ("cli.py", "cli/__init__.py")
    ):
        sys.exit(f"bench_protocol: --baseline {args.baseline} is not a checkout of this toolkit")
    trees = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    # per tree, per round: (fixed seconds, marginal model-steps/s)
    fits: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            sample_on = args.sample_on if name == "this" else None
            extra = ("--set", f"sample_on={sample_on}") if sample_on else ()
            if args.stack > 1 and args.device == "cpu" and name == "this":
                extra += ("--set", "backend=fast")  # compiled points do not stack on the CPU
            walls = [
                run_slice(tree, steps, args.workers, args.stack, args.keep, args.device, extra)
                for steps in lengths
            ]
            for steps, wall in zip(lengths, walls):
                print(
                    f"round {r + 1} {name:8s} {steps:6d} steps: {wall:7.1f} s  "
                    f"{SEEDS * steps / wall:6.1f} model-steps/s (start-up included)",
                    flush=True,
                )
            if len(lengths) == 2:
                rate = SEEDS * (lengths[1] - lengths[0]) / (walls[1] - walls[0])
                fits[name].append((walls[0] - SEEDS * lengths[0] / rate, rate))
            else:
                fits[name].append((0.0, SEEDS * lengths[0] / walls[0]))
    stacked = f", --stack {args.stack}" if args.stack > 1 else ""
    if args.stack > 1 and args.device == "cpu":
        stacked += " (this checkout: backend=fast)"
    on = f", on {args.device}" if args.device != "cpu" else ""
    print(f"{SEEDS} seeds of paper-fig3, {args.workers} one-thread workers{stacked}{on}")
    for name in trees:
        fixed = statistics.median(f for f, _ in fits[name])
        rate = statistics.median(r for _, r in fits[name])
        full = fixed + SEEDS * FULL_STEPS / rate
        if len(lengths) == 2:
            how = f"extrapolated from {lengths[0]} and {lengths[1]} steps"
            what = f"marginal {rate:.1f} model-steps/s, fixed cost {fixed:.1f} s"
        else:
            how = (
                "measured" if lengths[0] == FULL_STEPS else f"extrapolated from {lengths[0]} steps"
            )
            what = f"{rate:.1f} model-steps/s (start-up included)"
        print(
            f"{name}: {what}; the 6 x 1e5 protocol: {full / 60:.1f} min ({how}); "
            f"the 20-minute goal: {1200 / full:.2f} of it"
        )
    if args.baseline:
        ratios = [t[1] / b[1] for t, b in zip(fits["this"], fits["baseline"])]
        print(f"this/baseline: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
