"""Fig A.5: with every label in the context (L = N) the network memorises instead."""

from experiments.common import TINY, TINY_NOTE, count
from interp.experiments import register_experiment
from interp.experiments.core import Check, Column, Experiment, PaperValue, Sweep, Tier

_FULL = {"lr": 0.03, "steps": 12000, "hidden_bias": "per_unit", "num_threads": 1}

EXPERIMENT = register_experiment(
    Experiment(
        name="fig-a5-ln",
        title="Fig A.5: no induction head when L = N",
        question=(
            "When the context holds every label of the task (L = N), does the network still "
            "learn the in-context solution, or only memorise?"
        ),
        tiers={
            "quick": Tier(
                sweeps=(Sweep(preset="tiny", grid={"L": ("N", 8)}, overrides=TINY),),
                cost="about 30 s on one core",
                cost_s=30,
                note=TINY_NOTE + "; N = 4 with L = N = 4 against L = 8.",
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        name="n8-ln",
                        preset="paper-fig3",
                        overrides={**_FULL, "N": 8, "L": 8},
                        seeds=tuple(range(6)),
                    ),
                    Sweep(
                        name="n8-l32",
                        preset="paper-fig3",
                        overrides={**_FULL, "N": 8},
                        seeds=(0, 1),
                    ),
                    Sweep(
                        name="n24",
                        preset="paper-fig3",
                        grid={"N": (2, 4), "L": ("N", 32)},
                        overrides=_FULL,
                    ),
                ),
                cost="about 1.5 h on two cores",
                cost_s=5400,
                note="paper-fig3 task, plain SGD at lr 0.03 for 12000 steps (about 36k lr-0.01 "
                "steps); six seeds at N = L = 8, fewer where the outcome was clear.",
            ),
        },
        columns=(
            Column(key="sweep", header="sweep"),
            Column(key="N", header="N", fmt="{:g}"),
            Column(key="L", header="L", fmt="{:g}"),
            Column(key="seed", header="seed(s)"),
            Column(key="transitioned", header="jumped"),
            Column(key="transition_step", header="transition", fmt="{:.0f}"),
            Column(key="ic_acc", header="final IC", fmt="{:.3f}"),
            Column(key="iw_acc", header="final IW", fmt="{:.3f}"),
            Column(key="over_seeds", header="range over the seeds"),
        ),
        paper=(
            PaperValue(
                quantity="in-context solution at N = 8, L = N",
                paper="not learned",
                source="Fig A.5",
                here=lambda r: f"{count(r, L='N', N=8)} rows jumped",
            ),
            PaperValue(
                quantity="in-context solution at N = 8, L = 32",
                paper="learned",
                source="Fig A.5",
                here=lambda r: f"{count(r, L=32, N=8)} seeds jumped",
            ),
        ),
        deviations=(
            "Plain SGD at lr 0.03 for 12000 steps (the author's code: lr 0.01; the toolkit's "
            "default: 1e5 steps); the transition "
            "time scales as 1/lr.",
            "Which task the paper used for Fig A.5 is not stated; the paper-fig3 task (K = 256, "
            "B = 1, p_C = 0.8) is a guess.",
            "Fewer seeds than six where the outcome was already clear.",
        ),
        checks=(
            Check(
                what="no jump at L = N",
                column="transitioned",
                where={"L": "N"},
                reduce="any",
                high=0,
            ),
            Check(
                what="the L = 8 control jumps",
                column="transitioned",
                where={"L": 8},
                reduce="all",
                low=1,
            ),
            Check(what="L = N memorises instead", column="iw_acc", where={"L": "N"}, low=0.5),
        ),
        reading=(
            "With every label in the context, answering with some context label is worth nothing, "
            "so the first stage towards the induction head gives no signal and the network "
            "memorises the classes instead; with two labels (N = 2) chance is already one half "
            "and one seed did jump, late."
        ),
        headline=lambda r: (
            f"N = 8, L = N: {count(r, L='N', N=8)} seeds jump; L = 32: {count(r, L=32, N=8)}"
        ),
        sort=("sweep", "N", "seed"),
    )
)
