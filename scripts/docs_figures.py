"""Write the README's figures, small PNGs in docs/figures/, from a trained demo run.

Usage: ``python scripts/docs_figures.py RUN_DIR OUT_DIR`` (``bash scripts/docs_figures.sh`` runs it
on runs/demo). The figures are the standard set of ``induction-cliff figures`` at 110 dpi instead
of 300, so that they stay small in the repository. Needs Chromium (static export).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path
from unittest import mock

# standard figure -> name in docs/figures
FIGURES = {
    "training_dynamics.png": "demo_training_dynamics.png",
    "progress_measures.png": "demo_progress_measures.png",
    "attention_snapshots.png": "demo_attention_snapshots.png",
    "fit_overlay_{run}.png": "demo_fit_overlay.png",
}
DPI = 110


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/docs_figures.py RUN_DIR OUT_DIR", file=sys.stderr)
        return 2
    run_dir, out_dir = Path(argv[0]), Path(argv[1])
    if not (run_dir / "metrics.csv").is_file():
        print(f"error: {run_dir}/metrics.csv not found: train the run first", file=sys.stderr)
        return 2
    if not (run_dir / "fit.json").is_file():
        print(
            f"error: {run_dir}/fit.json not found: run `induction-cliff fit {run_dir}`",
            file=sys.stderr,
        )
        return 2

    from interp.viz import export
    from interp.viz.figures import write_standard_figures

    if export.find_chromium() is None:
        print("error: the PNGs need chromium: apt-get install -y chromium", file=sys.stderr)
        return 3
    small = {k: dataclasses.replace(v, dpi=DPI) for k, v in export.PAPER_STYLES.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(export.PAPER_STYLES, small):
        write_standard_figures([run_dir], tmp, ("png",))
        for source, target in FIGURES.items():
            shutil.copyfile(Path(tmp) / source.format(run=run_dir.name), out_dir / target)
            print(f"wrote {out_dir / target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
