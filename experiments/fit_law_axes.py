"""Write the package's measured tables from the committed rows: ``phenomenology/law_axes.json``
(the transition law's terms for the axes it never varied: batch size and width fitted on
``docs/results/batch-size.csv`` and ``width.csv``, weight decay on ``transience.csv``) and
``phenomenology/early_warning.json`` (the forecasters' measured AUROC, from
``transition-law-warning.csv``): ``python experiments/fit_law_axes.py``, then commit them; tests
keep them equal to what this writes."""

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
    from interp.experiments.core import RESULTS_DIR, read_table
    from phenomenology.warning import WARNING_FILE, MeasuredWarning

    table = read_table(RESULTS_DIR / "transition-law-warning.csv")
    rows = MeasuredWarning.rows_from(table)
    write_text_atomic(WARNING_FILE, json.dumps(rows, indent=1, sort_keys=True) + "\n")
    print(f"wrote {WARNING_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
