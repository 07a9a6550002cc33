"""CoPE's own tasks: flip-flop, selective copy and counting, with absolute PE, RoPE and CoPE.

Golovneva et al. (2024, arXiv 2405.18719) show contextual positions solving tasks where the
position that matters is counted in units of content; this experiment trains the toolkit's small
token network (:class:`interp.model.token_net.TokenNet`) on the three generators of
:mod:`interp.data.cope_tasks` with each encoding, and measures error rates in distribution and out
of it (sparser content, longer sequences) on fresh test sets, and flip-flop's rare errors per
10^4 reads. Its data come in a form of their own (one row per run and test set,
:data:`interp.experiments.token_grid.ROW_COLUMNS`): the runs are token-task runs
(:mod:`interp.experiments.token_grid`), not network runs of a sweep, so the page is its own
(:mod:`experiments.catalog.cope_tasks_page`), with the directions stated before the runs
(:data:`DIRECTIONS`) and whether each held, computed from the CSV.
"""

from __future__ import annotations

from pathlib import Path

from experiments.catalog.cope_tasks_page import DIRECTIONS, headline, render
from interp.experiments import register_experiment
from interp.experiments.core import Check, Experiment, Tier
from interp.experiments.token_grid import TokenArm, TokenGrid, collect, run_token_grid

NAME = "cope-tasks"
ENCODINGS = ("learned", "rope", "cope")
"""Absolute (learned, added: the paper's "absolute PE"), RoPE and CoPE. No relative encoding of
the paper's kind (a learned bias or vector per distance) is registered in
:mod:`interp.model.positional`, so the paper's "relative PE" has no arm here."""

GRIDS = {
    "quick": TokenGrid(
        arms=(
            TokenArm(name="flipflop", task="flipflop", fields={"n_instr": 8}, steps=150),
            TokenArm(
                name="selective_copy",
                task="selective_copy",
                fields={"n_region": 8, "n_data": 3},
                steps=150,
            ),
            TokenArm(
                name="counting-1",
                task="counting",
                fields={"n_vars": 1, "n_statements": 6},
                steps=150,
            ),
            TokenArm(
                name="counting-3",
                task="counting",
                fields={"n_vars": 3, "n_statements": 6},
                steps=150,
            ),
        ),
        positionals=ENCODINGS,
        seeds=(0,),
        chunk=100,
        eval_every=75,
        n_test=64,
        n_final=256,
        min_answers=500,
    ),
    "full": TokenGrid(
        arms=(
            TokenArm(name="flipflop", task="flipflop", steps=2000),
            TokenArm(name="selective_copy", task="selective_copy", steps=2000),
            *(
                TokenArm(name=f"counting-{k}", task="counting", fields={"n_vars": k}, steps=2000)
                for k in (1, 3, 5)
            ),
        ),
        positionals=ENCODINGS,
        seeds=(0, 1),
        chunk=500,
        eval_every=500,
        n_test=256,
        n_final=2048,
        min_answers=20_000,
        first=("counting-3", "selective_copy", "flipflop"),
    ),
}


def _produce(experiment, tier: str, runs: Path, workers, log, out: Path | None = None):
    grid = GRIDS[tier]
    run_token_grid(grid, runs, workers=workers or 1, log=log)
    return collect(grid, runs), {}


def _settings(grid: TokenGrid) -> str:
    arms = "; ".join(
        f"{a.name} ({', '.join(f'{k} {v}' for k, v in a.fields.items()) or 'defaults'}, "
        f"{a.steps} steps)"
        for a in grid.arms
    )
    return (
        f"{arms}; encodings {', '.join(grid.positionals)}; seeds "
        f"{', '.join(map(str, grid.seeds))}; Adam lr {grid.lr:g}, batch {grid.batch_size}; "
        f"{grid.n_final} fresh sequences per test set"
        + (f", grown until a set holds {grid.min_answers} answers" if grid.min_answers else "")
    )


EXPERIMENT = register_experiment(
    Experiment(
        name=NAME,
        title="CoPE's own tasks: flip-flop, selective copy and counting by positional encoding",
        question=(
            "On the tasks where the position that matters is counted in units of content "
            "(flip-flop, selective copy, counting), does contextual position encoding (CoPE) make "
            "fewer errors than absolute positions and RoPE, in distribution and on sparser or "
            "longer sequences?"
        ),
        tiers={
            "quick": Tier(
                cost="about 30 s on one core",
                cost_s=30,
                note="smaller tasks (flip-flop of 8 instructions, a copy region of 8 with 3 data "
                "tokens, 6 counting statements), 150 steps, seed 0: a smoke test of the pipeline, "
                "not the claim. " + _settings(GRIDS["quick"]) + ".",
            ),
            "full": Tier(
                cost="about 32 min of one core: 30 runs of 25-105 s, then the measurements "
                "(measured beside a second busy worker)",
                cost_s=1900,
                note=_settings(GRIDS["full"]) + ".",
            ),
        },
        columns=(),
        checks=(
            Check(
                # 150 steps leave this error on the edge of learning: 1.0% or less on some CPUs'
                # kernels, 5.6% on others (the same seed); the direction against absolute PE's
                # 20% or more is what the smoke test holds, not the size.
                what="selective copy, sparser: CoPE's error (%)",
                column="error_pct",
                high=10.0,
                where={"arm": "selective_copy", "positional": "cope", "set": "ood_sparse"},
                reduce="max",
            ),
            Check(
                what="selective copy, sparser: absolute PE's error (%)",
                column="error_pct",
                low=20.0,
                where={"arm": "selective_copy", "positional": "learned", "set": "ood_sparse"},
            ),
            Check(
                what="flip-flop, in distribution: CoPE's error (%)",
                column="error_pct",
                high=10.0,
                where={"arm": "flipflop", "positional": "cope", "set": "id"},
                reduce="max",
            ),
            Check(
                what="counting, 1 variable, in distribution: every encoding's error (%)",
                column="error_pct",
                high=15.0,
                where={"arm": "counting-1", "set": "id"},
                reduce="max",
            ),
        ),
        produce=_produce,
        page=lambda experiment, rows: render(experiment, rows, GRIDS),
        deviations=(
            "A small network: the toolkit's token network (embedding width 32, 2 attention-only "
            "layers of 1 head of width 32, a ReLU classifier of width 64 at each position), "
            "where the authors' counting runs train a decoder of 4 layers, width 256 and 4 "
            "heads (their released run script; see the paper section).",
            "Short training: 2000 steps of Adam (lr 3e-3, batch 64) per run.",
            "Small tasks: flip-flop of 16 instructions (32 tokens) with ignores at p = 0.8 "
            "(sparse set 0.98, long set 32 instructions); selective copy of 4 data tokens among "
            "16 (sparse set: among 32); counting of 12 statements, values modulo 6, fillers at "
            "p = 0.5 (sparse set 0.85, long set 24 statements). The tasks' shapes follow the "
            "paper; their sizes are chosen for a CPU (`interp.data.cope_tasks`).",
            "No relative-PE arm: the toolkit registers no relative encoding of the paper's "
            "kind (RoPE, a rotary encoding of relative distance, stands in the table).",
            "Absolute PE is the learned table added to the content; positions past the "
            "training length (the long sets) get a zero vector.",
            "Error rates count answers (reads, copied tokens, printed values); sequences with "
            "a wrong answer are counted beside them.",
        ),
        headline=headline,
        meta=("source", "tier", "commit", "format_version", "date", "wall_s", "machine", "command"),
    )
)

__all__ = ["DIRECTIONS", "ENCODINGS", "EXPERIMENT", "GRIDS", "NAME"]
