# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Attention maps: watching the induction circuit form
#
# Train (or reopen) a run, cache its attention patterns with TransformerLens hooks, look at them
# across checkpoints, and ablate each head with `run_with_hooks` to see which one in-context
# learning needs.
#
# `INDUCTION_CLIFF_SMALL=1` runs a tiny setting in seconds (CI); without it the `demo` preset runs
# (Adam, a few thousand steps: a labelled deviation from the author's code's SGD and the
# toolkit's 1e5 steps).
# Runs are written under `INDUCTION_CLIFF_RUNS` (default `runs/notebooks` of the checkout) and
# reused; seed 0 of the demo setting is the `runs/demo` run that `bash scripts/demo.sh` trained,
# when it is there (read, never written: this notebook trains nothing then).
# Open the notebooks with `bash scripts/notebooks.sh` (JupyterLab).

# %%

import pandas as pd
import torch

from interp.analysis.evaluation import accuracy_and_loss
from interp.analysis.transition import detect_run_transition
from interp.experiments.notebook_setting import notebook_setting
from interp.io.rundir import load_run
from interp.viz.explorer import AttentionExplorer, ExplorerConfig
from interp.viz.figures import attention_patterns, run_note, select_checkpoints
from interp.viz.notebook import show_static_images
from interp.viz.plots import plot_attention_maps, token_hover, token_labels

show_static_images()  # interactive figures, each with a PNG beside it

setting = notebook_setting()  # demo preset, or tiny with INDUCTION_CLIFF_SMALL=1
SMALL, RUNS, preset = setting.small, setting.runs, setting.preset
train_config, model_config = setting.train, setting.model
print(preset.note)

# %%
run_dir = setting.ensure_run(seed=0)
run = load_run(run_dir)
note = run_note(run)
run.metrics[["step", "ic_acc", "iw_acc", "ila1", "tila2"]].tail()

# %% [markdown]
# ## Cache the activations
# Every attention pattern is a hook point, `blocks.{l}.attn.hook_pattern`, shaped
# `[batch, head_index, query_pos, key_pos]`.

# %%
model = run.load_model()
ic = run.eval_sets(n=128)["ic"]
logits, cache = model.run_with_cache(
    ic.tokens, ic.positions, names_filter=lambda name: name.endswith("hook_pattern")
)
{name: tuple(t.shape) for name, t in cache.items()}

# %% [markdown]
# ## Patterns across checkpoints
# Drag the slider: layer 1 becomes a previous-token head (each label `l_i` attends to its item
# `x_i`), then layer 2 becomes an induction head (the query `xq` attends to the label after the
# item of its own class). Hover over a cell for the class and label ids.

# %%
transition = detect_run_transition(run.metrics)
steps = select_checkpoints(run.checkpoint_steps, 8, transition)  # 8 keep a saved notebook small
patterns = attention_patterns(run, steps, ic)  # [step, sequence, layer, query_pos, key_pos]
labels = token_labels(ic.n_pairs)
hover = token_hover(
    ic.item_classes[0].tolist(),
    ic.item_labels[0].tolist(),
    int(ic.query_class[0]),
    int(ic.target[0]),
)
print("transition step:", transition)
plot_attention_maps(
    patterns[:, 0], steps, labels, hover=hover, title="Attention, one IC sequence", note=note
)

# %%
plot_attention_maps(
    patterns.mean(axis=1),
    steps,
    labels,
    title=f"Attention, average over {len(ic)} IC sequences",
    note=note,
)

# %% [markdown]
# ## The attention explorer
# Every pattern above and the progress measures in one widget (JupyterLab, ipywidgets): the step
# slider moves the heatmap and the cursor on the measures; pick the evaluation set (IC, IC2, IW),
# the sequence and the layer. The same explorer is in the run's HTML report
# (`induction-cliff report RUN_DIR`), which needs no kernel.

# %%
explorer = AttentionExplorer(run, ExplorerConfig(steps=tuple(steps)))
explorer

# %% [markdown]
# ## Ablate a head
# Zero one head's output (`hook_z`) during the forward pass with `run_with_hooks`. In-context
# accuracy (IC) needs both heads of the circuit; in-weights accuracy (IW) does not.


# %%
def zero_head(z, hook):
    """Zero head 0's output; z is [batch, pos, head_index, d_head]."""
    z = z.clone()
    z[:, :, 0] = 0.0
    return z


sets = run.eval_sets()
rows = {}
with torch.no_grad():
    for label, hooks in [
        ("intact", []),
        ("layer 1 head ablated", [("blocks.0.attn.hook_z", zero_head)]),
        ("layer 2 head ablated", [("blocks.1.attn.hook_z", zero_head)]),
    ]:
        rows[label] = {
            f"{name} accuracy": accuracy_and_loss(
                model.run_with_hooks(batch.tokens, batch.positions, fwd_hooks=hooks), batch
            )[0]
            for name, batch in sets.items()
        }
assert not any(hp.fwd_hooks for hp in model.hook_dict.values()), "a hook was left behind"
ablation = pd.DataFrame(rows).T
ablation
