"""The entropy-invariant log-n attention scale, used: does it help length generalisation, with
one-hot positions and with RoPE + q/k bias (and RoPE's test-time rescalings)?"""

import math

from experiments.catalog.positional import arm_name
from experiments.common import line_figure, with_lengths, with_transitions
from interp.experiments import register_experiment
from interp.experiments.core import Check, Column, Experiment, Sweep, Tier
from interp.experiments.directions import Direction, directions_table

LENGTHS = (8, 16, 32, 64)
RESCALINGS = ("ntk", "mixed")  # RoPE runs: also evaluated at the longest length with these
_LENGTHS = with_lengths(LENGTHS)
_TRANSITIONS = with_transitions(("ila1", "ic_acc"))


def _analyse(experiment, tier, dirs):
    """IC accuracy and the query row's entropy and N_eff at each length, the transitions of ILA1
    and IC accuracy, the entropy's rise from the shortest to the longest length, and for RoPE
    runs IC accuracy at the longest length under each rescaling in :data:`RESCALINGS`."""
    from interp.analysis.length import evaluate_lengths
    from interp.io.rundir import load_run

    rows = _LENGTHS(experiment, tier, dirs)
    steps = _TRANSITIONS(experiment, tier, dirs)
    for col in ("ila1_transition", "ic_acc_transition"):
        rows[col] = steps[col].to_numpy()
    names = [s.name for s in experiment.tiers[tier].sweeps]
    lengths = tuple(experiment.tiers[tier].params.get("n_pairs", LENGTHS))
    short, long = lengths[0], lengths[-1]
    if "positional" not in rows:  # the preset's encoding, neither swept nor set
        rows["positional"] = [
            load_run(dirs[names.index(s)] / p).model_config.positional
            for s, p in zip(rows["sweep"], rows["point"])
        ]
    bias = rows["qk_bias"] if "qk_bias" in rows else [False] * len(rows)
    rows["arm"] = [arm_name(p, b) for p, b in zip(rows["positional"], bias)]
    rows["entropy_rise"] = rows[f"entropy_n{long}"] - rows[f"entropy_n{short}"]
    for scaling in RESCALINGS:
        found = []
        for _, r in rows.iterrows():
            if r["positional"] != "rope":
                found.append(math.nan)
                continue
            d = dirs[names.index(r["sweep"])] / r["point"]
            df = evaluate_lengths(d, (long,), rope_scaling=scaling, sets=("ic",))
            found.append(float(df["ic_acc"].iloc[0]))
        rows[f"ic_acc_n{long}_{scaling}"] = found
    return rows


def _length_figure(rows):
    """IC accuracy against the context's pairs, one line per run: a colour per arm and scale, a
    dash per seed; a run whose IC accuracy never jumped is marked so in the legend."""
    import math

    import pandas as pd

    long, style = [], {}
    arms = list(dict.fromkeys(f"{r['arm']} / {r['attn_scale']}" for _, r in rows.iterrows()))
    for _, r in rows.iterrows():
        arm = f"{r['arm']} / {r['attn_scale']}"
        jumped = not math.isnan(float(r.get("ic_acc_transition", math.nan)))
        run = f"{arm} / seed {r['seed']}" + ("" if jumped else " (no IC jump)")
        style[run] = (_COLOURS[arms.index(arm) % len(_COLOURS)], _DASHES[int(r["seed"]) % 3])
        for n in LENGTHS:
            long.append({"N": n, "IC accuracy": r.get(f"ic_acc_n{n}"), "run": run})
    fig = line_figure(
        pd.DataFrame(long),
        "N",
        ("IC accuracy",),
        by="run",
        log_x=True,
        title="IC accuracy at longer contexts (trained at N = 8)",
    )
    for trace in fig.data:
        colour, dash = style[trace.name]
        trace.update(line={"color": colour, "dash": dash}, marker={"color": colour})
    fig.update_xaxes(tickvals=list(LENGTHS))
    fig.update_yaxes(title="IC accuracy", range=[0, 1.02])
    return fig


# One colour per arm and scale (Okabe-Ito, told apart by colour-blind readers), one
# dash per seed.
_COLOURS = ("#0072B2", "#56B4E9", "#D55E00", "#E69F00", "#009E73", "#CC79A7")
_DASHES = ("solid", "dash", "dot")


def _pair(claim, column, arm, *, op=">=", than_column=None, than_scale="none"):
    return Direction(
        claim=claim,
        column=column,
        where={"arm": arm, "attn_scale": "log_n"},
        than={"arm": arm, "attn_scale": than_scale},
        than_column=than_column,
        op=op,
        at_least=2,
    )


ARMS = ("onehot", "rope+bias")


def _notes(rows) -> str:
    have = set(zip(rows["arm"].astype(str), rows["attn_scale"].astype(str)))
    absent = [f"{a} / {s}" for a in ARMS for s in ("none", "log_n") if (a, s) not in have]
    lines = [f"Arms of the experiment with no rows here: {', '.join(absent)}."] if absent else []
    lines += _unformed(rows)
    return "\n\n".join([*lines, directions_table(DIRECTIONS, rows)])


def _unformed(rows) -> list[str]:
    """Arms with seeds whose IC accuracy never jumped: a direction on such an arm compares a
    network without an induction head (at its step budget) with one that has it."""
    import math

    out = []
    if not {"ic_acc_transition", "steps"} <= set(rows.columns):
        return out
    for (arm, scale), g in rows.groupby(["arm", "attn_scale"], sort=False):
        steps = int(g["steps"].max())
        none = [
            int(r["seed"]) for _, r in g.iterrows() if math.isnan(float(r["ic_acc_transition"]))
        ]
        if none:
            out.append(
                f"**{arm} / {scale}: no IC jump within {steps} steps on {len(none)} of {len(g)} "
                f"seeds** (seeds {', '.join(map(str, none))}): no induction head formed there, "
                "so a direction that compares this arm with another compares an unformed network "
                "with a formed one; read its verdict as that, not as the scale's effect on a "
                "formed head."
            )
    return out


def _headline(rows) -> str:
    """Mean IC accuracy at N = 64 and entropy rise per arm and scale."""
    parts = []
    for (arm, scale), g in rows.groupby(["arm", "attn_scale"], sort=False):
        acc = g["ic_acc_n64"].mean() if "ic_acc_n64" in g else float("nan")
        parts.append(f"{arm} / {scale}: IC at N = 64 {acc:.2f} ({len(g)} seeds)")
    return "; ".join(parts)


# Stated before the full tier's runs (the claims are fixed here; the page judges them).
DIRECTIONS = (
    _pair(
        "one-hot: the query row's entropy rises less from N = 8 to 64 with log_n than unscaled, "
        "on at least 2 of 3 seeds",
        "entropy_rise",
        "onehot",
        op="<",
    ),
    _pair(
        "RoPE + bias: the query row's entropy rises less from N = 8 to 64 with log_n than "
        "unscaled, on at least 2 of 3 seeds",
        "entropy_rise",
        "rope+bias",
        op="<",
    ),
    _pair(
        "one-hot: N_eff at N = 64 is smaller with log_n than unscaled, on at least 2 of 3 seeds",
        "neff_n64",
        "onehot",
        op="<",
    ),
    _pair(
        "one-hot: log_n >= unscaled in IC accuracy at N = 64, on at least 2 of 3 seeds",
        "ic_acc_n64",
        "onehot",
    ),
    _pair(
        "RoPE + bias: log_n >= unscaled in IC accuracy at N = 64 (both plain extrapolation), on "
        "at least 2 of 3 seeds",
        "ic_acc_n64",
        "rope+bias",
    ),
    _pair(
        "RoPE + bias: log_n with NTK-mixed rescaling >= unscaled plain extrapolation in IC "
        "accuracy at N = 64, on at least 2 of 3 seeds",
        "ic_acc_n64_mixed",
        "rope+bias",
        than_column="ic_acc_n64",
    ),
)

_QUICK = {"steps": 600, "eval_every": 25, "num_threads": 1, "N_max": 8}
_FULL = {"lr": 1e-3, "eval_every": 100, "num_threads": 1}
_SEEDS = (0, 1, 2)
_SCALES = {"attn_scale": ("none", "log_n")}

EXPERIMENT = register_experiment(
    Experiment(
        name="log-n-scale",
        title="The log-n attention scale at longer contexts (one-hot, RoPE + q/k bias)",
        question=(
            "Trained at N = 8, does scaling attention by log_{n_train}(n) keep layer 2's query "
            "row as sharp at N = 64 as at the training length, and the network as accurate, "
            "compared with no scale, with one-hot positions and with RoPE + q/k bias?"
        ),
        analyse=_analyse,
        tiers={
            "quick": Tier(
                sweeps=(Sweep(preset="tiny", grid=_SCALES, overrides=_QUICK),),
                cost="about 40 s on one core",
                cost_s=40,
                note="the `tiny` preset (N_max 8), one-hot positions, no scale against log_n, "
                "600 steps, evaluated at N = 4 and 8.",
                params={"n_pairs": (4, 8)},
            ),
            "full": Tier(
                sweeps=(
                    Sweep(
                        name="onehot",
                        preset="pe-attn-scale",
                        grid=_SCALES,
                        overrides={**_FULL, "steps": 2000, "positional": "onehot"},
                        seeds=_SEEDS,
                    ),
                    Sweep(
                        name="rope-bias",
                        preset="pe-attn-scale",
                        grid=_SCALES,
                        overrides={
                            **_FULL,
                            "steps": 2000,
                            "positional": "rope",
                            "qk_bias": True,
                            "d_head": 64,
                        },
                        seeds=_SEEDS,
                    ),
                ),
                cost="about 19 min of one core: 12 runs of 60-95 s, then the evaluations at "
                "four lengths (measured beside a second busy worker)",
                cost_s=1150,
                note="pe-attn-scale (the paper-fig1d task with p_C 0.8, a position table for "
                "N_max 64) with Adam at lr 1e-3 (the preset's 2e-4 times five), evaluations every "
                "100 steps; one-hot (2000 steps) and RoPE + q/k bias (d_head 64, 2000 steps) x "
                "no scale / log_n, seeds 0-2; evaluated at N = 8, 16, 32, 64 on 2048 sequences, "
                "RoPE also with NTK-aware and NTK-mixed rescaling at N = 64.",
            ),
        },
        columns=(
            Column(key="arm", header="positions"),
            Column(key="attn_scale", header="scale"),
            Column(key="seed", header="seed", fmt="{:.0f}"),
            Column(key="ila1_transition", header="ILA1 jump", fmt="{:.0f}"),
            Column(key="ic_acc_transition", header="IC jump", fmt="{:.0f}"),
            Column(key="ic_acc_n8", header="IC N=8", fmt="{:.3f}"),
            Column(key="ic_acc_n16", header="N=16", fmt="{:.3f}"),
            Column(key="ic_acc_n32", header="N=32", fmt="{:.3f}"),
            Column(key="ic_acc_n64", header="N=64", fmt="{:.3f}"),
            Column(key="ic_acc_n64_ntk", header="N=64 NTK", fmt="{:.3f}"),
            Column(key="ic_acc_n64_mixed", header="N=64 mixed", fmt="{:.3f}"),
            Column(key="entropy_n8", header="entropy N=8", fmt="{:.2f}"),
            Column(key="entropy_n64", header="entropy N=64", fmt="{:.2f}"),
            Column(key="neff_n8", header="N_eff N=8", fmt="{:.1f}"),
            Column(key="neff_n64", header="N_eff N=64", fmt="{:.1f}"),
        ),
        deviations=(
            "Adam lr 1e-3 for 2000 steps (the author's code: SGD lr 0.01; the toolkit's default: "
            "1e5 steps), to fit a loaded "
            "two-core machine; the author's code has no attention scale, the paper one-hot "
            "positions only.",
            "p_C = 0.8 on the paper-fig1d task is a guess (as in paper-fig1d).",
            "Two encodings and two scales only (one-hot and RoPE + q/k bias; none and log_n), "
            "three seeds each, to fit two cores: learned positions, CoPE and the 1/sqrt(d_head) "
            "scale are not rerun here.",
            "RoPE needs an even head width: d_head 64 in its arm (one-hot keeps the preset's).",
        ),
        checks=(
            Check(
                what="the unscaled run jumps",
                column="transitioned",
                where={"attn_scale": "none"},
                reduce="all",
                low=1,
            ),
            Check(
                what="the query row is measured at each length",
                column="entropy_n8",
                reduce="count",
                low=2,
                high=2,
            ),
        ),
        notes=lambda r: _notes(r),
        headline=lambda r: _headline(r),
        figure=lambda r: _length_figure(r),
        sort=(),
    )
)
