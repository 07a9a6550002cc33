"""``induction-cliff sweep-summary``: a sweep's summary and figure rebuilt from disk."""

from __future__ import annotations

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
        SweepSpec,
        load_manifest,
        summarize_sweep,
        write_summary,
        write_sweep_figures,
    )
    from interp.io.outputs import writing

    spec = SweepSpec.from_dict(load_manifest(args.sweep_dir)["spec"])
    with writing(args.sweep_dir):  # refused while the sweep runs
        summary = summarize_sweep(args.sweep_dir)  # errors: one line and code, by main
        paths = write_summary(args.sweep_dir, summary)
        if not args.no_figures:
            formats = tuple(args.formats.split(","))
            paths += write_sweep_figures(args.sweep_dir, summary, formats)
    print_summary(summary, spec.fields)
    for p in paths:
        print(f"wrote {p}")
    return 0
