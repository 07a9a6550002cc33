"""The tables the commands read ship with the package (pyproject's package-data) and are the ones
committed beside their pages, so that an installed package answers as a checkout does."""

from __future__ import annotations

import re
from pathlib import Path

from interp.cli import main
from interp.experiments.core import RESULTS_DIR
from phenomenology.law_axes import TERMS_FILE
from phenomenology.transition_law import LAW_FILE, RATES_FILE
from phenomenology.warning import WARNING_FILE

ROOT = Path(__file__).resolve().parents[1]


def test_the_packaged_collapse_rates_are_the_committed_ones():
    committed = RESULTS_DIR / "collapse-rate.csv"
    assert RATES_FILE.read_bytes() == committed.read_bytes(), f"cp {committed} {RATES_FILE}"


def test_the_forecasts_tables_are_package_data():
    data = (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.package-data]")[1]
    for path in (LAW_FILE, RATES_FILE, TERMS_FILE, WARNING_FILE):
        listed = re.search(rf"^{path.parent.name} = \[(.*)\]", data, re.MULTILINE)
        assert listed and f'"{path.name}"' in listed.group(1), f"{path.name} is not package data"


def test_forecast_reads_the_collapse_rates_of_the_package_only(monkeypatch, capsys):
    """Without docs/results (an installed package), the collapse risk is still measured."""
    import interp.experiments.core as core

    monkeypatch.setattr(core, "RESULTS_DIR", Path("/nonexistent/docs/results"))
    assert main(["forecast", "--preset", "paper-fig3"]) == 0
    out = capsys.readouterr().out
    assert "runs died" in out and "unmeasured" not in out
    assert "phenomenology/collapse_rate.csv" in out
