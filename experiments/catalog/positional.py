"""Positional encodings: which ones form an induction head, and how far they generalise."""

from experiments.common import with_lengths
from interp.experiments import register_experiment
from interp.experiments.core import Column, Experiment, Sweep, Tier

_QUICK = {"steps": 600, "eval_every": 25, "num_threads": 1, "N_max": 8}

EXPERIMENT = register_experiment(
    Experiment(
        name="positional",
        title="Positional encodings: one-hot, learned, RoPE and CoPE",
        question=(
            "With which positional encodings does the network form an induction head on the "
            "demo task, and how well does it then generalise to longer contexts?"
        ),
        analyse=with_lengths((8, 16, 32)),
        tiers={
            "quick": Tier(
                sweeps=(
                    Sweep(
                        preset="tiny", grid={"positional": ("onehot", "learned")}, overrides=_QUICK
                    ),
                ),
                cost="about 40 s on one core",
                cost_s=40,
                note="the `tiny` preset (N_max 8), one-hot against learned positions, 600 steps; "
                "evaluated at N = 4 and 8 (the tiny task's L = 8 allows no more).",
                params={"n_pairs": (4, 8)},
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        preset="demo",
                        grid={"positional": ("onehot", "learned", "rope", "cope")},
                        overrides={"steps": 12000, "d_head": 64, "N_max": 32, "num_threads": 1},
                        seeds=(0, 1),
                    ),
                ),
                cost="about 2 h on two cores",
                cost_s=7200,
                note="the demo task, Adam lr 2e-4, 6000 and 12000 steps, seeds 0-1, d_head 64.",
            ),
        },
        columns=(
            Column(key="positional", header="encoding"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="steps", header="steps", fmt="{:.0f}"),
            Column(key="transition_step", header="head forms (IC acc)", fmt="{:.0f}"),
            Column(key="ic_acc_n8", header="IC N = 8", fmt="{:.3f}"),
            Column(key="ic_acc_n16", header="IC N = 16", fmt="{:.3f}"),
            Column(key="ic_acc_n32", header="IC N = 32", fmt="{:.3f}"),
        ),
        deviations=(
            "The demo task and optimiser (Adam lr 2e-4; the paper: SGD lr 0.01 for 1e5 steps); "
            "the paper uses one-hot positions only.",
            "RoPE needs an even head width: d_head 64.",
        ),
        reading=(
            "One-hot positions form the head first; learned positions and CoPE form it later; "
            "plain RoPE forms none (layer 1 never becomes a previous-token head), whatever its "
            "rescaling at test time. The rope-qk-bias page explains why and fixes it."
        ),
        headline=lambda r: "one-hot, learned and CoPE form a head; plain RoPE does not",
        sort=("positional", "seed", "steps"),
    )
)
