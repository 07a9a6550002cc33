"""``induction-cliff sweep-summary``: a sweep's summary and figure rebuilt from disk."""

from __future__ import annotations

import sys

NAME = "sweep-summary"
HELP = "rebuild a sweep's summary and figure from what is on disk"
EPILOG = """\
example:
  induction-cliff sweep-summary runs/fig2-kb --formats png
"""


def add_arguments(p) -> None:
    p.add_argument("sweep_dir", metavar="SWEEP_DIR", help="a sweep folder (with sweep.json)")
    p.add_argument("--no-figures", action="store_true", help="only the summary tables")
    p.add_argument("--formats", default="png,pdf,html", help="figure formats (comma-separated)")


def run(args) -> int:
    from interp.cli.commands.sweep import print_summary
    from interp.experiments.sweep import (
        SweepDirectoryError,
        SweepSpec,
        load_manifest,
        summarize_sweep,
        write_summary,
        write_sweep_figures,
    )

    try:
        spec = SweepSpec.from_dict(load_manifest(args.sweep_dir)["spec"])
        summary = summarize_sweep(args.sweep_dir)
    except SweepDirectoryError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    paths = write_summary(args.sweep_dir, summary)
    if not args.no_figures:
        paths += write_sweep_figures(args.sweep_dir, summary, tuple(args.formats.split(",")))
    print_summary(summary, spec.fields)
    for p in paths:
        print(f"wrote {p}")
    return 0
