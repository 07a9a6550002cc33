"""The collapse-rate table from trained runs: one row per run directory, its fate
(:func:`experiments.catalog.collapse_rate.fate_row`) with the commit it was trained with and
the command that trains it.

    python benchmarks/collapse_rate.py RUN_DIR... --commit SHA --out docs/results/collapse-rate.csv

Rows already in ``--out`` for the same (hidden_bias, lr, seed) are replaced; the others are kept,
so the table grows as runs finish. Then ``induction-cliff reproduce collapse-rate --render-only``
renders the page from it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KEY = ["hidden_bias", "lr", "seed"]


def train_command(run_dir: Path) -> str:
    """The ``induction-cliff train`` line that trains the run (its fields as set for it)."""
    c = json.loads((run_dir / "config.json").read_text())
    t, m = c["train"], c["model"]
    sets = {
        "hidden_bias": m["hidden_bias"],
        "optimizer": t["optimizer"],
        "lr": t["lr"],
        "steps": t["steps"],
        "eval_every": t["eval_every"],
        "live_forecast": str(t["live_forecast"]).lower(),
        "num_threads": t["num_threads"],
    }
    parts = ["induction-cliff", "train", "--preset", "paper-fig3", "--seed", str(t["seed"])]
    for k, v in sets.items():
        parts += ["--set", f"{k}={v}"]
    return shlex.join(parts)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from interp.experiments import load_catalogue

    load_catalogue()  # the checkout's experiments/, whichever folder this runs from
    from experiments.catalog.collapse_rate import COLUMNS, fate_row

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--commit", required=True, help="the commit the runs were trained with")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    new = pd.DataFrame(
        [
            {**fate_row(d), "commit": args.commit, "command": train_command(d)}
            for d in args.runs
            if (d / "metrics.csv").exists()
        ],
        columns=list(COLUMNS),
    )
    if args.out.exists():
        old = pd.read_csv(args.out)
        keep = ~old.set_index(KEY).index.isin(new.set_index(KEY).index)
        new = pd.concat([old[keep], new], ignore_index=True)
    new = new.sort_values(KEY, kind="stable")[list(COLUMNS)]
    args.out.write_text(new.to_csv(index=False))
    print(f"{len(new)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
