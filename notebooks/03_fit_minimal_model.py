# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Fitting the phenomenological model to a run
#
# The nested-logit model ([docs/science.md](../docs/science.md) section 4; a **reconstruction**:
# the paper does not publish its exact form) has three scalars: `beta1` (layer-1 head strength),
# `alpha` (layer-2 match) and `xi` (classifier gain). Its gradient flow has a long plateau and a
# cliff. Fitted to a network's curves it maps model time to training steps and forecasts when the
# cliff comes.
#
# `INDUCTION_CLIFF_SMALL=1`: tiny setting (CI). Otherwise the `demo` preset.

# %%

import numpy as np

from interp.experiments.notebook_setting import notebook_setting
from interp.io.atomic import write_json_atomic
from interp.io.rundir import load_run
from interp.viz.dynamics_plots import plot_fit_overlay, plot_landscape
from interp.viz.figures import run_note
from interp.viz.notebook import show_static_images
from phenomenology.fit import NestedLogitFit, fit_run, forecast_transition, read_run
from phenomenology.landscape import gradient_flow, landscape_grid

show_static_images()  # interactive figures, each with a PNG beside it

setting = notebook_setting()  # demo preset, or tiny with INDUCTION_CLIFF_SMALL=1
SMALL, RUNS, preset = setting.small, setting.runs, setting.preset
train_config, model_config = setting.train, setting.model
print(preset.note)

# %%
run_dir = setting.ensure_run(seed=0)
note = run_note(load_run(run_dir))
metrics, task = read_run(run_dir)
AUX = ("cla", "ila1", "tila2")
task

# %% [markdown]
# ## Fit the whole curve
# `fit_run` fits IC loss jointly with CLA, ILA1 and TILA2. The run is only read (seed 0 is the
# `runs/demo` of `bash scripts/demo.sh`): the fit is written beside the notebook's own runs, in
# `fits/` of the runs folder. (`induction-cliff fit RUN_DIR` writes `fit.json` into a run, where
# the standard figure set draws the overlay.)

# %%
summary = fit_run(run_dir, aux=AUX, out_name=None)
fit_path = RUNS / "fits" / f"{run_dir.name}.json"
fit_path.parent.mkdir(parents=True, exist_ok=True)
write_json_atomic(fit_path, summary)
print("fit written to", fit_path)
{k: summary[k] for k in ("r2", "transition_step", "transition_step_stderr", "observed")}

# %%
full = NestedLogitFit(**task, aux=AUX).fit(metrics["step"], metrics[["ic_loss", *AUX]])
steps = np.linspace(0, metrics["step"].max(), 400)
plot_fit_overlay(
    metrics,
    full.predict_curves(steps),
    forecast_step=full.transition_step_,
    observed_step=summary["observed"]["transition_step"],
    title="Nested-logit fit to the whole run",
    note=note,
)

# %% [markdown]
# ## Forecast the cliff from the plateau
# Fit only the first 80% of the plateau, then compare the forecast with where the jump came.

# %%
forecast = forecast_transition(run_dir, fraction_of_plateau=0.8)
{k: forecast[k] for k in ("forecast_step", "forecast_stderr", "actual_step", "cutoff_step")}

# %%
seen = metrics[metrics["step"] <= forecast["cutoff_step"]]
early = NestedLogitFit(**task, aux=AUX).fit(seen["step"], seen[["ic_loss", *AUX]])
plot_fit_overlay(
    metrics,
    early.predict_curves(steps),
    forecast_step=early.transition_step_,
    observed_step=forecast["actual_step"],
    cutoff_step=forecast["cutoff_step"],
    title="Forecast from the plateau",
    note=note,
)

# %% [markdown]
# ## The fitted trajectory on the loss landscape
# The loss over `(alpha, xi)` with `beta1` at its final fitted value, and the fitted path.

# %%
path = full.predict_curves(steps)
pad = 0.1 * max(np.ptp(path["alpha"]), np.ptp(path["xi"]), 1.0)
ranges = {
    "alpha": (path["alpha"].min() - pad, path["alpha"].max() + pad),
    "xi": (path["xi"].min() - pad, path["xi"].max() + pad),
}
beta1 = float(path["beta1"].iloc[-1])
xs, ys, Z = landscape_grid("alpha", "xi", ranges, {"beta1": beta1}, n_points=80, **task)
plot_landscape(xs, ys, Z, path, x="alpha", y="xi", fixed={"beta1": beta1}, note=note)

# %% [markdown]
# The same model from a small start, without a network: gradient flow shows the plateau and the
# cliff on its own.

# %%
flow = gradient_flow((0.0, 0.0, 0.0), t_max=400.0, n_points=400, **task)
xs, ys, Z = landscape_grid(
    "alpha",
    "xi",
    {"alpha": (-0.5, flow["alpha"].max() + 1), "xi": (-0.5, flow["xi"].max() + 1)},
    {"beta1": float(flow["beta1"].iloc[-1])},
    n_points=80,
    **task,
)
plot_landscape(xs, ys, Z, flow, fixed={"beta1": float(flow["beta1"].iloc[-1])})
