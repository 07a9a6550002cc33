# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. Training dynamics: plateau, cliff, and what moves it
#
# Several seeds of one setting: the loss plateau and the abrupt jump of in-context accuracy
# (the paper's Fig. 1d), the progress measures that jump with it, transition detection across
# seeds, and an intervention run that hands the network a perfect previous-token head.
#
# `INDUCTION_CLIFF_SMALL=1`: tiny setting, two seeds (CI). Otherwise the `demo` preset, three
# seeds (Adam: a labelled deviation from the paper's SGD).

# %%


from interp.analysis.transition import detect_run_transition, event_order, transition_report
from interp.experiments.notebook_setting import notebook_setting
from interp.io.rundir import load_run
from interp.viz.figures import run_note
from interp.viz.notebook import show_static_images
from interp.viz.plots import plot_progress_measures, plot_run_comparison, plot_training_dynamics

show_static_images()  # interactive figures, each with a PNG beside it

setting = notebook_setting()  # demo preset, or tiny with INDUCTION_CLIFF_SMALL=1
SMALL, RUNS, preset = setting.small, setting.runs, setting.preset
train_config, model_config = setting.train, setting.model
seeds = (0, 1) if SMALL else (0, 1, 2)
print(preset.note)


# %%
ensure_run = setting.ensure_run  # trains, resumes or reuses a run; returns its directory
run_dirs = [ensure_run(seed) for seed in seeds]
runs = [load_run(d) for d in run_dirs]
metrics = {f"seed {r.train_config.seed}": r.metrics for r in runs}
note = run_note(runs[0])

# %% [markdown]
# ## Transition across seeds
# A logistic fit to each run's IC accuracy: the transition step, its width, the plateau level.

# %%
report = transition_report(run_dirs)
report

# %%
transitions = [detect_run_transition(r.metrics) for r in runs]
plot_training_dynamics(
    metrics, [t for t in transitions if t is not None], note=note, chance=1 / preset.task.L
)

# %% [markdown]
# ## Progress measures on one step axis
# CLA (predicting *some* context label) climbs during the plateau; ILA1 (previous-token head),
# TILA2 (induction head) and IC accuracy jump together.

# %%
plot_progress_measures(metrics, [t for t in transitions if t is not None], note=note)

# %%
event_order(runs[0].metrics)

# %% [markdown]
# ## An intervention
# Clamp layer 1 to the ideal previous-token pattern during training (after Singh et al. 2024).
# With half of the circuit given, the induction head has less to find.

# %%
clamp = load_run(ensure_run(seeds[0], intervention="clamp_prev_token"))
compared = {"plain": runs[0].metrics, "clamp_prev_token": clamp.metrics}
plot_run_comparison(
    compared,
    ("ic_acc", "iw_acc", "tila2"),
    {name: detect_run_transition(m) for name, m in compared.items()},
    title="Previous-token head given for free",
    note=note,
)
