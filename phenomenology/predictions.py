"""The nested-logit model's testable predictions about the network, as plain functions.

[docs/science.md section 4, reconstruction.] Two predictions follow from
``d loss / d xi = 1/L - 1/n`` at the origin:

- the plateau lengthens as the number of labels ``L`` comes down to the number of distinct context
  labels ``n = N / B``, and diverges as ``L -> n+`` (the first phase, ``xi`` growing, is driven by
  ``1/n - 1/L``, which vanishes there);
- at ``L = n`` the origin is a critical point: from there gradient descent never moves (every
  guess among the context labels is as good as any label, so nothing pushes ``xi``).

:func:`plateau_lengths` returns a table a notebook can plot beside network runs (convert model
time to steps with a fitted ``time_scale_`` from :class:`phenomenology.fit.NestedLogitFit`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from phenomenology.landscape import (
    LossFn,
    check_task,
    detect_cliff,
    gradient_descent,
    gradient_flow,
)

__all__ = ["DEFAULT_START", "origin_stuck", "plateau_length", "plateau_lengths"]

DEFAULT_START = (-6.0, 0.0, 0.0)
"""A small start: weak previous-token head (``s1 = 0.0025``), no match, no readout."""


def plateau_length(
    L: float,
    *,
    N: int = 8,
    B: int = 2,
    start: Sequence[float] | Mapping[str, float] = DEFAULT_START,
    t_max: float = 1e9,
    loss_fn: LossFn | None = None,
) -> float:
    """Model time from the start to the cliff (the transition of
    :func:`~phenomenology.landscape.detect_cliff`) under gradient flow.

    Args:
        L: labels (real, ``>= n = N / B``).
        N, B: context pairs and burstiness.
        start: ``(beta1, alpha, xi)``.
        t_max: give up (return ``inf``) if there is no cliff by this model time.
        loss_fn: optional user loss form.

    Returns:
        the transition time, or ``inf`` when the loss never gets below half of ``log n`` by
        ``t_max`` (always the case at ``L = n`` from the origin).
    """
    n = check_task(L, N, B)
    t_hi = 1e3
    while True:
        t_grid = np.geomspace(t_hi * 1e-7, t_hi, 3000)
        traj = gradient_flow(start, L=L, N=N, B=B, t_eval=np.r_[0.0, t_grid], loss_fn=loss_fn)
        loss = traj["loss"].to_numpy()[1:]
        if np.min(loss) < 0.5 * math.log(n):
            return detect_cliff(t_grid, loss).transition
        if t_hi >= t_max:
            return math.inf
        t_hi = min(t_hi * 10.0, t_max)


def plateau_lengths(
    Ls: Sequence[float],
    *,
    N: int = 8,
    B: int = 2,
    start: Sequence[float] | Mapping[str, float] = DEFAULT_START,
    time_scale: float = 1.0,
    t_max: float = 1e9,
    loss_fn: LossFn | None = None,
) -> pd.DataFrame:
    """Plateau length as a function of ``L`` at fixed ``N`` and ``B``.

    Args:
        Ls: label counts (each ``>= n``; ``L = n`` gives ``inf``).
        N, B: context pairs and burstiness.
        start: ``(beta1, alpha, xi)``.
        time_scale: training steps per unit of model time (e.g. a fit's ``time_scale_``).
        t_max: see :func:`plateau_length`.
        loss_fn: optional user loss form.

    Returns:
        DataFrame with columns ``L, n, drive`` (``1/n - 1/L``, the initial pull on ``xi``),
        ``plateau_time`` (model time) and ``plateau_steps`` (``plateau_time * time_scale``).
    """
    n = check_task(max(Ls), N, B)
    rows = []
    for L in Ls:
        t = plateau_length(L, N=N, B=B, start=start, t_max=t_max, loss_fn=loss_fn)
        rows.append({"L": float(L), "n": n, "drive": 1.0 / n - 1.0 / L, "plateau_time": t})
    df = pd.DataFrame(rows)
    df["plateau_steps"] = df["plateau_time"] * time_scale
    return df


def origin_stuck(
    N: int = 8, B: int = 2, *, lr: float = 0.1, steps: int = 10_000, record_every: int = 100
) -> pd.DataFrame:
    """Gradient descent from the origin at ``L = n``: the trajectory that never leaves.

    Returns:
        the :func:`~phenomenology.landscape.gradient_descent` DataFrame (every parameter stays 0,
        the loss stays ``log n`` and the accuracy ``1/n``).
    """
    n = check_task(N // B, N, B)
    return gradient_descent(
        (0.0, 0.0, 0.0), L=n, N=N, B=B, lr=lr, steps=steps, record_every=record_every
    )
