"""The collapse-rate table from trained runs: one row per run directory, its fate
(:func:`experiments.catalog.collapse_rate.fate_row`) with the commit it was trained with and
the command that trains it, and its curve (the last hidden layer's share of firing units and the
IC accuracy at every evaluation) in ``collapse-rate-curves.csv`` beside ``--out``.

    python benchmarks/collapse_rate.py RUN_DIR... --commit SHA --out docs/results/collapse-rate.csv

With ``--continued``, the runs are runs trained again past their budget (the experiment's
``CONTINUE`` sweeps): their curves are kept in ``collapse-rate-continued.csv`` beside ``--out``.

Rows (and curves) already there for the same (hidden_bias, lr, seed) are replaced; the others are
kept, so the tables grow as runs finish. Every row with a recorded curve is then judged again by
today's rule over its longest curve (``rejudged``); with no run directory, that is all it
does. Then ``induction-cliff reproduce collapse-rate --render-only`` renders the page from them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _merge(new, path: Path, key: list[str], columns: list[str]):
    import pandas as pd

    if path.exists() and path.stat().st_size:
        old = pd.read_csv(path)
        keep = ~old.set_index(key).index.isin(new.set_index(key).index)
        parts = [f for f in (old[keep], new) if len(f)]  # an empty frame would make text columns
        new = pd.concat(parts, ignore_index=True) if parts else old.iloc[:0]
    sort = [*key, "step"] if "step" in columns else key
    return new.sort_values(sort, kind="stable")[columns]


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from interp.analysis.collapse import last_layer_column
    from interp.experiments import load_catalogue

    load_catalogue()  # the checkout's experiments/, whichever folder this runs from
    from experiments.catalog.collapse_rate import (
        COLUMNS,
        CONTINUED,
        CURVES,
        KEY,
        checked_curves,
        fate_row,
        rejudged,
        train_command,
        with_continued,
    )
    from experiments.catalog.collapse_warning import CURVE_COLUMNS, curve_rows

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path)
    p.add_argument("--commit", required=True, help="the commit the runs were trained with")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--continued", action="store_true", help="runs trained past their budget")
    args = p.parse_args(argv)
    done = [d for d in args.runs if (d / "metrics.csv").exists()]
    rows, curves = [], []
    for d in done:  # every run read before anything is written
        try:
            if not args.continued:
                rows.append({**fate_row(d), "commit": args.commit, "command": train_command(d)})
            n_mlp = int(json.loads((d / "config.json").read_text())["model"]["n_mlp_layers"])
            curves.append(curve_rows(d, last_layer_column(n_mlp)))
        except (OSError, ValueError, KeyError, pd.errors.EmptyDataError) as err:
            print(f"error: {d}: a damaged run file ({err}); nothing was written", file=sys.stderr)
            return 3
    table = pd.read_csv(args.out) if args.out.exists() else pd.DataFrame(columns=list(COLUMNS))
    if rows:
        table = _merge(pd.DataFrame(rows, columns=list(COLUMNS)), args.out, KEY, list(COLUMNS))
    curve_path = args.out.parent / (CONTINUED if args.continued else CURVES)
    curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=CURVE_COLUMNS)
    curve = _merge(curve, curve_path, KEY, list(CURVE_COLUMNS))
    other_path = args.out.parent / (CURVES if args.continued else CONTINUED)
    other = pd.read_csv(other_path) if other_path.exists() else pd.DataFrame(columns=CURVE_COLUMNS)
    budget_curves, longer = (other, curve) if args.continued else (curve, other)
    try:  # a damaged curve file is refused before anything is written
        checked_curves(budget_curves, CURVES)
        checked_curves(longer, CONTINUED)
        table = rejudged(table.reset_index(drop=True), with_continued(budget_curves, longer))
    except ValueError as err:
        print(f"error: {err}; nothing was written", file=sys.stderr)
        return 3
    args.out.write_text(table.to_csv(index=False))
    curve_path.write_text(curve.to_csv(index=False))
    print(f"{len(table)} rows -> {args.out}; {len(curve)} curve points -> {curve_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
