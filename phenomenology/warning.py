"""The early-warning verdict on a partial run, with how much to trust it.

"Will this run jump within its budget?" A forecast of the transition step made from the curve
so far answers it (the step against the budget), and the transition law's runs measured how well
each forecaster tells the runs that jump within their budget from those that do not, by the
fraction of the budget seen: the AUROC of ``docs/results/transition-law.md`` (Early warning), with
its bootstrap interval. ``phenomenology/early_warning.json`` holds those rows (written from the
committed ``transition-law-warning.csv`` by ``python experiments/fit_law_axes.py``; a test keeps
them equal); :func:`verdict` says the verdict and the measured AUROC of the forecaster that made
it at the latest fraction measured that the run has reached.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MEASURED", "WARNING_FILE", "MeasuredWarning", "short_verdict", "signals_of", "verdict"]

WARNING_FILE = Path(__file__).with_name("early_warning.json")
SOURCE = "transition-law.md"
_LOADED: dict = {}
MEASURED = ("template", "progress", "law")
"""The forecasters whose AUROC was measured: the calibrated template and progress forecasts of the
curve, and the law's probability of a jump by the budget."""


@dataclass(frozen=True)
class MeasuredWarning:
    """The AUROC of each forecaster at each fraction of the budget: ``{signal: {fraction:
    (auroc, low, high, positives, negatives)}}`` (the runs that jumped within their budget and
    those that did not, among those not yet transitioned there)."""

    auroc: Mapping[str, Mapping[float, tuple[float, float, float, int, int]]]

    @staticmethod
    def load(path=None) -> MeasuredWarning:
        """The rows of ``path`` (default: the package's), read once per process."""
        key = str(path)
        if key not in _LOADED:
            _LOADED[key] = MeasuredWarning._read(Path(path) if path is not None else WARNING_FILE)
        return _LOADED[key]

    @staticmethod
    def _read(path: Path) -> MeasuredWarning:
        from interp.io.errors import DamagedFileError
        from interp.io.inputs import read_json_object

        d = read_json_object(path)
        try:
            auroc: dict = {}
            for r in d["auroc"]:
                values = [float(r[k]) for k in ("at", "auroc", "low", "high")]
                counts = [int(r[k]) for k in ("positives", "negatives")]
                if not all(math.isfinite(v) and 0 <= v <= 1 for v in values) or min(counts) < 0:
                    raise ValueError(f"a row of {r['signal']!r} out of range")
                auroc.setdefault(str(r["signal"]), {})[values[0]] = (*values[1:], *counts)
            return MeasuredWarning(auroc)
        except (KeyError, TypeError, ValueError) as err:
            raise DamagedFileError(f"{path}: damaged early-warning rows ({err})") from None

    @staticmethod
    def rows_from(table) -> dict:
        """The JSON object of ``transition-law-warning.csv``'s AUROC rows (a DataFrame)."""
        au = table[table["measure"] == "auroc"]
        return {
            "auroc": [
                {
                    "signal": str(r["signal"]),
                    "at": float(r["at"]),
                    "auroc": round(float(r["value"]), 6),
                    "low": round(float(r["low"]), 6),
                    "high": round(float(r["high"]), 6),
                    "positives": int(r["positives"]),
                    "negatives": int(r["negatives"]),
                }
                for _, r in au.iterrows()
            ]
        }

    def at(self, signal: str, seen: float) -> tuple[float, tuple] | None:
        """The latest measured fraction at or below ``seen`` and the signal's AUROC there."""
        fractions = [f for f in sorted(self.auroc.get(signal, {})) if f <= seen + 1e-9]
        if not fractions:
            return None
        return fractions[-1], self.auroc[signal][fractions[-1]]


def signals_of(method: str, update: str | None = None) -> tuple[str, ...]:
    """The measured forecasters that make a forecast of ``method`` (``fit``'s ``forecast_from``):
    the law's forecast updated by the curve is the law and the curve's forecaster (``update``)."""
    if method == "combined":
        return ("law", *((update,) if update in MEASURED else ()))
    return (method,) if method in MEASURED else ()


def verdict(
    signals: tuple[str, ...], step: float, seen: float, budget: int, measured: MeasuredWarning
) -> str:
    """One line: whether the forecast ``step`` (made from the curve up to ``seen`` by the
    forecasters ``signals``, :func:`signals_of`) falls within ``budget``, and the AUROC measured
    for them at the latest fraction of the budget measured that the run has reached."""
    within = step <= budget
    said = (
        f"a jump within the budget of {budget:,} steps (forecast at {step:,.0f})"
        if within
        else f"no jump within the budget of {budget:,} steps (forecast at {step:,.0f})"
    )
    fraction = seen / budget
    parts = []
    for signal in signals:
        got = measured.at(signal, fraction)
        if got is None:
            continue
        f, (a, lo, hi, pos, neg) = got
        parts.append(
            f"{signal} {a:.2f} [{lo:.2f}, {hi:.2f}] at {f:.0%} of the budget ({pos} runs that "
            f"jumped within it, {neg} that did not)"
        )
    if parts:
        trust = f"measured AUROC on the transition law's runs ({SOURCE}): {'; '.join(parts)}"
    elif signals:
        trust = f"unmeasured before {min(measured.auroc[signals[0]]):.0%} of the budget"
    else:
        trust = "unmeasured for this forecast (the fitted model's own transition)"
    return f"early warning at {fraction:.0%} of the budget: {said}; {trust}"


def short_verdict(step: float, seen: float, budget: int, signals: tuple[str, ...]) -> str:
    """:func:`verdict` for a progress bar: ``"yes (AUROC 0.83)"``, the AUROC of the first of
    ``signals`` at the latest fraction of the budget reached (none before the first measured,
    nor without a measured forecaster)."""
    said = "yes" if step <= budget else "no"
    got = MeasuredWarning.load().at(signals[0], seen / budget) if signals else None
    return said if got is None else f"{said} (AUROC {got[1][0]:.2f})"
