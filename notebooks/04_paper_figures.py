# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Paper figures: regenerate and export the figure set
#
# Writes the standard figure set of a group of seeds (what `induction-cliff figures` writes),
# a phase diagram over two data parameters, and the phenomenological landscape, as PDF and PNG in
# the paper style (3.5 in / 7 in wide, 9 pt fonts, Okabe-Ito colours) with a CSV of the plotted
# data beside each. Static export needs Chromium (`apt-get install -y chromium`); without it this
# notebook writes self-contained HTML instead.
#
# `INDUCTION_CLIFF_SMALL=1`: tiny settings (CI). Otherwise the `demo` preset and a 3 x 3 sweep.

# %%
import itertools
from dataclasses import replace

from IPython.display import Image

from interp.experiments.notebook_setting import notebook_setting
from interp.experiments.standard import train
from interp.model.network import ModelConfig
from interp.viz.dynamics_plots import plot_landscape
from interp.viz.export import export_figure, find_chromium
from interp.viz.figures import summarize_runs, write_standard_figures
from interp.viz.notebook import show_static_images
from interp.viz.sweep_plots import plot_phase_diagram
from phenomenology.landscape import gradient_flow, landscape_grid

show_static_images()  # interactive figures, each with a PNG beside it

setting = notebook_setting()  # demo preset, or tiny with INDUCTION_CLIFF_SMALL=1
SMALL, RUNS, preset = setting.small, setting.runs, setting.preset
train_config, model_config = setting.train, setting.model
seeds = (0, 1) if SMALL else (0, 1, 2)
FIGURES = RUNS / "figures"
formats = ("pdf", "png") if find_chromium() else ("html",)
print(preset.note)
print("formats:", formats)

# %%
run_dirs = [setting.ensure_run(seed) for seed in seeds]  # seed 0: runs/demo, when it is there

# %% [markdown]
# ## The standard figure set

# %%
paths = write_standard_figures(run_dirs, FIGURES, formats)
[str(p) for p in paths]

# %%
png = FIGURES / "training_dynamics.png"
Image(filename=png) if png.exists() else None

# %% [markdown]
# ## Phase diagram: final IC and IW accuracy over K and B
# Larger K (more classes) and burstier data favour in-context learning over in-weights learning.

# %%
if SMALL:
    grid = {"K": (16, 64), "B": (1, 2)}
    sweep_train = replace(train_config, steps=200, eval_every=50, n_log_checkpoints=0)
else:
    grid = {"K": (128, 512, 2048), "B": (1, 2, 4)}
    sweep_train = train_config
sweep_dirs = []
for K, B in itertools.product(grid["K"], grid["B"]):
    task = replace(preset.task, K=K, B=B)
    run_dir = RUNS / "sweep" / f"{preset.name}-K{K}-B{B}"
    train(
        task,
        ModelConfig.from_task(task, **preset.model),
        sweep_train,
        run_dir,
        resume=True,
        progress=False,
    )
    sweep_dirs.append(run_dir)
summary = summarize_runs(sweep_dirs)
fig = plot_phase_diagram(
    summary, "K", "B", note=f"{preset.name} preset, {sweep_train.steps} steps each"
)
paths = export_figure(fig, FIGURES / "phase_diagram", formats, style="double")
fig

# %% [markdown]
# ## The nested-logit landscape with its gradient-flow path [reconstruction]

# %%
L, N = preset.task.L, preset.task.N
B = preset.task.B_eval_effective
flow = gradient_flow((0.0, 0.0, 0.0), L=L, N=N, B=B, t_max=400.0, n_points=400)
beta1 = float(flow["beta1"].iloc[-1])
ranges = {"alpha": (-0.5, flow["alpha"].max() + 1), "xi": (-0.5, flow["xi"].max() + 1)}
xs, ys, Z = landscape_grid("alpha", "xi", ranges, {"beta1": beta1}, L, N, B, n_points=80)
fig = plot_landscape(xs, ys, Z, flow, fixed={"beta1": beta1}, note=f"L={L}, N={N}, B={B}")
paths = export_figure(fig, FIGURES / "landscape", formats, style="single")
fig

# %%
sorted(p.name for p in FIGURES.iterdir())
