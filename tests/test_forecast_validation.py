"""benchmarks/forecast_validation.py: a run that ends at or just after its cliff is not skipped
silently."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
STEPS = np.arange(1, 41) * 250
LOSS = np.concatenate([3.45 - 0.44 * np.arange(37) / 36, [3.01, 0.82, 0.12]])


def _load():
    spec = importlib.util.spec_from_file_location("fv", BENCH / "forecast_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(path: Path, n: int) -> Path:
    path.mkdir()
    config = {
        "format_version": 4,
        "kind": "induction_net",
        "task": {"L": 32, "N": 8, "B": 1},
        "model": {},
        "train": {"steps": int(STEPS[n - 1]), "optimizer": "sgd"},
    }
    (path / "config.json").write_text(json.dumps(config))
    pd.DataFrame({"step": STEPS[:n], "ic_loss": LOSS[:n]}).to_csv(path / "metrics.csv", index=False)
    return path


def test_a_cliff_one_evaluation_before_the_end_is_validated_and_marked(tmp_path):
    fv = _load()
    rows, why = fv.evaluate(_run(tmp_path / "near", 40))
    assert why is None and len(rows) == len(fv.FRACTIONS)
    assert {r["observed"] for r in rows} == {9750.0}
    assert all(r["note"] == "cliff 1 evaluation(s) before the end" for r in rows)


def test_a_run_that_ends_at_its_cliff_is_counted_as_skipped_with_its_reason(tmp_path):
    fv = _load()
    rows, why = fv.evaluate(_run(tmp_path / "cut", 39))
    assert rows == [] and why.startswith("ends at its cliff")
    line = fv.skipped_summary([why, "no ic_loss", "no ic_loss"], 5)
    assert line == "skipped: 3 of 5 runs (2 no ic_loss; 1 ends at its cliff)"
    assert fv.skipped_summary([], 4) == "skipped: none of 4 runs"
