"""docs/science.md section 4 shows what ``scripts/model_plateau.py`` prints (a generated table)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "model_plateau", ROOT / "scripts" / "model_plateau.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_the_scripts_table_and_the_plateau_is_no_level_at_log_n():
    script = _script()
    text = (ROOT / "docs" / "science.md").read_text()
    shown = text.split("<!-- model-plateau:begin -->\n")[1].split("\n<!-- model-plateau:end -->")[0]
    assert shown == script.table()
    log_n = math.log(script.TASK["N"] // script.TASK["B"])
    for b in script.STARTS:
        rows = {r["point"]: r for r in script.rows(b)}
        start, onset = rows["plateau start"], rows["onset (plateau end)"]
        assert (
            start["step"]
            < rows["half the cliff step"]["step"]
            < onset["step"]
            < rows["start"]["cliff"]
        )
        assert onset["loss"] < start["loss"] - 0.1  # it drifts along the plateau ...
        assert onset["loss"] > log_n + 0.1  # ... and is still above log n at the onset
