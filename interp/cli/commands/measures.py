"""``induction-cliff measures``: the progress measures recomputed at every checkpoint."""

from __future__ import annotations

NAME = "measures"
HELP = (
    "recompute the progress measures at every checkpoint of runs (RUN_DIR/checkpoint_measures.csv)"
)
EPILOG = """\
examples:
  induction-cliff measures runs/demo
  induction-cliff measures runs/fig3-s0 runs/fig3-s1 --n 512 --score-terms
"""


def add_arguments(p) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    p.add_argument("--n", type=int, default=None, help="IC sequences (default: the run's n_eval)")
    p.add_argument(
        "--score-terms",
        action="store_true",
        help="also the positional part of layer-1 scores on the label rows (l1_pos_margin, "
        "l1_pos_margin_content_free, l1_pos_share; interp.analysis.score_terms)",
    )


def run(args) -> int:
    from interp.analysis.over_training import (
        measures_over_checkpoints,
        score_terms_over_checkpoints,
    )
    from interp.io.budget import check_eval_n
    from interp.io.outputs import writing
    from interp.io.rundir import load_run

    check_eval_n("--n", args.n)
    runs = [load_run(d) for d in args.run_dirs]  # every directory checked before any work
    for run_ in runs:
        run_.require_checkpoints()
        check_eval_n("--n", args.n, run_)  # its evaluation sets fit in memory
    with writing([run_.path for run_ in runs]):  # locked, links and write access checked
        for run_ in runs:
            df = measures_over_checkpoints(run_, n=args.n)
            if args.score_terms:
                import pandas as pd

                terms = score_terms_over_checkpoints(run_, n=args.n)
                df = pd.concat([df, terms], ignore_index=True)
            path = run_.write_output("checkpoint_measures.csv", df)
            print(f"wrote {path} ({len(df)} rows)")
    return 0
