"""``induction-cliff demo``: train the demo run and write its figures and report."""

from __future__ import annotations

NAME = "demo"
HELP = (
    "train the demo preset (minutes on 2 cores), then write its transition, fit, figures and "
    "report (what scripts/demo.sh does after setup)"
)
EPILOG = """\
examples:
  induction-cliff demo                     # runs/demo, runs/demo/figures, runs/demo/report.html
  induction-cliff demo --out my-demo --overwrite
"""


def add_arguments(p) -> None:
    p.add_argument("--out", default="runs/demo", metavar="DIR", help="run folder (runs/demo)")
    p.add_argument("--overwrite", action="store_true", help="train again over a run already in DIR")


def steps(out: str, overwrite: bool, formats: str) -> list[list[str]]:
    """The commands the demo runs, in order."""
    train = ["train", "--preset", "demo", "--out", out] + (["--overwrite"] if overwrite else [])
    return [
        train,
        ["transition", out],
        ["fit", out],
        ["figures", out, "--out", f"{out}/figures", "--formats", formats],
        ["report", out],
    ]


def run(args) -> int:
    from pathlib import Path

    from interp.cli import main
    from interp.viz.export import find_chromium

    if (Path(args.out) / "config.json").exists() and not args.overwrite:
        raise ValueError(f"--out {args.out}: holds a run already; give --overwrite to train again")
    formats = "pdf,png" if find_chromium() is not None else "html"  # PDF/PNG need chromium
    for argv in steps(args.out, args.overwrite, formats):
        print("induction-cliff " + " ".join(argv), flush=True)
        status = main(argv)
        if status != 0:
            return status
    print(f"demo figures are in {args.out}/figures; the report is {args.out}/report.html")
    return 0
