"""``induction-cliff transition``: plateau and transition of runs, one row each."""

from __future__ import annotations

NAME = "transition"
HELP = "plateau and transition report for one or more runs"
EPILOG = """\
examples:
  induction-cliff transition runs/fig1d/*/
  induction-cliff transition runs/demo --measure tila2 --out transitions.csv
"""


def add_arguments(p) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    p.add_argument(
        "--measure",
        default="ic_acc",
        metavar="COLUMN",
        help="the metrics.csv column to detect the jump on",
    )
    p.add_argument("--out", default=None, metavar="PATH", help="also write the report as CSV there")


def run(args) -> int:
    from interp.analysis.transition import transition_report
    from interp.io.atomic import write_text_atomic
    from interp.io.outputs import writing_into

    with writing_into([args.out] if args.out else []):  # a link refused before any work
        report = transition_report(args.run_dirs, measure=args.measure)  # errors: one line
        print(report.to_string(index=False))
        print(_key(args.measure, "cliff_step" in report.columns))
        if args.out:
            write_text_atomic(args.out, report.to_csv(index=False))
            print(f"wrote {args.out}")
    return 0


def _key(measure: str, cliff: bool) -> str:
    """What the step columns are, in the toolkit's one vocabulary (:mod:`interp.viz.vocabulary`)."""
    from interp.viz.vocabulary import CLIFF, OBSERVED, OBSERVED_DEFINITION

    what = (
        f"the {OBSERVED} ({OBSERVED_DEFINITION})"
        if measure == "ic_acc"
        else f"the {measure} midpoint"
    )
    key = f"step: {what}"
    if cliff:
        key += f"; cliff_step: the {CLIFF} (steepest drop of the IC loss in log-step)"
    return key
