"""The plateau and the cliff of a decreasing loss curve: the steepest drop in log-time and the
levels read off either side of it (:func:`detect_cliff`). Used on measured curves
(:func:`interp.analysis.transition.find_transition`, ``method="cliff"``) and on the curves of the
phenomenological models (:mod:`phenomenology.landscape`, which re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Cliff", "detect_cliff", "cliff_window_drop"]


@dataclass(frozen=True, kw_only=True)
class Cliff:
    """Plateau and cliff of a decreasing loss curve, as found by :func:`detect_cliff`.

    Attributes:
        transition: time of the steepest drop per unit of log-time (``max of -t dl/dt``).
        onset: end of the plateau: last time before ``transition`` at which the loss is still
            within 10% of the plateau-to-floor drop of the plateau level.
        end: first time after ``transition`` at which the loss is within 10% of that drop of
            the floor.
        plateau_start: first time the loss comes within 10% (of the start-to-plateau drop) of the
            plateau level.
        plateau_loss: loss at ``transition / 2`` (on a long plateau, a plateau point).
        floor_loss: the smallest loss after ``transition``.
        peak_log_slope: ``max -t dl/dt``.
        plateau_log_slope: the largest ``-t dl/dt`` on ``[plateau_start, onset]``.
    """

    transition: float
    onset: float
    end: float
    plateau_start: float
    plateau_loss: float
    floor_loss: float
    peak_log_slope: float
    plateau_log_slope: float

    @property
    def width(self) -> float:
        """Duration of the cliff, ``end - onset``."""
        return self.end - self.onset

    @property
    def plateau_length(self) -> float:
        """Duration of the plateau, ``onset - plateau_start``."""
        return self.onset - self.plateau_start


def detect_cliff(t, loss_values, *, level: float = 0.1) -> Cliff:
    """Finds the plateau and the cliff on a loss curve.

    The transition is the time of the steepest drop in log-time, ``argmax(-t dl/dt)``: the log
    axis keeps the fast early drop (``xi`` growing, loss ``log L -> log n``) from being taken for
    the cliff, which comes late and is steep. Levels are then read off relative to the plateau
    loss (the loss at half the transition time) and the floor (the lowest loss after it).

    Args:
        t: increasing times (or steps), at least 5 points.
        loss_values: the loss at those times (a noisy curve should be smoothed first).
        level: fraction of a drop that counts as "still on the plateau" / "already at the floor".

    Returns:
        a :class:`Cliff`.
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(loss_values, dtype=float)
    if t.ndim != 1 or t.shape != y.shape or t.size < 5:
        raise ValueError("t and loss_values must be 1-D arrays of the same length >= 5")
    if np.any(np.diff(t) <= 0):
        raise ValueError("t must be strictly increasing")
    if not 0 < level < 0.5:
        raise ValueError(f"level must be in (0, 0.5), got {level!r}")
    slope = -np.gradient(y, t) * t
    i_star = int(np.argmax(slope[1:])) + 1
    t_star = t[i_star]
    plateau = float(np.interp(t_star / 2, t, y))
    floor = float(np.min(y[i_star:]))
    drop = plateau - floor
    before = np.nonzero(y[: i_star + 1] >= plateau - level * drop)[0]
    i_on = int(before[-1]) if before.size else 0
    after = np.nonzero(y[i_star:] <= floor + level * drop)[0]
    i_end = i_star + int(after[0]) if after.size else len(t) - 1
    first = np.nonzero(y[: i_on + 1] <= plateau + level * max(y[0] - plateau, 0.0))[0]
    i_ps = int(first[0]) if first.size else 0
    plat_slope = float(np.max(slope[i_ps : i_on + 1])) if i_on >= i_ps else float("nan")
    return Cliff(
        transition=float(t_star),
        onset=float(t[i_on]),
        end=float(t[i_end]),
        plateau_start=float(t[i_ps]),
        plateau_loss=plateau,
        floor_loss=floor,
        peak_log_slope=float(slope[i_star]),
        plateau_log_slope=plat_slope,
    )


def cliff_window_drop(t, loss_values, *, window: float = 0.05) -> float:
    """Ratio ``loss(t* + w/2) / loss(t* - w/2)`` across the cliff, ``w = window * t*``.

    ``t*`` is :func:`detect_cliff`'s transition. A cliff in the sense of the tests halves the loss
    (ratio < 0.5) within a window of 5% of the time it took to reach it.
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(loss_values, dtype=float)
    t_star = detect_cliff(t, y).transition
    w = window * t_star
    return float(np.interp(t_star + w / 2, t, y) / np.interp(t_star - w / 2, t, y))
