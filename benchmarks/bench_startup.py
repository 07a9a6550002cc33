"""Start-up of the command line, one thread, CPU time of whole fresh processes.

Each arrangement is one fresh process; its CPU time (user + sys, from the kernel's accounting of
the finished child) is taken whole. Arrangements, alternated in every round so that a change in
the machine's load hits them alike:

- ``python``: the interpreter alone (``python -c pass``);
- ``import torch``: the interpreter importing torch, the floor of any command that trains;
- ``train 1 step``: ``induction-cliff train --preset tiny --set steps=1`` into a new folder (the
  start-up, one step, one evaluation, the run's files);
- ``train --help``.

Printed: each arrangement's median CPU seconds over the rounds, and its median per-round ratio to
``import torch`` measured in the same round. ``--against DIR`` also times the ``train`` of another
checkout (e.g. ``git worktree add /tmp/before main``), alternated with this one's, and prints the
median ratio before / now.

Usage: python benchmarks/bench_startup.py [--rounds 5] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from interp.cli import main; sys.argv[0] = 'induction-cliff'; sys.exit(main())"


def run_cpu(cmd: list[str], env: dict, cwd: Path) -> float:
    """CPU seconds of ``cmd`` as a whole process, from RUSAGE_CHILDREN before and after."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def arrangements(root: Path, tmp: Path, tag: str) -> dict[str, tuple[list[str], Path]]:
    py = sys.executable
    out = tmp / f"run-{tag}"
    train = [py, "-c", CLI, "train", "--preset", "tiny", "--set", "steps=1", "--quiet"]
    return {
        f"train 1 step{tag}": ([*train, "--overwrite", "--out", str(out)], root),
        f"train --help{tag}": ([py, "-c", CLI, "train", "--help"], root),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another checkout whose train is timed too")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    base = {
        "python": ([sys.executable, "-c", "pass"], ROOT),
        "import torch": ([sys.executable, "-c", "import torch"], ROOT),
    }
    cases = base | arrangements(ROOT, tmp, "")
    if args.against is not None:
        cases |= arrangements(args.against.resolve(), tmp, " (against)")
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="disabled", OMP_NUM_THREADS="1")
    env["INDUCTION_CLIFF_CACHE"] = str(tmp / "cache")
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name, (cmd, cwd) in cases.items():
            times[name].append(run_cpu(cmd, env | {"PYTHONPATH": str(cwd)}, cwd))
        print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f}" for n, t in times.items()))
    torch_s = times["import torch"]
    print(f"\nCPU seconds, median of {args.rounds} rounds (ratio to import torch, same round):")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t, torch_s))
        print(f"  {name:28s} {statistics.median(t):6.2f} s   {ratio:5.2f} x import torch")
    if args.against is not None:
        for what in ("train 1 step", "train --help"):
            pairs = zip(times[f"{what} (against)"], times[what])
            print(f"  {what}: against / now {statistics.median(a / b for a, b in pairs):.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
