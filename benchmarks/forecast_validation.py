"""How good the transition forecast is on finished runs: its held-out error table.

For every finished run (its ``metrics.csv`` reaches its config's ``train.steps``) whose IC-loss
curve shows a transition, and for cut-offs at 50%, 80% and 90% of its plateau (from the plateau's
start to its onset, as ``induction-cliff fit --fraction`` reads them), the forecaster of
:mod:`phenomenology.forecast` sees only the rows up to the cut-off; the table gives, per cut-off,
the median absolute forecast error as a percentage of the observed transition step and how often
the 80% interval contains the observed step.

    python benchmarks/forecast_validation.py RUN_DIR_OR_SWEEP... [--csv per_run.csv]
    python benchmarks/forecast_validation.py DEV_RUNS... --calibrate   # measure CALIBRATION
    python benchmarks/forecast_validation.py RUNS... --method progress [--calibrate]

``--calibrate`` prints the ratios ``observed / raw`` of the uncalibrated fit and their median,
min and max, the numbers :data:`phenomenology.forecast.CALIBRATIONS` holds for the runs'
optimiser (measure them on development runs only, never on the runs you validate on; give runs
of one optimiser). Without ``--calibrate`` each run is forecast with its own optimiser's
calibration. ``--method progress`` validates (or calibrates) the progress forecaster of
:mod:`phenomenology.progress` (:data:`PROGRESS_CALIBRATIONS`) instead of the template fit. A
folder that is not a run directory is searched for run directories (a sweep). Runs are only read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

FRACTIONS = (0.5, 0.8, 0.9)


def run_dirs(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if (p / "config.json").exists():
            out.append(p)
        elif p.is_dir():
            out.extend(
                sorted(
                    c.parent for c in p.rglob("config.json") if (c.parent / "metrics.csv").exists()
                )
            )
        else:
            print(f"error: {p}: no such run directory or sweep folder", file=sys.stderr)
            sys.exit(2)
    return out


def evaluate(
    run: Path, calibration=None, method: str = "template"
) -> tuple[list[dict], str | None]:
    """Rows (one per cut-off) for one run, or ``([], why it is skipped)``."""
    from interp.io.rundir import RunDirectoryError, read_metrics
    from phenomenology.fit import _clean, observed_transition
    from phenomenology.forecast import forecast_curve
    from phenomenology.progress import PROGRESS_COLUMN, progress_forecast

    # The config is read as plain JSON (only train.steps and the task's L, N, B, B_eval), so runs
    # written by a newer format version of the toolkit can be validated too.
    try:
        config = json.loads((run / "config.json").read_text())
        t, steps = config["task"], int(config["train"]["steps"])
        optimizer = config["train"].get("optimizer", "sgd")
        b_eval = t.get("B_eval") or (t["B"] if t["B"] > 0 else 1)
        task = {"L": t["L"], "N": t["N"], "B": int(b_eval)}
        m = read_metrics(run / "metrics.csv").frame
    except (OSError, ValueError, KeyError, TypeError, RunDirectoryError) as err:
        return [], f"unreadable: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
    if "ic_loss" not in m.columns or m["ic_loss"].dropna().empty:
        return [], "no ic_loss"
    if method == "progress" and (
        PROGRESS_COLUMN not in m.columns or m[PROGRESS_COLUMN].dropna().empty
    ):
        return [], f"no {PROGRESS_COLUMN}"
    if int(m["step"].max()) != steps:
        return [], f"unfinished (step {int(m['step'].max())} of {steps})"
    df = _clean(m, ["ic_loss"])
    obs = observed_transition(df, column="ic_loss")
    if not obs["transitioned"]:
        if obs["reason"].startswith("the steepest drop is at the last point"):
            return (
                [],
                "ends at its cliff (the steepest drop is its last evaluation): train it longer",
            )
        return [], f"no transition ({obs['reason']})"
    start, onset, actual = obs["plateau_start_step"], obs["onset_step"], obs["transition_step"]
    after = int((df["step"] > actual).sum())
    # A cliff in the last two evaluations is found (the smoothing keeps it there) but is known
    # to fewer points after it than usual: validated, and marked.
    near_end = f"cliff {after} evaluation(s) before the end" if after < 2 else ""
    progress = _clean(m, [PROGRESS_COLUMN]) if method == "progress" else None
    rows = []
    for f in FRACTIONS:
        cut = start + f * (onset - start)
        part = df[df["step"] <= cut]
        t0 = time.perf_counter()
        if progress is not None:
            p = progress[progress["step"] <= cut]
            fc = progress_forecast(
                p["step"], p[PROGRESS_COLUMN], optimizer=optimizer, calibration=calibration
            )
        else:
            fc = forecast_curve(
                part["step"],
                part["ic_loss"],
                task=task,
                calibration=calibration,
                check_plateau=False,
                optimizer=optimizer,
            )
        rows.append(
            {
                "run": str(run),
                "fraction": f,
                "cutoff": float(part["step"].iloc[-1]),
                "observed": actual,
                "forecast": fc.step,
                "low": fc.low,
                "high": fc.high,
                "raw": fc.raw_step,
                "seconds": time.perf_counter() - t0,
                "reason": fc.reason,
                "optimizer": optimizer,
                "note": near_end,
            }
        )
    return rows, None


def skipped_summary(reasons: list[str], n_runs: int) -> str:
    """One line: how many of the runs were not validated, and why (counted by reason)."""
    if not reasons:
        return f"skipped: none of {n_runs} runs"
    kinds: dict[str, int] = {}
    for why in reasons:
        key = why.split(" (")[0]
        kinds[key] = kinds.get(key, 0) + 1
    said = "; ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"skipped: {len(reasons)} of {n_runs} runs ({said})"


def table(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for f, g in rows.groupby("fraction"):
        ok = g.dropna(subset=["forecast"])
        err = (ok["forecast"] - ok["observed"]).abs() / ok["observed"] * 100
        signed = (ok["forecast"] - ok["observed"]) / ok["observed"] * 100
        cover = (ok["low"] <= ok["observed"]) & (ok["observed"] <= ok["high"])
        out.append(
            {
                "cut-off (of plateau)": f"{f:.0%}",
                "n runs": len(g),
                "forecasts": len(ok),
                "median |error| %": round(float(err.median()), 1) if len(ok) else math.nan,
                "median error %": round(float(signed.median()), 1) if len(ok) else math.nan,
                "80% coverage": f"{int(cover.sum())}/{len(g)}",
            }
        )
    return pd.DataFrame(out)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="+", help="run directories or sweep folders")
    p.add_argument("--csv", default=None, help="also write the per-run rows here")
    p.add_argument("--calibrate", action="store_true", help="print the lead-time ratios")
    p.add_argument(
        "--method",
        choices=("template", "progress"),
        default="template",
        help="the template fit of the IC loss (phenomenology.forecast) or the growth of TILA2 "
        "(phenomenology.progress)",
    )
    args = p.parse_args()
    rows, skipped = [], []
    runs = run_dirs(args.paths)
    for run in runs:
        got, why = evaluate(
            run,
            calibration={"k": 1, "k_low": 1, "k_high": 1} if args.calibrate else None,
            method=args.method,
        )
        if why:
            print(f"skipped {run}: {why}")
            skipped.append(why)
        rows.extend(got)
    if not rows:
        print(skipped_summary(skipped, len(runs)), file=sys.stderr)
        print("error: no finished run with a transition", file=sys.stderr)
        sys.exit(1)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.assign(run=df["run"].map(lambda s: Path(s).name)).round(1).to_string(index=False))
        if args.calibrate:
            ratio = (df["observed"] / df["raw"]).dropna()
            print("ratio observed / raw:", np.round(ratio.to_numpy(), 3).tolist())
            print(
                f"k {ratio.median():.3f}  k_low {ratio.min():.3f}  k_high {ratio.max():.3f}  "
                f"from {len(ratio)} forecasts"
            )
        else:
            print(table(df).to_string(index=False))
        print(
            f"forecast time: median {df['seconds'].median():.3f} s, max {df['seconds'].max():.3f} s"
        )
    print(skipped_summary(skipped, len(runs)))
    marked = sorted({r["run"] for r in rows if r["note"]})
    if marked:
        print(f"validated with a cliff in their last 2 evaluations: {len(marked)} run(s)")
    if args.csv:
        df.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
