"""``induction-cliff reproduce``: a declared experiment's tier, trained where missing."""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli._base import print_error

NAME = "reproduce"
HELP = (
    "run a declared experiment's tier (training what is missing), write its CSV and page "
    "(induction-cliff list experiments)"
)
EPILOG = """\
The project's own experiments are the folder experiments/ of a checkout of the repository (next
to interp/; not installed): run this from a clone installed with `pip install -e .`. An
experiment of a plugin (--plugin FILE) needs no checkout.

examples:
  induction-cliff reproduce tiny-k --tier quick
  induction-cliff reproduce all --render-only --out docs/results
"""


def add_arguments(p) -> None:
    p.add_argument(
        "name", metavar="EXPERIMENT", help="an experiment (all: every page, --render-only)"
    )
    p.add_argument("--tier", choices=("quick", "full"), default="quick", help="which tier")
    p.add_argument(
        "--backend", default="process", choices=["process", "ray", "serial"], help="as for sweep"
    )
    p.add_argument("--workers", type=int, default=None, help="concurrent runs (as for sweep)")
    p.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="folder of EXPERIMENT.csv and EXPERIMENT.md "
        "(default docs/results for full, runs/results for quick)",
    )
    p.add_argument(
        "--runs",
        default="runs/experiments",
        metavar="PATH",
        help="where the runs go (runs/experiments/EXPERIMENT/...)",
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="rebuild the page and figure from EXPERIMENT.csv in --out alone, without training",
    )
    p.add_argument("--no-figures", action="store_true", help="the page only, no figure")


def _render(args, experiments) -> int:
    from interp.experiments import render

    out = Path(args.out or "docs/results")
    if args.name == "all" and not any((out / f"{e.name}.csv").exists() for e in experiments):
        raise ValueError(
            f"--out {out}: holds no results table (EXPERIMENT.csv); --render-only rebuilds the "
            "pages from the tables committed in docs/results of a checkout of the repository: "
            "run it there, or give --out a folder that holds them"
        )
    for e in experiments:
        if args.name == "all" and not (out / f"{e.name}.csv").exists():
            print(f"skipped {e.name}: no {out / (e.name + '.csv')}", file=sys.stderr)
            continue
        for path in render(e, out, figures=not args.no_figures):
            print(f"wrote {path}")
    if args.name == "all":
        from interp.experiments import results_index
        from interp.io.atomic import write_text_atomic

        write_text_atomic(out / "README.md", results_index(out))
        print(f"wrote {out / 'README.md'}")
    return 0


def run(args) -> int:
    from interp.experiments import (
        EXPERIMENTS,
        check_rows,
        get_experiment,
        reproduce,
        require_catalogue,
    )
    from interp.experiments.sweep import SweepDirectoryError

    require_catalogue("reproduce")
    names = sorted(EXPERIMENTS) if args.name == "all" and args.render_only else [args.name]
    experiments = [get_experiment(n) for n in names]  # an unknown name fails before any work
    from interp.io.paths import check_output_path

    for given in (args.out, None if args.render_only else args.runs):
        if given is not None:
            check_output_path(given)  # a symbolic link is refused before anything is read
    if args.render_only:
        return _render(args, experiments)
    if args.name == "all":
        raise ValueError("reproduce all is only for --render-only; name one experiment")
    e = experiments[0]
    out = Path(args.out or ("docs/results" if args.tier == "full" else "runs/results"))
    line = f"induction-cliff reproduce {e.name} --tier {args.tier}"
    try:
        rows, written = reproduce(
            e,
            tier=args.tier,
            out=out,
            runs=args.runs,
            backend=args.backend,
            workers=args.workers,
            figures=not args.no_figures,
            command=line,
            log=lambda text: print(text, file=sys.stderr),
        )
    except (SweepDirectoryError, RuntimeError) as err:  # a sweep folder in the way, a failed run
        print_error((str(err).strip().splitlines() or [type(err).__name__])[0])
        return 3
    for path in written:
        print(f"wrote {path}")
    failed = 0
    if args.tier == "quick":
        for ok, text in check_rows(e, rows):
            print(f"{'ok  ' if ok else 'FAIL'} {text}")
            failed += not ok
    return 1 if failed else 0
