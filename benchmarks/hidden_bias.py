"""The classifier's hidden biases, scalar (the author's code) against per-unit: paired transitions.

Trains ``paper-fig3`` with the same seeds in both forms (``--set hidden_bias=scalar`` and
``per_unit``; the same seed gives the same initial network in both) at each learning rate asked,
and writes one row per run to a CSV: the IC-accuracy logistic midpoint (``transition_ic_acc``, what
``induction-cliff transition`` reports) and the IC-loss cliff step (``transition_ic_loss``, what the
forecasters are calibrated and scored on), both empty when the curve shows no transition.

    python benchmarks/hidden_bias.py train --runs runs/hidden-bias --lr 0.03 --seeds 0-2
    python benchmarks/hidden_bias.py table --runs runs/hidden-bias \
        --out docs/results/hidden-bias.csv
    python benchmarks/hidden_bias.py units --runs runs/hidden-bias    # biases, active units

``train`` runs one training process at a time, one torch thread, in the order seed 0 scalar, seed
0 per-unit, seed 1 scalar, ... (so a budget cut leaves pairs). A run is trained in chunks: first to
``--first`` steps, then ``--chunk`` more at a time with ``--resume``, until its IC accuracy has
transitioned and the curve reaches ``max(3000, 0.15 x the transition step)`` beyond it, its
network has collapsed to the constant-logit loss ``log L`` (:func:`collapsed`), or it reaches
``--cap`` steps. Resuming continues bit for bit, so a run's metrics are those of the one command
the CSV's ``command`` column gives (its final ``steps``); only the weight checkpoints' log-spaced
steps differ, which do not change the curve. Interrupted, ``train`` picks each run up where it
stopped. Each run's wall time (the sum of its chunks, process start-up included), the commit it
was trained with and its command are kept in ``RUNS/runs.json``; ``table`` reads them and the run
directories (nothing is trained, nothing else is written), and leaves out a run still short of
its end.

The runs train with the code beside this script; to keep a long batch on one commit while the
checkout changes, run it from an exported copy::

    git archive HEAD | tar -x -C /tmp/src && git rev-parse HEAD > /tmp/src/COMMIT
    python /tmp/src/benchmarks/hidden_bias.py train --runs $PWD/runs/hidden-bias --lr 0.03
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

COLUMNS = (
    "hidden_bias,lr,seed,steps,eval_every,transition_ic_acc,transition_ic_loss,transitioned,"
    "final_ic_acc,wall_s,commit,command"
).split(",")
FORMS = ("scalar", "per_unit")
EVAL_EVERY = 250
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's toolkit, for the runs and for reading them


def seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def run_name(form: str, lr: float, seed: int) -> str:
    return f"lr{lr:g}-{form}-seed{seed}"


def train_command(form: str, lr: float, seed: int, steps: int, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "interp.cli",
        "train",
        "--preset",
        "paper-fig3",
        "--seed",
        str(seed),
        "--out",
        str(out),
        "--quiet",
        "--set",
        f"hidden_bias={form}",
        "--set",
        f"lr={lr:g}",
        "--set",
        f"steps={steps}",
        "--set",
        f"eval_every={EVAL_EVERY}",
        "--set",
        "live_forecast=false",
        "--set",
        "num_threads=1",
    ]


def transitions(metrics) -> tuple[float | None, float | None]:
    """``(IC-accuracy logistic midpoint, IC-loss cliff step)``, None where there is none."""
    from interp.analysis.transition import detect_transition
    from phenomenology.fit import observed_transition

    acc = detect_transition(metrics["step"], metrics["ic_acc"])
    loss = observed_transition(metrics, column="ic_loss")
    return (acc.step if acc.transitioned else None), loss["transition_step"]


def collapsed(metrics, L: int = 32) -> bool:
    """Whether the network sits at the constant-logit loss ``log L``: every IC and training loss
    of the last ``max(3000, 30%)`` steps within 1e-3 of it, from step 6000 on. (Scalar hidden
    biases at lr 0.03 take this state within about 1000 steps: every hidden layer's bias falls,
    and the last layer's units all but die; a network on its plateau sits well below ``log L``.)"""
    last = int(metrics["step"].iloc[-1])
    if last < 6000:
        return False
    tail = metrics[metrics["step"] >= last - max(3000, 0.3 * last)]
    losses = tail[["ic_loss", "train_loss"]].to_numpy(dtype=float)
    return bool((abs(losses - math.log(L)) < 1e-3).all())


def done(metrics, cap: int) -> bool:
    last = int(metrics["step"].iloc[-1]) if len(metrics) else 0
    if last >= cap or collapsed(metrics):
        return True
    t_acc, t_loss = transitions(metrics) if len(metrics) >= 5 else (None, None)
    if t_acc is None or t_loss is None:
        return False
    return last >= max(t_acc, t_loss) + max(3000.0, 0.15 * max(t_acc, t_loss))


def commit() -> str:
    """The commit the code under REPO is: ``REPO/COMMIT`` in an exported copy (``git archive``,
    so that editing the checkout cannot change a run half-way), else the checkout's HEAD, marked
    ``+dirty`` if the toolkit's files differ from it."""
    if (REPO / "COMMIT").is_file():
        return (REPO / "COMMIT").read_text().strip()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "interp", "phenomenology"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return head + ("+dirty" if dirty else "")


def _load(runs: Path) -> dict:
    f = runs / "runs.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _save(runs: Path, book: dict) -> None:
    tmp = runs / "runs.json.tmp"
    tmp.write_text(json.dumps(book, indent=1, sort_keys=True))
    os.replace(tmp, runs / "runs.json")


def cmd_train(args) -> int:
    from interp.io.rundir import load_run

    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    book = _load(runs)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    for seed in seeds(args.seeds):
        for form in args.forms.split(","):
            name = run_name(form, args.lr, seed)
            out = (runs / name).resolve()
            entry = book.setdefault(name, {"wall_s": 0.0, "steps": 0})
            while True:
                metrics = load_run(out).metrics if (out / "config.json").exists() else None
                if metrics is not None and len(metrics) and done(metrics, args.cap):
                    entry["complete"] = True
                    _save(runs, book)
                    break
                last = int(metrics["step"].iloc[-1]) if metrics is not None and len(metrics) else 0
                steps = min(args.cap, args.first if last == 0 else last + args.chunk)
                cmd = train_command(form, args.lr, seed, steps, out)
                if metrics is not None:
                    cmd.append("--resume")
                sha = commit()
                if entry.get("commit", sha) != sha:
                    print(f"{name}: trained with {entry['commit']}, now at {sha}", file=sys.stderr)
                    return 1
                t0 = time.perf_counter()
                subprocess.run(cmd, cwd=REPO, env=env, check=True)
                entry["wall_s"] += time.perf_counter() - t0
                entry.update(commit=sha, steps=steps, lr=args.lr, seed=seed, hidden_bias=form)
                _save(runs, book)
                print(f"{name}: {steps} steps, {entry['wall_s']:.0f} s", file=sys.stderr)
    return 0


def cmd_table(args) -> int:
    import pandas as pd

    from interp.io.rundir import load_run

    runs = Path(args.runs)
    book = _load(runs)
    rows = []
    for name, entry in sorted(book.items(), key=lambda kv: (-kv[1]["lr"], kv[1]["seed"])):
        if not entry.get("complete"):
            print(f"{name}: not trained to its end yet; left out", file=sys.stderr)
            continue
        run = load_run(runs / name)
        m = run.metrics
        t_acc, t_loss = transitions(m)
        steps = int(m["step"].iloc[-1])
        cmd = train_command(entry["hidden_bias"], entry["lr"], entry["seed"], steps, runs / name)
        cmd[0] = "python"
        rows.append(
            {
                "hidden_bias": run.model_config.hidden_bias,
                "lr": run.train_config.lr,
                "seed": run.train_config.seed,
                "steps": steps,
                "eval_every": run.train_config.eval_every,
                "transition_ic_acc": None if t_acc is None else round(t_acc, 1),
                "transition_ic_loss": None if t_loss is None else round(t_loss, 1),
                "transitioned": t_acc is not None and t_loss is not None,
                "final_ic_acc": round(float(m["ic_acc"].iloc[-1]), 4),
                "wall_s": round(entry["wall_s"], 1),
                "commit": entry["commit"],
                "command": shlex.join(cmd),
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    text = table.to_csv(index=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    print(text, end="")
    return 0


def cmd_units(args) -> int:
    """Per run: each hidden layer's bias and the share of its units active (ReLU > 0) on the IC
    set at the last checkpoint, and the spread of the logits (0 for a collapsed network)."""
    import torch

    from interp.io.rundir import load_run

    runs = Path(args.runs)
    print("run,step,bias_0,bias_1,bias_2,active_0,active_1,active_2,logit_std")
    book = _load(runs)
    for name in sorted(book, key=lambda n: (-book[n]["lr"], book[n]["seed"])):
        if not book[name].get("complete"):
            continue
        run = load_run(runs / name)
        step = run.checkpoint_steps[-1]
        model = run.load_model(step)
        ic = run.eval_sets()["ic"]
        with torch.no_grad():
            logits, cache = model.run_with_cache(ic.tokens, ic.positions)
        bias = [f"{layer.bias.mean().item():.4f}" for layer in model.classifier.hidden]
        active = [
            f"{(cache[f'classifier.hook_hidden_{i}'] > 0).float().mean().item():.4f}"
            for i in range(len(model.classifier.hidden))
        ]
        spread = logits.std(-1).mean().item()
        print(",".join([name, str(step), *bias, *active, f"{spread:.3g}"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train the paired runs (resumable)")
    t.add_argument("--runs", required=True, help="folder of the run directories")
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--seeds", default="0-2", help="e.g. 0-2 or 0,3")
    t.add_argument("--forms", default=",".join(FORMS), choices=[*FORMS, ",".join(FORMS)])
    t.add_argument("--first", type=int, default=9000, help="steps of the first chunk")
    t.add_argument("--chunk", type=int, default=1500, help="steps added per later chunk")
    t.add_argument("--cap", type=int, default=30000, help="most steps a run gets")
    s = sub.add_parser("table", help="write the CSV from the trained runs")
    s.add_argument("--runs", required=True)
    s.add_argument("--out", help="CSV to write (else stdout only)")
    u = sub.add_parser("units", help="hidden biases and active units at each run's last checkpoint")
    u.add_argument("--runs", required=True)
    args = ap.parse_args(argv)
    return {"train": cmd_train, "table": cmd_table, "units": cmd_units}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
