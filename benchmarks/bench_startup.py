"""Start-up of the command line, one thread, CPU time of whole fresh processes.

Each arrangement is one fresh process; its CPU time (user + sys, from the kernel's accounting of
the finished child) is taken whole. Arrangements, alternated in every round so that a change in
the machine's load hits them alike:

- ``python``: the interpreter alone (``python -c pass``);
- ``import torch``: the interpreter importing torch;
- ``import transformer_lens``: the interpreter importing TransformerLens (and torch,
  ``transformers`` and ``datasets`` with it): the floor of any command that builds the network,
  whose base class is TransformerLens's;
- ``train 1 step``: ``induction-cliff train --preset tiny --set steps=1`` into a new folder (the
  start-up, one step, one evaluation, the run's files);
- ``fit CURVE.csv``: ``induction-cliff fit`` of a 201-point IC-loss curve in a CSV (the start-up
  and the fit with its default bootstrap);
- ``transition RUN``: the plateau and transition of a 20-step tiny run;
- ``forecast``: the transition law's forecast of the default preset;
- ``train --help``, ``fit --help``.

And the work of a command without its start-up: ``train: the run itself`` and ``fit: the fit
itself`` are the CPU seconds of the same command called a second time in one process (every module
already imported), printed by that process. A command's start-up is its whole process less that.

Printed: the CPU model and the load average (at the start and the end), each arrangement's median
CPU seconds over the rounds and its median per-round ratio to ``import torch`` measured in the same
round. ``--against DIR`` also times the commands of another checkout (e.g. ``git worktree add
/tmp/before main``), alternated with this one's, and prints the median ratio before / now.

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
# The command twice in one process; prints the second call's CPU seconds (its work, no imports).
TWICE = """\
import contextlib, io, sys, time
from interp.cli import main
sys.argv[0] = "induction-cliff"
with contextlib.redirect_stdout(io.StringIO()):
    assert main(sys.argv[1:]) == 0
    start = time.process_time()
    assert main(sys.argv[1:]) == 0
print(time.process_time() - start)
"""


def run_cpu(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    """CPU seconds of ``cmd`` as a whole process, from RUSAGE_CHILDREN before and after, and its
    standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def write_curve(path: Path) -> Path:
    """A 201-point IC-loss curve with a cliff at step 30,000 (a logistic drop, a little noise)."""
    import numpy as np

    steps = np.arange(0, 60001, 300)
    noise = np.random.default_rng(0).normal(0.0, 0.01, steps.size)
    loss = 0.5 + 2.0 / (1 + np.exp((steps - 30000.0) / 1500.0)) + noise
    path.write_text("step,ic_loss\n" + "".join(f"{s},{v:.6f}\n" for s, v in zip(steps, loss)))
    return path


def arrangements(root: Path, tmp: Path, tag: str) -> dict[str, tuple[list[str], Path]]:
    """The command-line arrangements of the checkout ``root`` (``tag`` names them)."""
    py = sys.executable
    out = tmp / f"run-{tag.strip(' ()')}"
    train = ["train", "--preset", "tiny", "--set", "steps=1", "--quiet", "--overwrite"]
    train += ["--out", str(out)]
    fit = ["fit", str(tmp / "curve.csv"), "--json", str(tmp / f"fit{tag.strip(' ()')}.json")]
    return {
        f"train 1 step{tag}": ([py, "-c", CLI, *train], root),
        f"train: the run itself{tag}": ([py, "-c", TWICE, *train], root),
        f"fit CURVE.csv{tag}": ([py, "-c", CLI, *fit], root),
        f"fit: the fit itself{tag}": ([py, "-c", TWICE, *fit], root),
        f"transition RUN{tag}": ([py, "-c", CLI, "transition", str(tmp / "tiny-run")], root),
        f"forecast{tag}": ([py, "-c", CLI, "forecast"], root),
        f"train --help{tag}": ([py, "-c", CLI, "train", "--help"], root),
        f"fit --help{tag}": ([py, "-c", CLI, "fit", "--help"], root),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another checkout whose commands are timed too")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="disabled", OMP_NUM_THREADS="1")
    env["INDUCTION_CLIFF_CACHE"] = str(tmp / "cache")
    write_curve(tmp / "curve.csv")
    tiny = ["train", "--preset", "tiny", "--set", "steps=20", "--quiet", "--out"]
    run_cpu(
        [sys.executable, "-c", CLI, *tiny, str(tmp / "tiny-run")],
        env | {"PYTHONPATH": str(ROOT)},
        ROOT,
    )
    base = {
        "python": ([sys.executable, "-c", "pass"], ROOT),
        "import torch": ([sys.executable, "-c", "import torch"], ROOT),
        "import transformer_lens": ([sys.executable, "-c", "import transformer_lens"], ROOT),
    }
    cases = base | arrangements(ROOT, tmp, "")
    if args.against is not None:
        cases |= arrangements(args.against.resolve(), tmp, " (against)")
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name, (cmd, cwd) in cases.items():
            cpu, stdout = run_cpu(cmd, env | {"PYTHONPATH": str(cwd)}, cwd)
            itself = ": the " in name  # the second call's own CPU seconds, printed last
            times[name].append(float(stdout.split()[-1]) if itself else cpu)
        print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f}" for n, t in times.items()))
    torch_s = times["import torch"]
    print(f"\nCPU seconds (user + sys), median of {args.rounds} rounds (ratio to import torch):")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t, torch_s))
        print(f"  {name:36s} {statistics.median(t):6.2f} s   {ratio:5.2f} x import torch")
    for tag in ("", " (against)") if args.against is not None else ("",):
        for whole, work in (
            ("train 1 step", "train: the run itself"),
            ("fit CURVE.csv", "fit: the fit itself"),
        ):
            rest = [a - b for a, b in zip(times[whole + tag], times[work + tag])]
            print(f"  {whole + tag} less its work (start-up): {statistics.median(rest):.2f} s")
    if args.against is not None:
        for what in [n for n in arrangements(ROOT, tmp, "") if ": the " not in n]:
            pairs = zip(times[f"{what} (against)"], times[what])
            print(f"  {what}: against / now {statistics.median(a / b for a, b in pairs):.2f}")
    return 0


if __name__ == "__main__":
    from machine import announce

    announce()
    sys.exit(main())
