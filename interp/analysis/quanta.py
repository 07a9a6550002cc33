"""Quanta: is the smooth in-weights (IW) curve a sum of sharp per-class steps? (docs/science.md
section 6)

Michaud et al.'s quantization model: skills ("quanta") are learned in order of how often they are
used, each abruptly. In Reddy's task each class's in-weights recognition is a natural quantum, and
class ``k`` is used with Zipf frequency ``p(k) ∝ (k + 1)^-alpha``. If a class is learned once its
cumulative exposure reaches a fixed amount, its learning step is ``t_k ∝ 1 / p(k) ∝ rank^alpha``:
the prediction is a log-log slope of ``t_k`` against the frequency rank equal to ``alpha``.

From a run trained with ``per_class_iw > 0`` (``per_class_iw.csv``: IW accuracy of every class at
every evaluation) this module gives:

- :func:`class_learning_steps`: ``t_k``, the step at which class ``k`` is learned;
- :func:`class_frequencies` and :func:`frequency_ranks`: ``p(k)`` and the rank of each class;
- :func:`fit_rank_exponent`: the log-log slope of ``t_k`` against rank, with a bootstrap
  interval over classes, beside the predicted ``alpha``;
- :func:`decompose_iw`: the aggregate IW curve rebuilt as ``sum_k p(k) acc_k(t)`` (exact: the IW
  set draws its query class from ``p(k)``) and as a sum of sharp steps ``sum_k p(k) 1[t >= t_k]``,
  each with its RMS distance to the measured ``iw_acc``;
- :func:`analyse_run`: all of it for one run directory, as ``induction-cliff quanta`` prints it
  and writes it to ``quanta.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

__all__ = [
    "DEFAULT_THRESHOLD",
    "DEFAULT_CONFIRM",
    "class_columns",
    "class_frequencies",
    "frequency_ranks",
    "ranks_tie",
    "class_learning_steps",
    "RankExponentFit",
    "fit_rank_exponent",
    "IWDecomposition",
    "decompose_iw",
    "QuantaAnalysis",
    "analyse_run",
]

# A class counts as learned when its accuracy reaches 0.5 (well above chance 1/L, which is 1/32 in
# the paper) at DEFAULT_CONFIRM evaluations in a row: with 8 sequences per class an accuracy moves
# in steps of 1/8, and one lucky evaluation is not a learned class.
DEFAULT_THRESHOLD = 0.5
DEFAULT_CONFIRM = 2


def class_columns(frame: pd.DataFrame) -> list[str]:
    """The class columns of a per-class frame, ``c0, c1, ...`` in class order.

    Raises:
        ValueError: no ``step`` column, or the other columns are not ``c0 .. c{K-1}``.
    """
    if "step" not in frame.columns:
        raise ValueError("frame has no 'step' column: not a per_class_iw.csv frame")
    columns = [c for c in frame.columns if c != "step"]
    if not columns or columns != [f"c{k}" for k in range(len(columns))]:
        raise ValueError(
            "frame's class columns must be c0, c1, ... in order (per_class_iw.csv), found "
            f"{columns[:4]}{' ...' if len(columns) > 4 else ''}"
        )
    return columns


def _matrix(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(steps [T], accuracy [T, K])`` of a per-class frame, sorted by step."""
    columns = class_columns(frame)
    frame = frame.sort_values("step")
    return frame["step"].to_numpy(dtype=float), frame[columns].to_numpy(dtype=float)


def class_frequencies(K: int, alpha: float) -> np.ndarray:
    """The task's class frequencies ``p(k) ∝ (k + 1)^-alpha``, ``k = 0 .. K-1`` (float64; the
    formula of :class:`interp.data.task.TaskGenerator`).

    Args:
        K: number of classes.
        alpha: Zipf exponent (0: uniform).

    Returns:
        ``[K]`` probabilities summing to 1.
    """
    if isinstance(K, bool) or not (isinstance(K, (int, np.integer)) and K >= 1):
        raise ValueError(f"K={K!r} is invalid: must be an integer >= 1")
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha={alpha!r} is invalid: must be >= 0")
    p = np.arange(1, K + 1, dtype=np.float64) ** -float(alpha)
    return p / p.sum()


def frequency_ranks(probs: np.ndarray) -> np.ndarray:
    """The frequency rank of each class: 1 for the most frequent. Classes of equal frequency
    share the smallest rank of their group, so with ``alpha = 0`` (uniform classes) every class
    has rank 1 (see :func:`ranks_tie`); with ``alpha > 0`` class ``k`` has rank ``k + 1``.

    Args:
        probs: ``[K]`` class frequencies (:func:`class_frequencies`).

    Returns:
        ``[K]`` integer ranks.
    """
    from scipy.stats import rankdata

    return rankdata(-np.asarray(probs, dtype=float), method="min").astype(int)


def ranks_tie(ranks: np.ndarray) -> bool:
    """Whether every class has the same rank (``alpha = 0``): then there is no rank exponent."""
    ranks = np.asarray(ranks)
    return ranks.size == 0 or bool(np.all(ranks == ranks.flat[0]))


def class_learning_steps(
    frame: pd.DataFrame,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    confirm: int = DEFAULT_CONFIRM,
) -> pd.Series:
    """``t_k``: the step at which each class is learned.

    The rule: the first evaluation step at which the class's accuracy is ``>= threshold`` and
    stays ``>= threshold`` for ``confirm`` evaluations in a row (this one included; ``confirm=1``
    is the first crossing). A run of fewer than ``confirm`` evaluations at the end of the curve is
    not confirmed: the class counts as not learned (NaN), as does a class that never crosses.

    Accuracy cannot tell a learned class from one whose label the network gives to items it does
    not know (at initialisation some label, early in training the most frequent one): such a
    class reads as learned early. With Zipf classes the most frequent label is label 0, so
    classes ``0, L, 2L, ...`` may get early ``t_k`` at high ranks (stripes every ``L`` rows in
    the raster of :func:`interp.viz.quanta_plots.plot_quanta`); docs/science.md section 6.

    Args:
        frame: ``per_class_iw.csv`` as read (``step``, ``c0``, ``c1``, ...).
        threshold: the accuracy that counts as learned, in ``(0, 1]``.
        confirm: evaluations in a row at or above ``threshold`` (>= 1).

    Returns:
        ``t_k`` indexed by class ``0 .. K-1`` (float; NaN where not learned).
    """
    if isinstance(threshold, bool) or not (
        isinstance(threshold, (int, float)) and 0 < threshold <= 1
    ):
        raise ValueError(f"threshold={threshold!r} is invalid: must be in (0, 1]")
    if isinstance(confirm, bool) or not (isinstance(confirm, int) and confirm >= 1):
        raise ValueError(f"confirm={confirm!r} is invalid: must be an integer >= 1")
    steps, acc = _matrix(frame)
    above = acc >= threshold  # NaN compares False
    T, K = above.shape
    if T == 0:
        return pd.Series(np.nan, index=pd.RangeIndex(K, name="class"), name="t_k", dtype=float)
    # run[t, k]: consecutive evaluations from t on (t included) at or above the threshold.
    run = np.zeros((T + 1, K), dtype=int)
    for t in range(T - 1, -1, -1):
        run[t] = np.where(above[t], run[t + 1] + 1, 0)
    ok = run[:T] >= confirm
    first = ok.argmax(axis=0)
    t_k = np.where(ok.any(axis=0), steps[first], np.nan)
    return pd.Series(t_k, index=pd.RangeIndex(K, name="class"), name="t_k", dtype=float)


@dataclass(frozen=True)
class RankExponentFit:
    """The log-log least-squares fit ``log t_k = intercept + slope * log rank`` over the learned
    classes, and its bootstrap interval.

    Attributes:
        slope: the fitted exponent (None when it cannot be fitted: ``reason`` says why).
        intercept: ``log t_k`` at rank 1 (natural log), or None.
        low, high: the ``level`` bootstrap percentile interval of the slope (classes resampled
            with replacement), or None.
        level: the interval's coverage (0.9: the 5th to 95th percentile).
        n_used: classes in the fit (learned, with ``t_k > 0``).
        n_classes: classes given.
        predicted: the quantization model's slope, the task's ``alpha`` (None if not given).
        n_boot: bootstrap resamples.
        seed: the bootstrap's seed.
        reason: why there is no slope ('' when there is one).
    """

    slope: float | None
    intercept: float | None
    low: float | None
    high: float | None
    level: float
    n_used: int
    n_classes: int
    predicted: float | None
    n_boot: int
    seed: int
    reason: str = ""

    def to_dict(self) -> dict:
        """A JSON-serialisable dict of the fields."""
        return asdict(self)


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slopes of each row of ``y`` on the matching row of ``x`` (NaN where ``x``
    is constant)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    sxx = (xc * xc).sum(axis=-1)
    sxy = (xc * yc).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)


def fit_rank_exponent(
    t_k,
    ranks,
    *,
    predicted: float | None = None,
    n_boot: int = 1000,
    level: float = 0.9,
    seed: int = 0,
) -> RankExponentFit:
    """The log-log slope of ``t_k`` against frequency rank over the learned classes.

    Classes not learned (NaN) are left out, and so is a class with ``t_k <= 0`` (learned at
    initialisation: no log). Leaving out the classes not learned by the end of training censors
    the slowest (rare) classes, which biases the slope low when many are missing; ``n_used``
    says how many classes the fit rests on.

    Args:
        t_k: learning step of each class (:func:`class_learning_steps`).
        ranks: frequency rank of each class (:func:`frequency_ranks`), same order.
        predicted: the predicted slope (the task's ``alpha``), reported beside the fit.
        n_boot: bootstrap resamples of the classes (>= 0; 0: no interval).
        level: coverage of the percentile interval, in ``(0, 1)``.
        seed: the bootstrap's seed (the result is a deterministic function of the inputs).

    Returns:
        The fit; its ``slope`` is None (and ``reason`` says why) when all ranks tie
        (``alpha = 0``), or fewer than 3 learned classes span two or more ranks.
    """
    t = np.asarray(t_k, dtype=float).ravel()
    r = np.asarray(ranks, dtype=float).ravel()
    if t.shape != r.shape:
        raise ValueError(f"t_k has {t.size} classes but ranks has {r.size}")
    if isinstance(n_boot, bool) or not (isinstance(n_boot, int) and n_boot >= 0):
        raise ValueError(f"n_boot={n_boot!r} is invalid: must be an integer >= 0")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} is invalid: must be in (0, 1)")
    if np.any(~np.isfinite(r) | (r < 1)):
        raise ValueError("ranks are invalid: each must be a number >= 1 (1 = most frequent)")
    use = np.isfinite(t) & (t > 0)
    common = dict(
        level=level,
        n_used=int(use.sum()),
        n_classes=int(t.size),
        predicted=None if predicted is None else float(predicted),
        n_boot=n_boot,
        seed=seed,
    )
    none = dict(slope=None, intercept=None, low=None, high=None)
    if ranks_tie(r):
        return RankExponentFit(
            **none,
            **common,
            reason="all classes have the same frequency rank (alpha = 0, uniform classes): there "
            "is no rank exponent to fit (the prediction is that every class is learned at about "
            "the same step)",
        )
    x, y = np.log(r[use]), np.log(t[use])
    if x.size < 3 or np.ptp(x) == 0:
        return RankExponentFit(
            **none,
            **common,
            reason=f"{x.size} learned class(es) over {np.unique(x).size} rank(s): at least 3 "
            "classes over 2 ranks are needed",
        )
    slope = float(_slopes(x, y))
    intercept = float(y.mean() - slope * x.mean())
    low = high = None
    if n_boot:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, x.size, size=(n_boot, x.size))
        boot = _slopes(x[idx], y[idx])
        boot = boot[np.isfinite(boot)]
        if boot.size:
            low, high = (float(v) for v in np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]))
    return RankExponentFit(slope=slope, intercept=intercept, low=low, high=high, **common)


@dataclass(frozen=True)
class IWDecomposition:
    """The aggregate IW curve rebuilt from the per-class curves.

    Attributes:
        curves: one row per evaluation: ``step``; ``exact`` = ``sum_k p(k) acc_k(t)``;
            ``steps`` = ``sum_k p(k) 1[t >= t_k]`` (a class contributes all of its weight once
            learned, nothing before; a class never learned, nothing); ``measured`` = the run's
            ``iw_acc`` at that step (NaN where ``metrics.csv`` has none).
        rms_exact: RMS of ``exact - measured`` over the steps with a measurement (NaN if none).
        rms_steps: RMS of ``steps - measured`` over the same steps.
    """

    curves: pd.DataFrame
    rms_exact: float
    rms_steps: float


def decompose_iw(
    frame: pd.DataFrame,
    probs,
    t_k,
    metrics: pd.DataFrame | None = None,
) -> IWDecomposition:
    """The exact decomposition of the IW curve and the sum of sharp steps, against ``iw_acc``.

    The IW evaluation set draws its query class from ``p(k)``, so its expected accuracy is
    ``sum_k p(k) acc_k(t)``: ``exact`` equals ``iw_acc`` up to the sampling noise of the two sets.
    ``steps`` is the quantization model's curve: every class a sharp step at ``t_k``.

    Args:
        frame: ``per_class_iw.csv`` (``step``, ``c0``, ...).
        probs: ``[K]`` class frequencies (:func:`class_frequencies`).
        t_k: ``[K]`` learning steps (:func:`class_learning_steps`; NaN: never learned).
        metrics: the run's ``metrics.csv`` (its ``iw_acc``), or None.

    Returns:
        The curves and their RMS distances to the measured IW accuracy.
    """
    steps, acc = _matrix(frame)
    p = np.asarray(probs, dtype=float).ravel()
    t = np.asarray(t_k, dtype=float).ravel()
    if p.size != acc.shape[1] or t.size != acc.shape[1]:
        raise ValueError(
            f"frame has {acc.shape[1]} classes, probs {p.size} and t_k {t.size}: they must match"
        )
    exact = acc @ p
    learned = np.isfinite(t)[None, :] & (steps[:, None] >= np.where(np.isfinite(t), t, 0)[None, :])
    step_curve = learned.astype(float) @ p
    measured = np.full(steps.size, np.nan)
    if metrics is not None and "iw_acc" in metrics.columns and "step" in metrics.columns:
        iw = metrics.dropna(subset=["iw_acc"]).drop_duplicates("step").set_index("step")["iw_acc"]
        measured = iw.reindex(steps.astype(int)).to_numpy(dtype=float)
    curves = pd.DataFrame(
        {"step": steps.astype(int), "exact": exact, "steps": step_curve, "measured": measured}
    )
    have = np.isfinite(measured)

    def rms(curve: np.ndarray) -> float:
        if not have.any():
            return float("nan")
        return float(np.sqrt(np.mean((curve[have] - measured[have]) ** 2)))

    return IWDecomposition(curves=curves, rms_exact=rms(exact), rms_steps=rms(step_curve))


@dataclass(frozen=True)
class QuantaAnalysis:
    """The quanta analysis of one run (:func:`analyse_run`).

    Attributes:
        run_dir: the run directory.
        K, alpha: the task's classes and Zipf exponent (``alpha`` is the predicted slope).
        per_class_iw: sequences per class of the per-class set.
        threshold, confirm: the learning rule (:func:`class_learning_steps`).
        frame: ``per_class_iw.csv``.
        probs: ``[K]`` class frequencies; ranks: ``[K]`` frequency ranks.
        t_k: learning step of each class (NaN: not learned).
        fit: the rank exponent (:func:`fit_rank_exponent`).
        decomposition: the IW curve rebuilt (:func:`decompose_iw`).
        transition_step: the ICL transition of IC accuracy
            (:func:`interp.analysis.transition.find_transition`), or None.
        ic_curve: the run's ``step`` and ``ic_acc`` (for the figure), or None.
    """

    run_dir: str
    K: int
    alpha: float
    per_class_iw: int
    threshold: float
    confirm: int
    frame: pd.DataFrame
    probs: np.ndarray
    ranks: np.ndarray
    t_k: pd.Series
    fit: RankExponentFit
    decomposition: IWDecomposition
    transition_step: float | None
    ic_curve: pd.DataFrame | None = None

    @property
    def n_learned(self) -> int:
        """Classes learned by the end of the run."""
        return int(np.isfinite(self.t_k.to_numpy()).sum())

    @property
    def n_learned_at_start(self) -> int:
        """Classes already at the threshold at the first evaluation (at initialisation, a class
        whose label the untrained network happens to answer): left out of the fit at step 0."""
        first = float(self.frame["step"].min())
        return int((self.t_k.to_numpy() == first).sum())

    def to_dict(self) -> dict:
        """What ``quanta.json`` holds (JSON-serialisable; NaN written as null)."""
        return {
            "run_dir": self.run_dir,
            "threshold": self.threshold,
            "confirm": self.confirm,
            "K": self.K,
            "alpha": self.alpha,
            "per_class_iw": self.per_class_iw,
            "evaluations": int(len(self.frame)),
            "last_step": int(self.frame["step"].max()),
            "n_learned": self.n_learned,
            "n_learned_at_start": self.n_learned_at_start,
            "exponent": self.fit.to_dict(),
            "predicted_slope": self.alpha,
            "rms_exact": self.decomposition.rms_exact,
            "rms_steps": self.decomposition.rms_steps,
            "transition_step": self.transition_step,
            "classes": {
                "t_k": [float(v) for v in self.t_k.to_numpy()],
                "rank": [int(r) for r in self.ranks],
                "p": [float(v) for v in self.probs],
            },
        }


def analyse_run(
    run,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    confirm: int = DEFAULT_CONFIRM,
    n_boot: int = 1000,
    seed: int = 0,
) -> QuantaAnalysis:
    """The quanta analysis of one run (what ``induction-cliff quanta`` prints and writes).

    Args:
        run: a :class:`interp.io.rundir.Run` trained with ``per_class_iw > 0``.
        threshold, confirm: the learning rule of :func:`class_learning_steps`.
        n_boot, seed: the bootstrap of :func:`fit_rank_exponent`.

    Returns:
        The analysis (:meth:`QuantaAnalysis.to_dict` is ``quanta.json``).

    Raises:
        interp.io.rundir.RunDirectoryError: the run has no (valid) ``per_class_iw.csv``.
        ValueError: the file has no rows, or ``threshold``/``confirm`` is invalid.
    """
    from interp.analysis.transition import find_transition

    frame = run.per_class_iw()
    if frame.empty:
        raise ValueError(f"{run.path / 'per_class_iw.csv'} has no rows: nothing to analyse")
    task = run.task
    probs = class_frequencies(task.K, task.alpha)
    ranks = frequency_ranks(probs)
    t_k = class_learning_steps(frame, threshold, confirm=confirm)
    transition, curve = None, None
    metrics = run.metrics
    if "ic_acc" in metrics.columns:
        curve = metrics.dropna(subset=["ic_acc"])[["step", "ic_acc"]].reset_index(drop=True)
        if len(curve) >= 3:
            found = find_transition(
                curve["step"].to_numpy(dtype=float),
                curve["ic_acc"].to_numpy(dtype=float),
                direction="rising",
            )
            if found.transitioned and found.step is not None:
                transition = float(found.step)
    return QuantaAnalysis(
        run_dir=str(run.path),
        K=task.K,
        alpha=float(task.alpha),
        per_class_iw=run.train_config.per_class_iw,
        threshold=float(threshold),
        confirm=confirm,
        frame=frame,
        probs=probs,
        ranks=ranks,
        t_k=t_k,
        fit=fit_rank_exponent(t_k, ranks, predicted=task.alpha, n_boot=n_boot, seed=seed),
        decomposition=decompose_iw(frame, probs, t_k, metrics),
        transition_step=transition,
        ic_curve=curve,
    )
