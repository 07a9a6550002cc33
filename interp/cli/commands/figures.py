"""``induction-cliff figures``: the standard figure set of runs, sized for print."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli._base import print_error

NAME = "figures"
HELP = "write the standard figure set of runs (PDF/PNG/SVG sized for print, or HTML)"
EPILOG = """\
examples:
  induction-cliff figures runs/demo --out runs/demo/figures
  induction-cliff figures runs/fig1d/*/ --out figs --width single --formats pdf
  induction-cliff figures runs/demo --out figs --width 5.5 --formats png,html
"""


def _width(text: str):
    from interp.viz.export import paper_style

    try:
        paper_style(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_arguments(p) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    p.add_argument(
        "--out", required=True, metavar="PATH", help="folder for the figures (created if missing)"
    )
    p.add_argument(
        "--formats",
        default="pdf,png",
        help="comma-separated: pdf,png,svg,html (pdf/png/svg need chromium; html does not)",
    )
    p.add_argument(
        "--width",
        type=_width,
        default=None,
        metavar="single|double|INCHES",
        help="width of every figure: single (3.5 in, a journal column), double (7 in) or inches; "
        "text stays >= 7 pt (default: each figure's own, double or single)",
    )


def _browser_problem(formats) -> str | None:
    """Why the static formats cannot be written (no chromium), or None."""
    from interp.viz.export import STATIC_FORMATS, find_chromium

    static = [f for f in formats if f in STATIC_FORMATS]
    if not static:
        return None
    try:
        browser = find_chromium()
    except RuntimeError as err:  # BROWSER_PATH set to something that is not a browser
        return f"--formats {','.join(static)}: {err}"
    if browser is None:
        return (
            f"--formats {','.join(static)} needs chromium (apt-get install -y chromium, or "
            "BROWSER_PATH=/path/to/chrome); --formats html works without it"
        )
    return None


def run(args) -> int:
    from interp.viz.figures import write_standard_figures

    formats = tuple(f.strip() for f in args.formats.split(","))
    problem = _browser_problem(formats)  # before any work
    if problem:
        print_error(problem)
        return 3
    from interp.io.outputs import writing_into
    from interp.io.paths import check_output_path
    from interp.io.rundir import load_run
    from interp.viz.fit_overlay import saved_fit

    check_output_path(args.out)  # a link (dangling or not), before any run is read
    for run_dir in args.run_dirs:
        saved_fit(load_run(run_dir))  # a clear error (fit.json too) before anything is created
    with writing_into([args.out], folders=True):  # inside a run: under its lock, no links
        paths = write_standard_figures(
            [Path(p) for p in args.run_dirs], Path(args.out), formats=formats, width=args.width
        )
    print(f"wrote {len(paths)} files to {args.out}:")
    for p in paths:
        print(f"  {p}")
    return 0
