"""The demo: a plateau, then the induction head forms and IC accuracy jumps."""

from experiments.common import TINY, TINY_NOTE, count, values
from interp.experiments import register_experiment
from interp.experiments.core import Check, Column, Experiment, PaperValue, Sweep, Tier

EXPERIMENT = register_experiment(
    Experiment(
        name="demo",
        title="The demo: plateau, then an abrupt jump",
        question=(
            "Does the demo run (the paper-fig3 task with Adam) sit on a plateau of IC accuracy "
            "and then jump abruptly as the induction head forms?"
        ),
        tiers={
            "quick": Tier(
                sweeps=(Sweep(preset="tiny", overrides=TINY),),
                cost="about 15 s on one core",
                cost_s=15,
                note=TINY_NOTE + ".",
            ),
            "full": Tier(
                sweeps=(Sweep(preset="demo", overrides={"num_threads": 1}),),
                cost="about 1-4 min on one core",
                cost_s=120,
                note="the `demo` preset (what `bash scripts/demo.sh` trains), seed 0.",
            ),
        },
        columns=(
            Column(key="sweep", header="sweep"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="steps", header="steps", fmt="{:.0f}"),
            Column(key="transition_step", header="transition (IC acc midpoint)", fmt="{:.0f}"),
            Column(key="transition_width", header="10-90% width", fmt="{:.0f}"),
            Column(key="plateau_measured", header="plateau IC acc", fmt="{:.3f}"),
            Column(key="ic_acc", header="final IC", fmt="{:.3f}"),
            Column(key="ic2_acc", header="final IC2", fmt="{:.3f}"),
            Column(key="iw_acc", header="final IW", fmt="{:.3f}"),
        ),
        paper=(
            PaperValue(
                quantity="an abrupt jump of IC accuracy after a plateau",
                paper="yes (with the author's code's SGD, lr 0.01)",
                source="Fig 1d, Fig 3",
                here=lambda r: f"{count(r)} runs jumped",
            ),
        ),
        deviations=(
            "Adam lr 2e-4 for 3500 steps instead of plain SGD lr 0.01 (the author's code) for 1e5 "
            "steps (the toolkit's default), so that the plateau and the jump fit into minutes; "
            "1024 sequences per evaluation set.",
            "The quick tier trains a much smaller task and network (the `tiny` preset).",
        ),
        checks=(
            Check(what="the run jumps", column="transitioned", reduce="all", low=1),
            Check(what="after a plateau", column="transition_step", low=200, high=520),
            Check(what="the plateau is low", column="plateau_measured", high=0.35, reduce="max"),
            Check(what="the jump reaches the induction solution", column="ic_acc", low=0.85),
        ),
        reading=(
            "IC accuracy stays on a plateau near chance while the network learns which labels are "
            "in the context, then rises abruptly within a few hundred steps as layer 1 becomes a "
            "previous-token head and layer 2 an induction head; IW accuracy stays low because the "
            "task's classes are mostly novel."
        ),
        headline=lambda r: (
            f"plateau at IC {values(r, 'plateau_measured', '{:.2f}')}, jump at step "
            f"{values(r, 'transition_step', '{:.0f}')}"
        ),
        sort=("sweep", "seed"),
    )
)
