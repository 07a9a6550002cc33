"""The transition time across configurations: a declared grid, the law fitted to it, its scores.

The grid (:data:`GRID`) is trained by :mod:`interp.experiments.transition_grid`; the law and its
baselines are :mod:`phenomenology.transition_law`.
"""

from __future__ import annotations

from interp.experiments.transition_grid import GridPoint, TransitionGrid

BASE = {
    "hidden_bias": "per_unit",
    "lr": 0.1,
    "n_eval": 1024,
    "eval_every": 100,
    "live_forecast": False,
    "num_threads": 1,
}
"""What every point shares: paper-fig3's task and plain SGD (batch 128, the author's weight decay),
with per-unit hidden biases (the author's scalar biases collapse at these learning rates) and
lr 0.1 at the centre."""

_P = GridPoint
GRID = TransitionGrid(
    preset="paper-fig3",
    base=BASE,
    points=(
        _P(name="centre"),
        _P(name="lr0.2", overrides={"lr": 0.2}),
        _P(name="lr0.01", overrides={"lr": 0.01}, budget=60_000),
        _P(name="lr0.05", overrides={"lr": 0.05}),
        _P(name="N4", overrides={"N": 4}),
        _P(name="N16", overrides={"N": 16}),
        _P(name="B2", overrides={"B": 2}),
        _P(name="K1024", overrides={"K": 1024}),
        _P(name="eps0.2", overrides={"eps": 0.2}, role="sub"),
        _P(name="pC0.5", overrides={"p_C": 0.5}, role="sub"),
        _P(name="L16", overrides={"L": 16}),
        _P(name="lr0.03", overrides={"lr": 0.03}),
        _P(name="N6", overrides={"N": 6}),
        _P(name="N12", overrides={"N": 12}),
        _P(name="B4", overrides={"B": 4}),
        _P(name="K128", overrides={"K": 128}),
        _P(name="eps0.05", overrides={"eps": 0.05}, role="sub"),
        _P(name="pC0.95", overrides={"p_C": 0.95}, role="sub"),
        _P(name="L8", overrides={"L": 8}, role="negative"),
        _P(name="pC0-K512-B2", overrides={"p_C": 0.0, "K": 512, "B": 2}, role="negative"),
        _P(name="lr0.003", overrides={"lr": 0.003}, role="negative"),
        _P(name="L64", overrides={"L": 64}),
        _P(name="N24", overrides={"N": 24}),
        _P(name="lr0.05-N4", overrides={"lr": 0.05, "N": 4}, role="cross"),
        _P(name="lr0.05-B2", overrides={"lr": 0.05, "B": 2}, role="cross"),
        _P(name="lr0.2-N16", overrides={"lr": 0.2, "N": 16}, role="cross"),
        _P(name="lr0.05-K1024", overrides={"lr": 0.05, "K": 1024}, role="cross"),
    ),
    seeds=(0, 1, 2),
    budget=16_000,
    chunk=1000,
)
