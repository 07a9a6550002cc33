# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Positional encodings, attention scale and length generalisation
#
# Only the layer-1 previous-token half of the induction circuit needs positions. Which encodings
# let the induction head form, and does it keep working when the context grows past training?
#
# - one-hot concatenated (the paper), learned absolute (added), RoPE (evaluated plain, with
#   positional interpolation and NTK-aware scaling, switched on the trained model without
#   retraining), CoPE (contextual positions, Golovneva et al. 2024);
# - trained at N = 8 pairs, evaluated at N = 8, 16, 32;
# - a positive control where content-based positions should win: CoPE's flip-flop task.
#
# `INDUCTION_CLIFF_SMALL=1`: tiny setting (CI). Otherwise the `demo` preset for 6000 steps, two
# seeds per encoding. DEVIATIONS from the paper: Adam lr 2e-4 instead of SGD lr 0.01, 6000 steps,
# 1024 sequences per evaluation set; RoPE runs use `d_head = 64` (RoPE needs an even head width;
# the residual is the 63 content dimensions and one value dimension is dropped by the fixed
# identity `W_O`).

# %%
import os
import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch

from interp.analysis.length import encoding_table
from interp.data.cope_tasks import FlipFlop, SelectiveCopy
from interp.experiments.standard import train
from interp.model.network import ModelConfig
from interp.model.positional import UntrainedPositionWarning, rotary_frequency_report
from interp.experiments.notebook_setting import runs_root
from interp.train.presets import get_preset
from interp.train.token_training import compare_encodings
from interp.viz.notebook import show_static_images

show_static_images()  # interactive figures, each with a PNG beside it

SMALL = os.environ.get("INDUCTION_CLIFF_SMALL", "0") not in ("", "0")
RUNS = Path(os.environ.get("INDUCTION_CLIFF_RUNS") or runs_root() / "notebooks")
torch.set_num_threads(1)
ENCODINGS = {"onehot": {}, "learned": {}, "rope": {"d_head": 64}, "cope": {}}
if SMALL:
    preset = get_preset("tiny")
    SEEDS, N_PAIRS, STEPS = (0,), (4, 8), 100
    ENCODINGS["rope"] = {"d_head": 16}
else:
    preset = get_preset("demo")
    SEEDS, N_PAIRS, STEPS = (0, 1), (8, 16, 32), 6000
train_cfg = replace(preset.train, steps=STEPS, eval_every=100 if not SMALL else 25, num_threads=1)
print(preset.note)

# %% [markdown]
# ## Which rotary frequencies can a rescaling matter for?
#
# Training sequences have `2N + 1 = 17` tokens; at N = 32 they have 65. A frequency whose
# wavelength is below 16 showed every phase in training; one above 64 never completes a turn.
# Only those in between meet phases at test time that training never showed.

# %%
for n_test in (33, 65):
    report = rotary_frequency_report(64, n_train=17, n_test=n_test)
    print(f"n_test={n_test}: frequencies in between: {list(report.index[report.in_between])}")
rotary_frequency_report(64, 17, 65, scaling="ntk", scale=4.0).head(12).round(3)

# %% [markdown]
# ## Train each encoding (or reuse the runs already in the runs folder)

# %%
run_dirs = []
for name, extra in ENCODINGS.items():
    for seed in SEEDS:
        out = RUNS / (f"pe-{name}-s{seed}" if not SMALL else f"pe-small-{name}-s{seed}")
        if not (out / "metrics.csv").exists():
            model_cfg = ModelConfig.from_task(
                preset.task, **{**preset.model, "positional": name, **extra}
            )
            train(preset.task, model_cfg, replace(train_cfg, seed=seed), out, progress=False)
        run_dirs.append(out)
[str(p) for p in run_dirs]

# %% [markdown]
# ## The table: does the induction head form, and IC accuracy at each length
#
# `head_formed` / `tila2_step`: a transition of TILA2 (query -> labels of its class) and its
# step. RoPE rows are one trained model evaluated with each rescaling (`s = N_test / 8`).
# `untrained_positions` counts tokens past the absolute tables (none at these lengths: `N_max = 32`).

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UntrainedPositionWarning)
    # cut at STEPS (a run may have been continued further); a run stopped early is evaluated at
    # its last checkpoint: read `steps` and `eval_step`
    table = encoding_table(run_dirs, N_PAIRS, n=256 if SMALL else None, step=STEPS)
table.round(3)

# %%
acc_cols = [c for c in table.columns if c.startswith("ic_acc_N")]
summary = table.groupby(["positional", "rope_scaling"], dropna=False).agg(
    seeds=("seed", "count"),
    head_formed=("head_formed", "sum"),
    tila2_step=("tila2_step", lambda s: s.dropna().mean()),
    **{c: (c, "mean") for c in acc_cols},
)
summary.round(3)

# %% [markdown]
# ## Positive control: CoPE's flip-flop task
#
# After `r`, output the bit of the last `w`; ignores (`i`) in between. Out of distribution: much
# sparser writes (`ood_sparse`) and sequences twice as long (`ood_long`; absolute positions past the
# training length are untrained). Small token networks (embedding + the same hooked blocks).

# %%
saved = RUNS / "cope-tasks" / "flipflop.csv"
if not SMALL and saved.exists():
    flipflop = pd.read_csv(saved)
else:
    task = FlipFlop(n_instr=8) if SMALL else FlipFlop()
    flipflop = compare_encodings(
        task, ("learned", "cope"), SEEDS, steps=60 if SMALL else 1500, n_test=128 if SMALL else 512
    )
cols = ["positional", "seed", "id_acc", "ood_sparse_acc", "ood_long_acc", "ood_long_seq_acc"]
flipflop[cols].round(3)

# %% [markdown]
# Selective copy: copy the data tokens scattered among blanks; out of distribution the region of
# blanks is twice as long (same number of data tokens).

# %%
saved = RUNS / "cope-tasks" / "selective_copy.csv"
if not SMALL and saved.exists():
    copy = pd.read_csv(saved)
else:
    task = SelectiveCopy(n_region=8, n_data=3) if SMALL else SelectiveCopy()
    copy = compare_encodings(
        task, ("learned", "cope"), SEEDS, steps=60 if SMALL else 1500, n_test=128 if SMALL else 512
    )
copy[["positional", "seed", "id_acc", "ood_sparse_acc", "ood_sparse_seq_acc"]].round(3)
