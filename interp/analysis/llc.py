"""The local learning coefficient (LLC) of a run's checkpoints, estimated with ``devinterp``.

The LLC (Lau et al. 2023) measures the effective dimension of the loss basin a checkpoint sits in;
developmental interpretability reads changes of it over training as developmental stages
(Hoogland et al. 2024 found them in a 2-layer attention-only transformer forming induction heads).
Here it is estimated at each checkpoint of a run with devinterp's SGLD sampler
(``devinterp.slt.sampler.estimate_learning_coeff_with_summary``, no hand-written SGLD):

    LLC = nbeta * (E_SGLD[L_m(w)] - L(w*)),

where ``L`` is the cross-entropy of the run's network on batches drawn from the run's own task
generator, ``w*`` the checkpoint's weights, and the SGLD chain is localised around ``w*`` (strength
``localization``, the gamma of Lau et al.). The same batches (seeded by :attr:`LLCConfig.seed`)
serve every checkpoint, so the curve over steps compares like with like.

Each chain is sampled by its own devinterp call, so a chain that diverges (NaN loss: step size too
large) costs only itself; every estimate carries its diagnostics (devinterp's MALA acceptance rate,
the drift of the LLC trace, failed chains) and a plain-language ``warning`` when the hyperparameters
look wrong. Results go to ``RUN_DIR/llc.csv`` (:data:`LLC_CSV`), one row per checkpoint, rewritten
atomically after each one, so an interrupted estimate resumes where it stopped.

:func:`calibrate_llc` (:mod:`interp.analysis.llc_calibration`) sweeps step size and inverse
temperature on one checkpoint with devinterp's ``EpsilonBetaAnalyzer`` and writes
``llc_calibration.json`` (with the chosen values), a CSV table and returns the sweep whose LLC
traces :func:`interp.viz.llc_plots.write_calibration_traces` draws.

The estimator is :mod:`interp.analysis.llc_estimator`, the curve over checkpoints
:mod:`interp.analysis.llc_runs`; this module gathers their public names. devinterp is an optional
extra (``pip install 'induction-cliff[llc]'``), imported only there, lazily.
We use its 1.x API: 2.x kept only a language-model interface (a ``datasets`` column of token ids,
zarr output) and dropped the calibration analyzer and the MALA acceptance callback.
"""

from interp.analysis.llc_calibration import (
    CALIBRATION_CSV,
    CALIBRATION_HTML,
    CALIBRATION_JSON,
    calibrate_llc,
    chosen_from_calibration,
)
from interp.analysis.llc_estimator import (
    MAX_DRIFT,
    MIN_ACCEPTANCE,
    LLCConfig,
    LLCEstimate,
    batch_loader,
    default_nbeta,
    estimate_llc,
    network_loss,
    run_batches,
)
from interp.analysis.llc_runs import (
    LLC_CSV,
    SETTINGS,
    llc_columns,
    llc_over_checkpoints,
    parse_steps,
    read_llc_csv,
    write_llc_csv,
)

__all__ = [
    "CALIBRATION_CSV",
    "CALIBRATION_HTML",
    "CALIBRATION_JSON",
    "LLC_CSV",
    "MAX_DRIFT",
    "MIN_ACCEPTANCE",
    "SETTINGS",
    "LLCConfig",
    "LLCEstimate",
    "batch_loader",
    "calibrate_llc",
    "chosen_from_calibration",
    "default_nbeta",
    "estimate_llc",
    "llc_columns",
    "llc_over_checkpoints",
    "network_loss",
    "parse_steps",
    "read_llc_csv",
    "run_batches",
    "write_llc_csv",
]
