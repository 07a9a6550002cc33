"""Named settings for the CLI and notebooks (:mod:`interp.experiments.notebook_setting`): the
paper's runs, its Fig 2 sweeps and a fast demo.

Each preset is a ``(TaskConfig, model overrides, TrainConfig)`` triple. Deviations from the paper's
settings are said in the preset's ``note`` and recorded in ``config.json`` through the configs.
Sweep presets (``fig2-*``, ``quanta-alpha``) add a grid and seeds for ``induction-cliff sweep``
(:mod:`interp.experiments.sweep`); their configs are the base that every point of the grid modifies.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from interp.config.task_config import TaskConfig
from interp.config.train_config import TrainConfig

logger = logging.getLogger(__name__)

__all__ = ["Preset", "PRESETS", "get_preset"]


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named experiment setting.

    Attributes:
        name: preset name, as given to ``--preset``.
        task: the task.
        model: overrides of :class:`~interp.model.network.ModelConfig` fields (the rest from the
            task).
        train: optimiser and schedule.
        note: what the preset reproduces, and how it deviates from the paper.
        grid: for a sweep preset, the grid that ``induction-cliff sweep`` runs: config field
            (addressed as ``--set`` addresses it) -> values; the points are the Cartesian product
            (see :class:`interp.experiments.sweep.SweepSpec`). Empty for a preset of one run.
        seeds: the seeds a sweep of this preset runs unless told otherwise.
    """

    name: str
    task: TaskConfig
    train: TrainConfig
    model: dict = field(default_factory=dict)
    note: str = ""
    grid: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)


# The default optimiser (the author's code's) and schedule (the toolkit's 1e5 steps), and the
# demo's labelled deviation from them.
# Their 1e5-step runs pay the compiler's cost once for a faster step (interp.model.compiled);
# shorter runs train uncompiled where the compile would not pay (interp.train.backend_choice).
PAPER_TRAIN = TrainConfig(
    optimizer="sgd",
    lr=0.01,
    weight_decay=1e-6,
    batch_size=128,
    steps=100_000,
    backend="auto",
)
DEMO_TRAIN = TrainConfig(
    optimizer="adam",
    lr=2e-4,
    weight_decay=1e-6,
    batch_size=128,
    steps=3500,
    eval_every=50,
    checkpoint_every=500,
    n_log_checkpoints=12,
)


def _fig2_presets() -> list[Preset]:
    """The sweeps of the paper's Fig 2, at the default settings and reduced (``-quick``).

    Fig 2 varies one or two data parameters with the others fixed. The fixed values are this
    toolkit's choice (K=512, B=2 of Fig 1d, where it applies; p_C=0 is the toolkit's, the paper
    does not state it). The paper does not give the training length: 1e5 steps is the toolkit's
    (the author's driver defaults to 1.5e5).
    ``B = 0`` points train without bursty sequences (the sweep sets ``p_B = p_C = 0`` there, as
    docs/science.md section 1 says). The ``-quick`` variants take minutes on 2 cores, not days:
    Adam lr 1e-3 for 1500 steps (a DEVIATION, as in the demo, with a larger lr so that the picture
    forms within the budget) and 512 sequences per evaluation set.
    """
    paper_train = PAPER_TRAIN
    quick_train = dataclasses.replace(
        DEMO_TRAIN, lr=1e-3, steps=1500, eval_every=100, n_log_checkpoints=6
    )
    headline = TaskConfig(K=512, L=32, N=8, B=2, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.0)
    paper = (
        "plain SGD lr 0.01, batch 128 (the author's code), p_C 0 (the toolkit's: the paper does "
        "not state it), 1e5 steps (the toolkit's: the paper gives no length, the author's "
        "driver defaults to 1.5e5), seeds 0-5"
    )
    quick = (
        "DEVIATION: Adam lr 1e-3 for 1500 steps (the author's code: SGD lr 0.01), 512 sequences "
        "per evaluation set, seed 0"
    )
    # name: (what, task of the paper preset, task of the quick one, grid)
    sweeps = {
        "fig2-kb": (
            "Reddy 2024 Fig 2, K x B phase diagram: K in {128, 256, 512, 2048} x B in {0, 1, 2, "
            "4} (B=0: no bursty sequences), eps 0.1, alpha 0, p_C 0",
            headline,
            headline,
            {"K": (128, 256, 512, 2048), "B": (0, 1, 2, 4)},
        ),
        "fig2-eps": (
            "Reddy 2024 Fig 2, within-class noise eps from 0 to 6.4 (the author's range; the "
            "doubling spacing is a GUESS) at K=512, B=2",
            headline,
            headline,
            {"eps": (0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4)},
        ),
        "fig2-alpha": (
            "Reddy 2024 Fig 2, Zipf exponent alpha in {0, 0.25, ..., 1.75} (the author's grid; "
            "class frequencies in bursty and non-bursty sequences and in IW; DEVIATION at alpha > "
            "0: bursty sequences draw their known classes Zipf-weighted, the author's code "
            "unweighted; the quick variant at K=2048, B=1)",
            headline,
            dataclasses.replace(headline, K=2048, B=1),
            {"alpha": (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)},
        ),
        "fig2-ln": (
            "Reddy 2024 Fig A.5, L = N experiment: N in {2, 4, 8} with L = N (every label is in "
            "the context) versus L = 32, on the paper-fig3 task (K=256, B=1, p_C=0.8, from a "
            "third-party script: a GUESS, the paper does not say which task; this one forms an "
            "induction head at N=8, L=32); B=1 "
            "throughout (B must divide N and be < N, so N=2 allows only B=1), K a multiple of "
            "every L (256; the quick variant 2048)",
            dataclasses.replace(headline, K=256, B=1, p_C=0.8),
            dataclasses.replace(headline, K=2048, B=1),
            {"N": (2, 4, 8), "L": ("N", 32)},
        ),
    }
    presets = []
    for name, (what, task, quick_task, grid) in sweeps.items():
        presets.append(
            Preset(
                name=name,
                task=task,
                train=paper_train,
                grid=grid,
                seeds=tuple(range(6)),
                note=f"{what}; {paper}.",
            )
        )
        presets.append(
            Preset(
                name=f"{name}-quick",
                task=dataclasses.replace(quick_task, n_eval=512),
                train=quick_train,
                grid=grid,
                note=f"{what}; reduced. {quick}.",
            )
        )
    return presets


def _quanta_preset() -> Preset:
    """The quanta experiment (docs/science.md section 6): per-class IW learning steps against the
    Zipf frequency rank, for three exponents.

    Half the training sequences are non-bursty (``p_B = 0.5``) so that in-weights learning is
    strong and visible within a few thousand steps while bursty sequences still allow an
    induction head (``B = 2``); ``p_C = 0``. Evaluations every 25 steps, so that the frequent
    classes, learned first, still get distinct learning steps; ``checkpoint_on_jump`` 0.05 keeps
    the noisy IC accuracy of 1024 sequences from checkpointing at most evaluations.
    """
    train = dataclasses.replace(
        DEMO_TRAIN,
        lr=1e-3,
        steps=6000,
        eval_every=25,
        checkpoint_every=1000,
        n_log_checkpoints=8,
        checkpoint_on_jump=0.05,
        per_class_iw=8,
    )
    return Preset(
        name="quanta-alpha",
        task=TaskConfig(K=512, L=32, N=8, B=2, eps=0.1, alpha=1.0, p_B=0.5, p_C=0.0, n_eval=1024),
        train=train,
        grid={"alpha": (0.5, 1.0, 1.5)},
        seeds=(0, 1, 2),
        note=(
            "Quanta (Michaud et al. 2023) in Reddy's task: is the IW curve a sum of sharp "
            "per-class steps, learned at t_k ~ rank^alpha? alpha in {0.5, 1, 1.5} (part of the "
            "paper's Fig 2 alpha grid; not a paper figure), K=512, B=2, p_B=0.5 (a CHOICE: half "
            "the sequences non-bursty so that IW is learned within the budget; the paper's "
            "default is p_B=1), p_C=0, 8 held-out sequences per class evaluated every 25 steps "
            "(per_class_iw.csv; `induction-cliff quanta RUN_DIR`). DEVIATION: bursty sequences "
            "draw their known classes Zipf-weighted (the author's code: unweighted). DEVIATION: "
            "Adam lr 1e-3 for 6000 steps (the author's code: SGD lr 0.01), 1024 sequences per "
            "evaluation "
            "set, checkpoint_on_jump 0.05; seeds 0-2."
        ),
    )


def _encoding_presets() -> list[Preset]:
    """The positional-encoding and attention-scaling experiments (docs/results has their
    measured runs).

    ``pe-rope-bias``: does RoPE form the previous-token head once its attention has a content-free
    positional term? Plain RoPE, RoPE with query/key biases, RoPE with a residual dimension that is
    1 at every token (the control: the same term through a constant input), and both. On the demo
    task with the demo's optimiser (the setting of docs/results/rope-qk-bias.md), and ``-sgd``: the
    author's code's plain SGD at lr 0.03.

    ``pe-attn-scale``: does a log-n attention scale keep the query row's attention at longer
    contexts close to its training-length attention? Unscaled (the author's code), 1/sqrt(d_head)
    and log_{N_train}(n) scaling, for one-hot, learned and CoPE positions, trained at N = 8 with a
    positional table for N_max = 64 (``evaluate --n-pairs 8,16,32,64``).
    """
    demo_task = TaskConfig(K=256, L=32, N=8, B=1, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8, n_eval=1024)
    rope = dict(positional="rope", d_head=64)
    rope_grid = {"qk_bias": (False, True), "rope_constant_dim": (False, True)}
    rope_what = (
        "RoPE (d_head 64) with and without q/k biases and a constant residual dimension, on the "
        "demo task (not a paper figure; the paper uses one-hot positions)"
    )
    return [
        Preset(
            name="pe-rope-bias",
            task=demo_task,
            model=rope,
            train=dataclasses.replace(DEMO_TRAIN, steps=12000),
            grid=rope_grid,
            seeds=(0, 1),
            note=(
                f"{rope_what}. DEVIATION: Adam lr 2e-4 for 12000 steps (the author's code: SGD lr "
                "0.01), "
                "1024 sequences per evaluation set; seeds 0-1."
            ),
        ),
        Preset(
            name="pe-rope-bias-sgd",
            task=demo_task,
            model=rope,
            train=dataclasses.replace(PAPER_TRAIN, lr=0.03, steps=30000),
            grid=rope_grid,
            seeds=(0, 1),
            note=(
                f"{rope_what}. Plain SGD, batch 128. DEVIATION: lr 0.03 for 30000 steps (the "
                "author's code: lr 0.01; about 9e4 lr-0.01 steps), 1024 sequences per evaluation "
                "set; seeds 0-1."
            ),
        ),
        Preset(
            name="pe-attn-scale",
            task=TaskConfig(K=512, L=32, N=8, N_max=64, B=2, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8),
            train=dataclasses.replace(
                PAPER_TRAIN, optimizer="adam", lr=2e-4, steps=8000, eval_every=200
            ),
            grid={
                "positional": ("onehot", "learned", "cope"),
                "attn_scale": ("none", "sqrt", "log_n"),
            },
            seeds=(0, 1, 2),
            note=(
                "Attention scale (none: the author's code; sqrt: 1/sqrt(d_head); log_n: "
                "log_{N_train}(n)) "
                "x positions (one-hot: the paper; learned; CoPE) on the paper-fig1d task with "
                "p_C=0.8 (a GUESS, as in paper-fig1d), positional table for N_max=64; evaluate "
                "at N=8..64 with `induction-cliff evaluate RUN --n-pairs 8,16,32,64`. DEVIATION: "
                "Adam lr 2e-4 for 8000 steps (the author's code: SGD lr 0.01); seeds 0-2."
            ),
        ),
    ]


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="paper-fig1d",
            task=TaskConfig(K=512, L=32, N=8, B=2, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8),
            train=PAPER_TRAIN,
            note=(
                "Reddy 2024 Fig 1d: K=512, B=2, plain SGD lr 0.01, batch 128 (the author's code). "
                "p_C=0.8 is a GUESS (the paper does not state p_C for this figure; p_B=1 is its "
                "default): with p_C=0 IC accuracy climbs gradually with no jump (measured to "
                "1.05e5 lr-0.01-equivalent steps), with p_C=0.25, 0.5 or 0.8 it jumps abruptly "
                "(docs/results/fig1d.md). 1e5 steps is the toolkit's length (the paper gives "
                "none; the author's driver defaults to 1.5e5)."
            ),
        ),
        Preset(
            name="paper-fig3",
            task=TaskConfig(K=256, L=32, N=8, B=1, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8),
            train=PAPER_TRAIN,
            note=(
                "Reddy 2024 Fig 3, as a third-party script sets it up: K=256, B=1, p_C=0.8 are "
                "that script's (a GUESS: the paper does not state Fig 3's task); plain SGD lr "
                "0.01, batch 128 (the author's code); 1e5 steps is the toolkit's length (the "
                "paper gives none; the author's driver defaults to 1.5e5). With the author's "
                "scalar hidden biases (the default) plain SGD kills the classifier on some seeds "
                "(docs/results/collapse-rate.md; `train` says when, `--set "
                "stop_on_collapse=true` stops there); `--set hidden_bias=per_unit` is the form "
                "of every earlier SGD result."
            ),
        ),
        Preset(
            name="demo",
            task=TaskConfig(
                K=256, L=32, N=8, B=1, eps=0.1, alpha=0.0, p_B=1.0, p_C=0.8, n_eval=1024
            ),
            train=DEMO_TRAIN,
            note=(
                "Fast demo of the paper-fig3 task (a third-party script's guess at Fig 3's task). "
                "DEVIATION: Adam lr 2e-4 for 3500 steps instead of the author's code's SGD lr "
                "0.01, and 1024 sequences per evaluation set."
            ),
        ),
        Preset(
            name="tiny",
            task=TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=256),
            train=TrainConfig(
                optimizer="adam",
                lr=3e-3,
                batch_size=64,
                steps=200,
                eval_every=50,
                checkpoint_every=100,
                n_log_checkpoints=4,
            ),
            model=dict(d_mlp=32),
            note="Tiny smoke-test setting (seconds). "
            "DEVIATION: much smaller task and network, Adam.",
        ),
        *_fig2_presets(),
        _quanta_preset(),
        *_encoding_presets(),
    ]
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``, or a ``ValueError`` listing the allowed names."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r} is invalid: allowed values are {sorted(PRESETS)}")
    return PRESETS[name]
