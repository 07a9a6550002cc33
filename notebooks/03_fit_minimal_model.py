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
from interp.viz.dynamics_plots import forecast_figure, plot_fit_overlay, plot_landscape
from interp.viz.figures import run_note
from interp.viz.notebook import show_static_images
from phenomenology.fit import NestedLogitFit, fit_curve, read_run
from phenomenology.forecast import Forecast
from phenomenology.landscape import gradient_flow, landscape_grid
from phenomenology.sources import open_fit_sources

show_static_images()  # interactive figures, each with a PNG beside it

setting = notebook_setting()  # demo preset, or tiny with INDUCTION_CLIFF_SMALL=1
SMALL, RUNS, preset = setting.small, setting.runs, setting.preset
train_config, model_config = setting.train, setting.model
print(preset.note)

# %%
run_dir = setting.ensure_run(seed=0)
note = run_note(load_run(run_dir))
metrics, task = read_run(run_dir)
task

# %% [markdown]
# ## Fit the IC loss (what `induction-cliff fit RUN_DIR` computes)
# The model is fitted to the run's IC loss alone, as the command line does: the run and its task
# are opened as `fit` opens them, with the transition law's prior for this configuration when the
# law's data cover it. The run is only read (seed 0 is the `runs/demo` of `bash scripts/demo.sh`):
# the fit is written beside the notebook's own runs, in `fits/` of the runs folder.
#
# Three steps are reported, under the names the command line, the report and the figures use:
# the **IC-loss cliff** (read off the data; the *observed transition* is the IC-accuracy midpoint,
# another definition, under its own name), the **fitted transition** (where the model fitted to
# the whole curve puts its cliff: a fit, not a forecast) and, below, the **forecast** (from part
# of the plateau only).

# %%
fit_path = RUNS / "fits" / f"{run_dir.name}.json"
fit_path.parent.mkdir(parents=True, exist_ok=True)
(source,) = open_fit_sources(
    [str(run_dir)],
    task_set={},
    optimizer=None,
    json_out=str(fit_path),
    model="nested-logit",
    column="ic_loss",
    target=None,
    aux=(),
    options={},
    method="auto",
    progress_column="tila2",
)


def cli_fit(fraction=None):
    """`induction-cliff fit RUN_DIR [--fraction F]`: the IC-loss fit and its forecast."""
    return fit_curve(
        source.curve,
        task=source.task,
        fraction=fraction,
        source=source.source,
        optimizer=source.optimizer,
        prior=source.prior,
        calibration=source.calibration,
    )


summary = cli_fit()
write_json_atomic(fit_path, summary)
print("fit written to", fit_path)
print(f"R^2 of the IC-loss fit: {summary['r2']:.3f}")
print("IC-loss cliff step:", summary["observed"]["transition_step"])
print(f"fitted transition step: {summary['transition_step']:.0f}")

# %%
full = NestedLogitFit(**task).fit(metrics["step"], metrics["ic_loss"])
steps = np.linspace(0, metrics["step"].max(), 400)
r2 = full.score(metrics["step"], metrics["ic_loss"])
plot_fit_overlay(
    metrics,
    full.predict_curves(steps),
    fitted_step=full.transition_step_,  # the fitted transition: a fit to the whole curve
    observed_step=summary["observed"]["transition_step"],  # the IC-loss cliff
    observed_label="IC-loss cliff",
    columns=["ic_loss"],
    title=f"Nested-logit fit of the IC loss, whole run (R^2 {r2:.2f})",
    note=note,
)

# %% [markdown]
# ## Forecast the cliff from the plateau (what `induction-cliff fit RUN_DIR --fraction 0.8` does)
# Only the first 80% of the plateau is seen. The forecaster is the calibrated one of the command
# line (`forecast_method` says which: the growth of the induction head's attention on SGD runs,
# else the calibrated template fit of the loss, combined with the transition law's prior where the
# law covers the configuration), with its 80% interval; then compared with where the jump came.

# %%
forecast = cli_fit(fraction=0.8)
print(forecast.get("forecast_method", forecast["forecast"]))
{
    k: forecast.get(k)
    for k in (
        "forecast_transition_step",
        "forecast_interval",
        "fitted_until",
        "forecast_relative_error",
    )
} | {"IC-loss cliff": forecast["observed"]["transition_step"]}

# %%
combined = None
if forecast.get("forecast_from") == "combined":
    low, high = forecast["forecast_interval"]
    combined = Forecast(forecast["forecast_transition_step"], low, high, forecast["fitted_until"])
forecast_figure(
    source.curve,
    task=source.task,
    until=forecast["until_step"],
    observed_step=forecast["observed"]["transition_step"],
    note=note,
    optimizer=source.optimizer,
    method=forecast.get("forecast_from", "template"),
    forecast=combined,
)

# %% [markdown]
# A joint fit of the IC loss with the measures (CLA, ILA1, TILA2: `induction-cliff fit RUN_DIR
# --aux cla --aux ila1 --aux tila2`) asks another question: whether one set of model parameters
# carries the loss and the heads' measures at once (its R^2 says how well). It is not a better
# forecaster: on two paper-fig3 runs, forecast from 80% of the plateau, adding ILA1 and TILA2 to
# the IC loss moved the forecast from 15% to 16% early, adding CLA as well to 21% early (the
# notes of `phenomenology.fit.forecast_transition`). This notebook does not use it.

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
