"""Calibrating the LLC's SGLD: step size x inverse temperature on one checkpoint with devinterp's
``EpsilonBetaAnalyzer``; writes ``llc_calibration.csv`` and ``llc_calibration.json`` (with the
chosen pair) and returns the sweep, whose traces :mod:`interp.viz.llc_plots` draws."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import pandas as pd

from interp.analysis.llc_estimator import (
    LLCConfig,
    _require_devinterp,
    default_nbeta,
    estimate_llc,
    network_loss,
    run_batches,
)

logger = logging.getLogger("interp.analysis.llc")  # one logger for the LLC modules

CALIBRATION_JSON = "llc_calibration.json"
CALIBRATION_CSV = "llc_calibration.csv"
CALIBRATION_HTML = "llc_calibration_traces.html"

# ---------------------------------------------------------------------------------------------
# Calibration: step size x inverse temperature on one checkpoint


# Largest relative change of the LLC between neighbouring step sizes for it to count as settled.
STABLE_CHANGE = 0.2


def _pick(table: pd.DataFrame, default_nb: float) -> tuple[dict | None, str]:
    """The suggested setting and why.

    At the inverse temperature nearest devinterp's default, the largest step size whose estimate
    has no warning and differs by at most :data:`STABLE_CHANGE` from that of the next smaller step
    size (also without warning): the LLC should not depend on the step size once the chains have
    settled. None when no such pair exists (the reason says so).
    """
    ok = table[(table["warning"] == "") & np.isfinite(table["llc_mean"])]
    if ok.empty:
        return None, "every setting was flagged (see the warnings)"
    nearest = (np.log(ok["nbeta"]) - np.log(default_nb)).abs()
    row = ok[nearest == nearest.min()].sort_values("epsilon")
    nb = float(row["nbeta"].iloc[0])
    best = None
    values = row["llc_mean"].to_numpy(dtype=float)
    eps = row["epsilon"].to_numpy(dtype=float)
    for i in range(1, len(row)):
        if abs(values[i] - values[i - 1]) <= STABLE_CHANGE * abs(values[i]):
            best = {"epsilon": float(eps[i]), "nbeta": nb}
    if best is None:
        changes = ", ".join(f"{e:g}: {v:.3g}" for e, v in zip(eps, values, strict=True))
        return None, (
            f"at nbeta {nb:.3g} the LLC still changes by more than {STABLE_CHANGE:.0%} between "
            f"neighbouring step sizes ({changes}): the chains have not settled; raise "
            "--draws/--burnin or try other --epsilons"
        )
    return best, (
        f"largest epsilon without warning whose LLC is within {STABLE_CHANGE:.0%} of the next "
        f"smaller one's, at the nbeta nearest devinterp's default {default_nb:.3g}"
    )


def calibrate_llc(
    run_dir: str | os.PathLike,
    step: int | None,
    epsilons: Sequence[float],
    nbetas: Sequence[float] | None,
    cfg: LLCConfig = LLCConfig(),  # noqa: B008 (frozen)
) -> tuple[dict, pd.DataFrame]:
    """Sweep SGLD step size and inverse temperature on one checkpoint (devinterp's
    ``EpsilonBetaAnalyzer``) and write the result beside the run's ``llc.csv``.

    Writes ``llc_calibration.csv`` (one row per pair: LLC, spread, MALA acceptance, drift,
    warning) and ``llc_calibration.json`` (the settings, the table, ``chosen`` and ``reason``: see
    :func:`_pick`; ``chosen`` is ``null`` when no step size gave a settled estimate).

    Args:
        run_dir: a run directory.
        step: checkpoint to calibrate on (default: the last one).
        epsilons: step sizes to try.
        nbetas: inverse temperatures to try (default: devinterp's default and x0.3, x3 of it).
        cfg: the other settings (chains, draws, burnin, localization, batches).

    Returns:
        The JSON written, as a dict, and the sweep (one row per pair, with every chain's LLC trace
        in ``llc/trace``), which :func:`interp.viz.llc_plots.write_calibration_traces` draws into
        ``llc_calibration_traces.html`` (:data:`CALIBRATION_HTML`).
    """
    from interp.io.rundir import load_run

    run = load_run(run_dir)
    available = run.require_checkpoints()
    step = available[-1] if step is None else int(step)
    if step not in available:
        raise ValueError(f"--calibrate-step={step} has no checkpoint; saved: {available}")
    if not epsilons or any(not (math.isfinite(e) and e > 0) for e in epsilons):
        raise ValueError(f"--epsilons={list(epsilons)} is invalid: positive numbers")
    base = cfg.resolved(run.train_config.batch_size)
    default_nb = default_nbeta(base.batch_size)
    if nbetas is None:
        nbetas = [default_nb * 0.3, default_nb, default_nb * 3.0]
    if not nbetas or any(not (math.isfinite(b) and b > 0) for b in nbetas):
        raise ValueError(f"--nbetas={list(nbetas)} is invalid: positive numbers")
    version = _require_devinterp()
    from interp.io.outputs import writing

    with writing(run_dir):  # the calibration files, under the run's lock
        return _calibrate_locked(run, run_dir, step, epsilons, nbetas, base, default_nb, version)


def _calibrate_locked(run, run_dir, step, epsilons, nbetas, base, default_nb, version):
    from devinterp.vis_utils import EpsilonBetaAnalyzer

    from interp.io.checkpoints import write_json_atomic, write_text_atomic

    model = run.load_model(step)
    batches = run_batches(run, base.batch_size, base.n_batches, base.seed)

    def estimator(epsilon: float, beta: float, **_) -> dict:
        c = LLCConfig(**{**asdict(base), "epsilon": float(epsilon), "nbeta": float(beta)})
        est = estimate_llc(model, batches, network_loss, c)
        logger.info("calibration eps=%g nbeta=%g: LLC %.3g", epsilon, beta, est.llc_mean)
        return {
            "llc/trace": est.trace,
            "llc_mean": est.llc_mean,
            "llc_std": est.llc_std,
            "mala_acceptance": est.mala_acceptance,
            "trace_drift": est.trace_drift,
            "failed_chains": est.failed_chains,
            "seconds": est.seconds,
            "warning": est.warning,
        }

    analyzer = EpsilonBetaAnalyzer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyzer.configure_sweep(
            llc_estimator=estimator,
            llc_estimator_kwargs={},
            epsilon_range=[float(e) for e in epsilons],
            beta_range=[float(b) for b in nbetas],
        )
        analyzer.sweep()
    sweep = analyzer.sweep_df.rename(columns={"beta": "nbeta"})
    table = sweep[
        ["epsilon", "nbeta", "llc_mean", "llc_std", "mala_acceptance", "trace_drift"]
        + ["failed_chains", "seconds", "warning"]
    ].copy()
    chosen, reason = _pick(table, default_nb)
    out = Path(run_dir)
    buf = io.StringIO()
    table.to_csv(buf, index=False, float_format="%.9g")
    write_text_atomic(out / CALIBRATION_CSV, buf.getvalue())
    settings = {f.name: getattr(base, f.name) for f in fields(base)}
    settings.pop("epsilon")
    settings.pop("nbeta")
    record = {
        "step": step,
        "settings": settings,
        "default_nbeta": default_nb,
        "devinterp_version": version,
        "chosen": chosen,
        "reason": reason,
        "table": json.loads(table.to_json(orient="records")),
    }
    write_json_atomic(out / CALIBRATION_JSON, record)
    return record, sweep


def chosen_from_calibration(run_dir: str | os.PathLike) -> dict:
    """``{"epsilon", "nbeta"}`` chosen by the run's last calibration.

    Raises:
        ValueError: no ``llc_calibration.json``, or it chose nothing (the message names the file).
    """
    path = Path(run_dir) / CALIBRATION_JSON
    if not path.exists():
        raise ValueError(f"--from-calibration: {path} does not exist; run llc --calibrate first")
    from interp.io.inputs import read_json_object, require

    record = read_json_object(path)  # limits checked before parsing
    chosen = record.get("chosen")
    if not chosen:
        raise ValueError(
            f"--from-calibration: {path} chose no setting: "
            f"{record.get('reason', 'see llc_calibration.csv')}"
        )
    require(record, "chosen", dict, path)
    return {
        "epsilon": float(require(record, "chosen.epsilon", float, path)),
        "nbeta": float(require(record, "chosen.nbeta", float, path)),
    }
