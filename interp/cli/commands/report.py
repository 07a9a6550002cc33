"""``induction-cliff report``: one self-contained offline HTML page per run or group of runs."""

from __future__ import annotations

from pathlib import Path

NAME = "report"
HELP = (
    "one self-contained offline HTML page: config and deviations, dynamics, transition, fit and "
    "forecast, attention explorer (runs grouped by config)"
)
EPILOG = """\
examples:
  induction-cliff report runs/demo                   # writes runs/demo/report.html
  induction-cliff report runs/fig1d/*/ --out fig1d.html --no-fit
"""


def add_arguments(p) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    p.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="HTML file (default RUN_DIR/report.html; required for several)",
    )
    p.add_argument(
        "--no-fit", action="store_true", help="skip the nested-logit fit and forecast (faster)"
    )
    p.add_argument(
        "--sequences",
        type=int,
        default=3,
        help="explorer sequences per IC/IC2/IW set (at most 256: each adds its attention maps at "
        "every checkpoint to the page)",
    )


def run(args) -> int:
    from interp.io.budget import MAX_EXPLORER_SEQUENCES, check_count
    from interp.io.outputs import writing_into
    from interp.io.paths import check_output_path
    from interp.viz.explorer import ExplorerConfig
    from interp.viz.report import ReportConfig, check_report_inputs, write_report

    check_count("--sequences", args.sequences, 1, MAX_EXPLORER_SEQUENCES)  # the page's size
    named = Path(args.out) if args.out is not None else None
    if named is not None:
        check_output_path(named)  # a link (dangling or not), before any run is read
    if named is not None and not named.is_dir() and named.suffix.lower() not in (".html", ".htm"):
        raise ValueError(
            f"--out {args.out} is invalid: a report is one HTML file; give a name ending in .html"
        )
    config = ReportConfig(fit=not args.no_fit, explorer=ExplorerConfig(n_sequences=args.sequences))
    _, out = check_report_inputs(args.run_dirs, args.out)
    with writing_into([out]):  # RUN_DIR/report.html: under the run's lock
        path = write_report(args.run_dirs, args.out, config)  # errors: one line, by main
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): open it in a browser (works offline)"
    )
    return 0
