"""The transition law refitted with the axes it never varied: batch size, width, weight decay.

The stored law (:mod:`phenomenology.transition_law`) was fitted on runs at batch 128 and
classifier width (``d_mlp``) 128. The declared experiments ``batch-size`` and ``width``
(``docs/results/batch-size.md``, ``width.md``) trained other values at several of its
configurations. :func:`fit_terms` fits, per axis, the exponent of the transition step in the axis
(least squares of ``log step`` on each configuration's own intercept and a common slope, the
transitioned runs), and :class:`AxisTerms` carries the law from its value of the axis to another
within the values trained: ``log T = law(config) + slope x log(value / law's value)``, the
slope's standard error added to the law's predictive spread (the product of the two for a
change on both axes). Weight decay is a level term (:class:`LevelTerm`): the shift of ``log
step`` at each weight decay the ``transience`` experiment trained against the author's 1e-6
(each K its own intercept), with how often in-context accuracy faded in those long runs.

``phenomenology/law_axes.json`` holds the terms fitted on the committed rows
(``python experiments/fit_law_axes.py`` writes it; a test keeps it equal to the rows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from phenomenology.law_forms import Z80, Prediction

__all__ = [
    "AXIS_FIELDS",
    "TERMS_FILE",
    "AxisTerm",
    "AxisTerms",
    "Level",
    "LevelTerm",
    "fit_levels",
    "fit_term",
]

TERMS_FILE = Path(__file__).with_name("law_axes.json")
AXIS_FIELDS = {
    "batch_size": ("train.batch_size", 128),
    "d_mlp": ("model.d_mlp", 128),
    "weight_decay": ("train.weight_decay", 1e-6),
}
"""Each axis: the setting the law reads it as, and its value in every run of the law's data."""


@dataclass(frozen=True)
class AxisTerm:
    """One axis's exponent: ``slope`` with its standard error ``se`` and residual degrees of
    freedom, fitted on runs at values ``low`` to ``high`` and ``configurations`` of the law."""

    field: str
    slope: float
    se: float
    dof: int
    low: float
    high: float
    configurations: int


def fit_term(field: str, configs, values, steps) -> AxisTerm:
    """The exponent of ``steps`` in ``values`` with each configuration its own intercept (the
    transitioned runs of one axis's experiment: three equal-length sequences)."""
    configs, values = np.asarray(configs, str), np.asarray(values, float)
    y = np.log(np.asarray(steps, float))
    names = sorted(set(configs))
    X = np.column_stack([*(np.asarray(configs == c, float) for c in names), np.log(values)])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    if dof < 1 or len(set(values)) < 2:
        raise ValueError(f"{field}: too few transitioned runs to fit its exponent")
    resid = y - X @ beta
    cov = (resid @ resid / dof) * np.linalg.inv(X.T @ X)
    return AxisTerm(
        field=field,
        slope=round(float(beta[-1]), 6),
        se=round(math.sqrt(float(cov[-1, -1])), 6),
        dof=int(dof),
        low=float(values.min()),
        high=float(values.max()),
        configurations=len(names),
    )


@dataclass(frozen=True)
class Level:
    """One trained value of a level term: the shift of ``log step`` from the reference value and
    its standard error; of its long runs (``steps`` long), how many, and in how many in-context
    accuracy faded."""

    value: float
    shift: float
    se: float
    runs: int
    faded: int
    steps: int


@dataclass(frozen=True)
class LevelTerm:
    """A field the law never varied, trained at a few values only (forecast at those alone)."""

    field: str
    levels: tuple[Level, ...]

    def at(self, value: float) -> Level | None:
        return next((lv for lv in self.levels if math.isclose(lv.value, value)), None)


def fit_levels(field: str, reference: float, groups, values, steps, faded, budget: int):
    """The shift of ``log steps`` at each value of ``field`` against ``reference`` (each group,
    e.g. K, its own intercept; runs with a finite step, those that transitioned), with standard
    errors, and each value's runs and fades (``faded``: per run, whether in-context accuracy
    faded within ``budget``), over every run given."""
    all_values, faded = np.asarray(values, float), np.asarray(faded, bool)
    steps = np.asarray(steps, float)
    ok = np.isfinite(steps)
    groups, values, y = np.asarray(groups, str)[ok], all_values[ok], np.log(steps[ok])
    names, others = sorted(set(groups)), sorted(set(values) - {reference})
    X = np.column_stack(
        [*(groups == g for g in names), *(np.isclose(values, v) for v in others)]
    ).astype(float)
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    if dof < 1:
        raise ValueError(f"{field}: too few transitioned runs to fit its levels")
    resid = y - X @ beta
    se = np.sqrt(np.diag((resid @ resid / dof) * np.linalg.inv(X.T @ X)))
    shift = dict(zip(others, beta[len(names) :], strict=True))
    err = dict(zip(others, se[len(names) :], strict=True))
    levels = []
    for v in sorted(set(all_values)):
        at = np.isclose(all_values, v)
        levels.append(
            Level(
                value=float(v),
                shift=round(float(shift.get(v, 0.0)), 6),
                se=round(float(err.get(v, 0.0)), 6),
                runs=int(at.sum()),
                faded=int(faded[at].sum()),
                steps=int(budget),
            )
        )
    return LevelTerm(field, tuple(levels))


def _checked(record: dict, kind) -> dict:
    """``record``'s fields for ``kind``, each number finite (a field that is text must be text,
    a count a whole number, a standard error not negative); raises ValueError naming the field."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(kind):
        v = record[f.name]
        if f.type == "str":
            if not isinstance(v, str):
                raise ValueError(f"{f.name}={v!r} is not text")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{f.name}={v!r} is not a finite number")
        elif f.type == "int" and v != int(v):
            raise ValueError(f"{f.name}={v!r} is not a whole number")
        out[f.name] = v
    if out.get("se", 0) < 0 or out.get("low", 0) > out.get("high", 0):
        raise ValueError("a negative standard error or low above high")
    if set(record) - set(out):
        raise ValueError(f"unknown field {sorted(set(record) - set(out))[0]!r}")
    return out


@dataclass(frozen=True)
class AxisTerms:
    """The terms of every fitted axis, by field: exponents (:class:`AxisTerm`) and level terms
    (:class:`LevelTerm`)."""

    terms: Mapping[str, AxisTerm]
    levels: Mapping[str, LevelTerm] = field(default_factory=dict)

    @staticmethod
    def load(path=None) -> AxisTerms:
        from interp.io.errors import DamagedFileError
        from interp.io.inputs import read_json_object

        where = Path(path) if path is not None else TERMS_FILE
        d = read_json_object(where)
        try:
            terms = {f: AxisTerm(**_checked(t, AxisTerm)) for f, t in d["terms"].items()}
            levels = {
                f: LevelTerm(f, tuple(Level(**_checked(lv, Level)) for lv in t))
                for f, t in d.get("levels", {}).items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DamagedFileError(f"{where}: damaged axis terms ({err})") from None
        unknown = sorted((set(terms) | set(levels)) - set(AXIS_FIELDS))
        if unknown:
            raise DamagedFileError(f"{where}: damaged axis terms (no axis {unknown[0]!r})")
        return AxisTerms(terms, levels)

    def as_dict(self) -> dict:
        return {
            "terms": {f: vars(t) for f, t in sorted(self.terms.items())},
            "levels": {f: [vars(lv) for lv in t.levels] for f, t in sorted(self.levels.items())},
        }

    def _fitted(self, f: str) -> bool:
        return f in self.terms or f in self.levels

    def values_of(self, settings: Mapping[str, str]) -> dict[str, float]:
        """The value of each axis in a run's settings (the law's ``settings`` text)."""
        return {f: float(settings[key]) for f, (key, _) in AXIS_FIELDS.items() if key in settings}

    def at_law(
        self, fields: Mapping[str, float], settings: Mapping[str, str]
    ) -> tuple[dict[str, float], dict[str, str]]:
        """A run's ``(fields, settings)`` as the law reads them, with every fitted axis set to the
        law's value."""
        fields, settings = dict(fields), dict(settings)
        for f, (key, value) in AXIS_FIELDS.items():
            if self._fitted(f):
                if key in settings:
                    settings[key] = str(value)
                if f in fields:
                    fields[f] = float(value)
        return fields, settings

    def problems(self, settings: Mapping[str, str]) -> list[str]:
        """One line per axis set outside the values its experiment trained."""
        out = []
        for f, v in self.values_of(settings).items():
            t, lv = self.terms.get(f), self.levels.get(f)
            if t is not None and not t.low <= v <= t.high:
                out.append(f"{f}={v:g} is outside the values trained ({t.low:g} to {t.high:g})")
            if lv is not None and lv.at(v) is None:
                trained = ", ".join(f"{x.value:g}" for x in lv.levels)
                out.append(f"{f}={v:g} is not among the values trained ({trained})")
        return out

    def moved(self, settings: Mapping[str, str]) -> dict[str, float]:
        """The fitted axes ``settings`` moves from the law's value."""
        return {
            f: v
            for f, v in self.values_of(settings).items()
            if self._fitted(f) and not math.isclose(v, AXIS_FIELDS[f][1])
        }

    def apply(self, pred: Prediction, settings: Mapping[str, str]) -> Prediction:
        """The law's prediction at its value of each axis carried to the axes of ``settings``."""
        if not pred.transitions:
            return pred
        shift, var = 0.0, pred.log_sd**2
        for f, v in self.moved(settings).items():
            if f in self.levels:
                lv = self.levels[f].at(v)
                shift += lv.shift
                var += lv.se**2
                continue
            t, x = self.terms[f], math.log(v / AXIS_FIELDS[f][1])
            shift += t.slope * x
            var += (t.se * x) ** 2
        sd = math.sqrt(var)
        return Prediction.interval(pred.log_mean + shift, Z80 * sd, log_sd=sd)
