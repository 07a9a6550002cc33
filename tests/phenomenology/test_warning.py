"""The early-warning verdict on a partial run: the forecast against the budget, with the AUROC
measured for its forecasters at the latest fraction of the budget the run has reached."""

from __future__ import annotations

import json

from phenomenology.warning import MeasuredWarning, signals_of, verdict

ROWS = {
    "auroc": [
        {
            "signal": s,
            "at": f,
            "auroc": a,
            "low": a - 0.1,
            "high": a + 0.05,
            "positives": p,
            "negatives": 20,
        }
        for s, base in (("template", 0.8), ("law", 0.7), ("progress", 0.6))
        for f, a, p in ((0.05, base, 100), (0.1, base + 0.05, 90), (0.3, base + 0.1, 50))
    ]
}


def test_the_latest_fraction_reached_speaks_for_the_forecast(tmp_path):
    path = tmp_path / "warning.json"
    path.write_text(json.dumps(ROWS))
    m = MeasuredWarning.load(path)
    # 2,500 of 10,000 steps: 25% reached, the latest measured fraction at or below it is 10%
    line = verdict(("template",), 8000.0, 2500.0, 10_000, m)
    assert line == (
        "early warning at 25% of the budget: a jump within the budget of 10,000 steps (forecast "
        "at 8,000); measured AUROC on the transition law's runs (transition-law.md): template "
        "0.85 [0.75, 0.90] at 10% of the budget (90 runs that jumped within it, 20 that did not)"
    )
    line = verdict(signals_of("combined", "progress"), 12000.0, 3000.0, 10_000, m)
    assert "no jump within the budget of 10,000 steps (forecast at 12,000)" in line
    assert "law 0.80 [0.70, 0.85] at 30%" in line and "progress 0.70 [0.60, 0.75] at 30%" in line
    assert verdict(("law",), 5000.0, 400.0, 10_000, m).endswith(
        "unmeasured before 5% of the budget"
    )
    assert signals_of("fitted model") == ()
    assert signals_of("combined", "none") == ("law",)
    assert verdict((), 5000.0, 4000.0, 10_000, m).endswith(
        "unmeasured for this forecast (the fitted model's own transition)"
    )


def test_the_packaged_rows_are_the_committed_warning_tables():
    from interp.experiments.core import RESULTS_DIR, read_table
    from phenomenology.warning import WARNING_FILE

    table = read_table(RESULTS_DIR / "transition-law-warning.csv")
    expected = MeasuredWarning.rows_from(table)
    got = json.loads(WARNING_FILE.read_text())
    assert got == expected, "run `python experiments/fit_law_axes.py`"


def test_fit_says_it_for_a_run_fitted_on_part_of_its_curve_only():
    from types import SimpleNamespace

    from interp.cli.commands.fit import _warning_line

    result = {
        "until_step": 2000.0,
        "fitted_until": 2000.0,
        "forecast": "ok",
        "forecast_transition_step": 12000.0,
        "forecast_from": "combined",
        "forecast_update": "progress",
    }
    run = SimpleNamespace(budget=10_000)
    line = _warning_line(result, run)
    assert line.startswith("early warning at 20% of the budget: no jump within the budget")
    # transition-law-warning.csv at 20% (reached exactly)
    assert "law 0.79 [0.67, 0.91] at 20% of the budget (198 runs that jumped" in line
    assert "progress 0.82 [0.72, 0.91] at 20% of the budget" in line
    assert _warning_line({**result, "until_step": None}, run) is None  # the whole curve
    assert _warning_line(result, SimpleNamespace(budget=None)) is None  # a CSV: no budget
    assert _warning_line({**result, "fitted_until": 10_000.0}, run) is None  # budget spent
