"""The entropy-invariant log-n attention scale, used: does it help length generalisation?"""

from experiments.common import line_figure, with_lengths
from interp.experiments import register_experiment
from interp.experiments.core import Column, Experiment, Sweep, Tier


def _length_figure(rows):
    """IC accuracy against the context's pairs for seed 0, the longest-trained run of each
    encoding and scale, one line each."""
    import pandas as pd

    seed0 = rows[pd.to_numeric(rows["seed"], errors="coerce") == 0]
    longest = seed0.sort_values("steps").groupby(["positional", "attn_scale"], sort=False).tail(1)
    long = []
    for _, r in longest.iterrows():
        for n in (8, 16, 32, 64):
            long.append(
                {
                    "N": n,
                    "IC accuracy": r.get(f"ic_acc_n{n}"),
                    "run": f"{r['positional']} / {r['attn_scale']} ({r['steps']} steps)",
                }
            )
    fig = line_figure(
        pd.DataFrame(long),
        "N",
        ("IC accuracy",),
        by="run",
        log_x=True,
        title="IC accuracy at longer contexts (trained at N = 8; seed 0)",
    )
    fig.update_xaxes(tickvals=[8, 16, 32, 64])
    return fig


_QUICK = {"steps": 600, "eval_every": 25, "num_threads": 1, "N_max": 8}

EXPERIMENT = register_experiment(
    Experiment(
        name="log-n-scale",
        title="The log-n attention scale at longer contexts (one-hot, learned, CoPE)",
        question=(
            "Trained at N = 8, does scaling attention by log_{n_train}(n) keep layer 2's query "
            "row as sharp at N = 16-64 as at the training length, and the network as accurate, "
            "compared with no scale and 1/sqrt(d_head)?"
        ),
        analyse=with_lengths((8, 16, 32, 64)),
        tiers={
            "quick": Tier(
                sweeps=(
                    Sweep(preset="tiny", grid={"attn_scale": ("none", "log_n")}, overrides=_QUICK),
                ),
                cost="about 40 s on one core",
                cost_s=40,
                note="the `tiny` preset (N_max 8), no scale against log_n, 600 steps, evaluated "
                "at N = 4 and 8.",
                params={"n_pairs": (4, 8)},
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        preset="pe-attn-scale",
                        seeds=(0, 1),
                        overrides={"steps": 20000, "num_threads": 1},
                    ),
                ),
                cost="about 8 h on two cores",
                cost_s=28800,
                note="pe-attn-scale (the paper-fig1d task with p_C 0.8, N_max 64; Adam lr 2e-4), "
                "one-hot / learned / CoPE x none / sqrt / log_n, 8000 or 20000 steps.",
            ),
        },
        columns=(
            Column(key="positional", header="positions"),
            Column(key="attn_scale", header="scale"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="steps", header="steps", fmt="{:.0f}"),
            Column(key="transition_step", header="IC transition", fmt="{:.0f}"),
            Column(key="ic_acc_n8", header="IC N=8", fmt="{:.3f}"),
            Column(key="ic_acc_n16", header="N=16", fmt="{:.3f}"),
            Column(key="ic_acc_n32", header="N=32", fmt="{:.3f}"),
            Column(key="ic_acc_n64", header="N=64", fmt="{:.3f}"),
            Column(key="entropy_n8", header="entropy N=8", fmt="{:.2f}"),
            Column(key="entropy_n64", header="entropy N=64", fmt="{:.2f}"),
            Column(key="neff_n8", header="N_eff N=8", fmt="{:.1f}"),
            Column(key="neff_n64", header="N_eff N=64", fmt="{:.1f}"),
        ),
        deviations=(
            "Adam lr 2e-4 for 8000 or 20000 steps (the paper: SGD lr 0.01 for 1e5); one or two "
            "seeds per scale; the paper has no attention scale and one-hot positions only.",
            "p_C = 0.8 on the paper-fig1d task is a guess (as in paper-fig1d).",
        ),
        reading=(
            "In every setting log_n's query entropy grows least with length and log_n beats sqrt "
            "at every length above the training one; but with one-hot and learned positions the "
            "unscaled network stays the most accurate at every length. With CoPE, seed 0, log_n "
            "generalises best once its head has formed; the other CoPE seed formed no scaled "
            "head, so that result rests on one seed. Both scales slow the head's formation."
        ),
        headline=lambda r: (
            "log_n beats sqrt at length; unscaled one-hot stays best; CoPE + log_n best on one seed"
        ),
        figure=lambda r: _length_figure(r),
        sort=("positional", "attn_scale", "seed", "steps"),
    )
)
