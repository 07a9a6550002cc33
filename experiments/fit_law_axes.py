"""Write ``phenomenology/law_axes.json``: the transition law's terms for the axes it never varied
(batch size, width), fitted on the committed rows of ``docs/results/batch-size.csv`` and
``width.csv``: ``python experiments/fit_law_axes.py`` (then commit it; a test keeps it equal to
what this writes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from interp.experiments import load_catalogue
    from interp.io.atomic import write_text_atomic

    load_catalogue()
    from experiments.catalog.law_axes import fitted_terms
    from phenomenology.law_axes import TERMS_FILE

    terms = fitted_terms()
    write_text_atomic(TERMS_FILE, json.dumps(terms.as_dict(), indent=1, sort_keys=True) + "\n")
    for t in terms.terms.values():
        print(f"{t.field}: exponent {t.slope:+.4f} (se {t.se:.4f}), values {t.low:g} to {t.high:g}")
    print(f"wrote {TERMS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
