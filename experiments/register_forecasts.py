"""Register the forecasts of every declared point of the law's open axes that has none, before
its runs: ``python experiments/register_forecasts.py`` (then commit
``experiments/catalog/law_axes_forecasts.csv``). A row once written is never changed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from interp.experiments import load_catalogue

    load_catalogue()
    from experiments.catalog.law_axes import REGISTRY, register

    n = register()
    print(f"{n} forecasts registered in {REGISTRY}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
