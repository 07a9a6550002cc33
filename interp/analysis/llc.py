"""The local learning coefficient (LLC) of a run's checkpoints, estimated with ``devinterp``.

The LLC (Lau et al. 2023) measures the effective dimension of the loss basin a checkpoint sits in;
developmental interpretability reads changes of it over training as developmental stages
(Hoogland et al. 2024 found them in a 2-layer attention-only transformer forming induction heads).
Here it is estimated at each checkpoint of a run with devinterp's SGLD sampler
(``devinterp.slt.sampler.estimate_learning_coeff_with_summary``, no hand-written SGLD):

    LLC = nbeta * (E_SGLD[L_m(w)] - L(w*)),

where ``L`` is the cross-entropy of the run's network on batches drawn from the run's own task
generator, ``w*`` the checkpoint's weights, and the SGLD chain is localised around ``w*`` (strength
``localization``, the gamma of Lau et al.). The same batches (seeded by :attr:`LLCConfig.seed`) serve
every checkpoint, so the curve over steps compares like with like.

Each chain is sampled by its own devinterp call, so a chain that diverges (NaN loss: step size too
large) costs only itself; every estimate carries its diagnostics (devinterp's MALA acceptance rate,
the drift of the LLC trace, failed chains) and a plain-language ``warning`` when the hyperparameters
look wrong. Results go to ``RUN_DIR/llc.csv`` (:data:`LLC_CSV`), one row per checkpoint, rewritten
atomically after each one, so an interrupted estimate resumes where it stopped.

:func:`calibrate_llc` sweeps step size and inverse temperature on one checkpoint with devinterp's
``EpsilonBetaAnalyzer`` and writes ``llc_calibration.json`` (with the chosen values), a CSV table and
an HTML figure of the LLC traces.

devinterp is an optional extra (``pip install 'induction-cliff[llc]'``), imported only here, lazily.
We use its 1.x API: 2.x kept only a language-model interface (a ``datasets`` column of token ids,
zarr output) and dropped the calibration analyzer and the MALA acceptance callback.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from interp.train.budget import check_count

logger = logging.getLogger(__name__)

LLC_CSV = "llc.csv"
CALIBRATION_JSON = "llc_calibration.json"
CALIBRATION_CSV = "llc_calibration.csv"
CALIBRATION_HTML = "llc_calibration_traces.html"

# Diagnostic thresholds behind the per-checkpoint warnings.
MIN_ACCEPTANCE = 0.3  # MALA acceptance below this: the step size is clearly too large
MAX_DRIFT = 0.25  # |late - middle| LLC-trace means over |LLC| (and > 3 s.e.): not settled

INSTALL_HINT = (
    "devinterp is not installed: pip install 'induction-cliff[llc]' (devinterp>=1.3.2,<2)"
)


def _require_devinterp():
    """Import devinterp or raise an ImportError that says how to install it."""
    try:
        import devinterp  # noqa: F401
        from devinterp.slt.sampler import estimate_learning_coeff_with_summary  # noqa: F401
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    from importlib.metadata import version

    return version("devinterp")


@dataclass(frozen=True, kw_only=True)
class LLCConfig:
    """SGLD settings of one LLC estimate (devinterp's names in brackets).

    Attributes:
        epsilon: SGLD step size (``lr``).
        nbeta: inverse temperature n*beta (``nbeta``); ``None`` means devinterp's default
            ``batch_size / log(batch_size)`` (the value used is recorded in ``llc.csv``).
        localization: strength gamma of the pull back to the checkpoint (``localization``).
        chains: independent SGLD chains (``num_chains``).
        draws: draws per chain after burn-in (``num_draws``); one SGLD step per draw.
        burnin: SGLD steps discarded before the draws (``num_burnin_steps``).
        batch_size: sequences per SGLD step; ``None`` means the run's training batch size.
        n_batches: batches drawn once from the run's task generator and cycled through.
        seed: seed of those batches and of the chains' noise.
    """

    epsilon: float = 1e-4
    nbeta: float | None = None
    localization: float = 100.0
    chains: int = 4
    draws: int = 100
    burnin: int = 50
    batch_size: int | None = None
    n_batches: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epsilon", "localization"):
            value = getattr(self, name)
            ok = isinstance(value, int | float) and math.isfinite(value)
            if not ok or value < 0 or (name == "epsilon" and value == 0):
                need = "> 0" if name == "epsilon" else ">= 0"
                raise ValueError(f"LLCConfig.{name}={value!r} is invalid: must be a number {need}")
        if self.nbeta is not None and not (
            isinstance(self.nbeta, int | float) and math.isfinite(self.nbeta) and self.nbeta > 0
        ):
            raise ValueError(f"LLCConfig.nbeta={self.nbeta!r} is invalid: a number > 0 or None")
        for name in ("chains", "draws", "n_batches"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"LLCConfig.{name}={value!r} is invalid: an integer >= 1")
        if self.draws < 3:
            raise ValueError(f"LLCConfig.draws={self.draws!r} is invalid: at least 3 are needed")
        if not (isinstance(self.burnin, int) and self.burnin >= 0):
            raise ValueError(f"LLCConfig.burnin={self.burnin!r} is invalid: an integer >= 0")
        if self.batch_size is not None and not (
            isinstance(self.batch_size, int) and self.batch_size >= 2
        ):
            raise ValueError(
                f"LLCConfig.batch_size={self.batch_size!r} is invalid: an integer >= 2 or None"
            )
        if not isinstance(self.seed, int):
            raise ValueError(f"LLCConfig.seed={self.seed!r} is invalid: an integer")
        # Bounds, so that no typo samples without end or allocates without limit.
        for name, high in (("chains", 10**3), ("draws", 10**7), ("burnin", 10**7)):
            check_count(f"LLCConfig.{name}", getattr(self, name), 0, high)
        check_count("LLCConfig.n_batches", self.n_batches, 1, 10**5)
        if self.batch_size is not None:
            check_count("LLCConfig.batch_size", self.batch_size, 2, 10**7)

    def resolved(self, batch_size: int) -> LLCConfig:
        """This config with ``batch_size`` and ``nbeta`` filled in (``batch_size`` if unset)."""
        bs = self.batch_size or batch_size
        nbeta = self.nbeta if self.nbeta is not None else default_nbeta(bs)
        return LLCConfig(**{**asdict(self), "batch_size": bs, "nbeta": float(nbeta)})


def default_nbeta(batch_size: int) -> float:
    """devinterp's default inverse temperature for a batch size: ``m / log(m)``."""
    return float(batch_size / np.log(batch_size))


@dataclass(frozen=True, kw_only=True)
class LLCEstimate:
    """One LLC estimate and its diagnostics.

    Attributes:
        llc_mean: mean over the chains that stayed finite (NaN if none did).
        llc_std: their standard deviation (NaN with fewer than two).
        llc_chains: per-chain LLC (NaN for a failed chain).
        init_loss: loss at the checkpoint, averaged over the batches.
        mala_acceptance: devinterp's MALA acceptance rate, mean over chains and draws.
        trace_drift: ``|mean(last quarter) - mean(second quarter)| / |LLC|`` of the LLC trace.
        failed_chains: chains whose loss became NaN or infinite.
        seconds: wall time of the estimate.
        warning: ``""`` when the diagnostics look sound, else what looks wrong (``; ``-joined).
        trace: LLC per chain and draw, ``[chains, draws]`` (not written to ``llc.csv``).
    """

    llc_mean: float
    llc_std: float
    llc_chains: tuple[float, ...]
    init_loss: float
    mala_acceptance: float
    trace_drift: float
    failed_chains: int
    seconds: float
    warning: str
    trace: np.ndarray


def _unwrap(items):
    return items[0]


def batch_loader(batches: Sequence, seed: int) -> torch.utils.data.DataLoader:
    """A DataLoader that yields whole pre-made batches in a seeded shuffled order.

    Args:
        batches: batches (anything ``evaluate`` takes), used as they are.
        seed: seed of the order.

    Returns:
        A loader devinterp cycles through (its ``batch_size`` is 1: one pre-made batch per item).
    """
    return torch.utils.data.DataLoader(
        list(batches),
        batch_size=1,
        shuffle=True,
        collate_fn=_unwrap,
        generator=torch.Generator().manual_seed(seed),
    )


def estimate_llc(
    model: torch.nn.Module,
    batches: Sequence,
    evaluate: Callable,
    cfg: LLCConfig,
) -> LLCEstimate:
    """Estimate the LLC of ``model`` at its current weights with devinterp's SGLD.

    Each chain is one call of ``estimate_learning_coeff_with_summary`` (with devinterp's
    ``MalaAcceptanceRate`` callback) from the same initial loss, so that a diverging chain is
    reported on its own instead of aborting the estimate. torch's global RNG is left as it was.

    Args:
        model: the network; not modified (devinterp samples on copies).
        batches: the data, pre-made batches cycled in a seeded order.
        evaluate: ``evaluate(model, batch) -> (loss, {})`` with the mean loss of the batch (the
            negative log-likelihood per sample, so that the regular-model LLC is ``d / 2``).
        cfg: settings; ``nbeta`` must be set (see :meth:`LLCConfig.resolved`).

    Returns:
        The estimate with its diagnostics and per-chain traces.

    Raises:
        ImportError: devinterp is missing (the message says how to install it).
    """
    _require_devinterp()
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.mala import MalaAcceptanceRate
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary
    from devinterp.utils import get_init_loss_multi_batch

    if cfg.nbeta is None:
        raise ValueError("LLCConfig.nbeta is None: call cfg.resolved(batch_size) first")
    start = time.perf_counter()
    device = next(model.parameters()).device
    loader = batch_loader(batches, cfg.seed)
    llcs, accept, traces, problems = [], [], [], []
    # devinterp's advice warnings are replaced by our diagnostics; its seeding by a forked RNG.
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        init_loss = get_init_loss_multi_batch(loader, len(batches), model, evaluate, device)
        for chain in range(cfg.chains):
            mala = MalaAcceptanceRate(
                num_chains=1, num_draws=cfg.draws, nbeta=cfg.nbeta, learning_rate=cfg.epsilon
            )
            try:
                result = estimate_learning_coeff_with_summary(
                    model,
                    loader,
                    callbacks=[mala],
                    evaluate=evaluate,
                    sampling_method=SGLD,
                    optimizer_kwargs={
                        "lr": cfg.epsilon,
                        "nbeta": cfg.nbeta,
                        "localization": cfg.localization,
                    },
                    num_draws=cfg.draws,
                    num_chains=1,
                    num_burnin_steps=cfg.burnin,
                    init_loss=init_loss,
                    seed=[cfg.seed * 1000 + chain],
                    device=device,
                    verbose=False,
                )
            except RuntimeError as err:  # devinterp's LLCEstimator raises on a NaN loss
                if "NaN" not in str(err):
                    raise
                llcs.append(math.nan)
                accept.append(math.nan)
                traces.append(np.full(cfg.draws, np.nan))
                continue
            losses = np.asarray(result["loss/trace"], dtype=float).reshape(-1)
            value = float(result["llc/mean"])
            if not (np.isfinite(losses).all() and math.isfinite(value)):
                value = math.nan
            llcs.append(value)
            rate = np.asarray(result["mala_accept/trace"], dtype=float).reshape(-1)[1:]
            accept.append(float(np.nanmean(rate)) if rate.size else math.nan)
            traces.append(cfg.nbeta * (losses - init_loss))

    chains = np.asarray(llcs, dtype=float)
    good = chains[np.isfinite(chains)]
    failed = int(len(chains) - len(good))
    mean = float(good.mean()) if len(good) else math.nan
    std = float(good.std(ddof=1)) if len(good) > 1 else math.nan
    trace = np.stack(traces)
    drift, drifting = _drift(trace, mean)
    acceptance = float(np.nanmean(accept)) if np.isfinite(accept).any() else math.nan
    if failed:
        problems.append(
            f"{failed} of {cfg.chains} chains diverged (NaN/inf loss): epsilon={cfg.epsilon:g} "
            "is too large"
        )
    if len(good) and mean < 0:
        problems.append(
            "LLC < 0: SGLD found lower loss than the checkpoint (not at a local minimum, or "
            "localization/nbeta too small)"
        )
    if math.isfinite(acceptance) and acceptance < MIN_ACCEPTANCE:
        problems.append(
            f"MALA acceptance {acceptance:.2f} < {MIN_ACCEPTANCE}: epsilon={cfg.epsilon:g} "
            "is likely too large"
        )
    if drifting:
        problems.append(
            f"LLC trace still drifting ({drift:.2f} of its value): more burnin/draws or a "
            "larger epsilon"
        )
    return LLCEstimate(
        llc_mean=mean,
        llc_std=std,
        llc_chains=tuple(float(v) for v in chains),
        init_loss=float(init_loss),
        mala_acceptance=acceptance,
        trace_drift=drift,
        failed_chains=failed,
        seconds=time.perf_counter() - start,
        warning="; ".join(problems),
        trace=trace,
    )


def _drift(trace: np.ndarray, mean: float) -> tuple[float, bool]:
    """How far the LLC trace still moves: second against last quarter of the draws.

    Returns:
        ``|mean over chains of (last-quarter mean - second-quarter mean)| / |LLC|``, and whether
        that move is both larger than :data:`MAX_DRIFT` and more than three standard errors (over
        chains, which are independent) away from zero.
    """
    finite = trace[np.isfinite(trace).all(axis=1)]
    if not len(finite) or not math.isfinite(mean) or mean == 0:
        return math.nan, False
    q = max(1, finite.shape[1] // 4)
    moves = finite[:, -q:].mean(axis=1) - finite[:, q : 2 * q].mean(axis=1)
    drift = float(abs(moves.mean()) / abs(mean))
    se = float(moves.std(ddof=1) / np.sqrt(len(moves))) if len(moves) > 1 else 0.0
    return drift, drift > MAX_DRIFT and abs(moves.mean()) > 3 * se


# ---------------------------------------------------------------------------------------------
# Runs: the network's loss on the run's own task, llc.csv


def run_batches(run, batch_size: int, n_batches: int, seed: int) -> list[tuple]:
    """``n_batches`` training batches from the run's own task generator, seeded.

    Args:
        run: a :class:`interp.train.training.Run`.
        batch_size: sequences per batch.
        n_batches: how many.
        seed: the LLC seed (combined with the run's seed; independent of training's stream).

    Returns:
        ``(tokens, positions, target)`` tuples.
    """
    state = np.random.SeedSequence([int(run.train_config.seed), 4, int(seed)]).generate_state(1)
    gen = torch.Generator().manual_seed(int(state[0]))
    sampler = run.generator()
    out = []
    for _ in range(n_batches):
        b = sampler.sample(batch_size, gen)
        out.append((b.tokens, b.positions, b.target))
    return out


def network_loss(model, batch) -> tuple[torch.Tensor, dict]:
    """Cross-entropy of the run's network on a ``(tokens, positions, target)`` batch.

    Uses the hook-free fast path where it computes the same function (as training does).
    """
    from interp.model.fast import fast_logits, supports_fast_path

    tokens, positions, target = batch
    if supports_fast_path(model):
        logits = fast_logits(model, tokens, positions)
    else:
        logits = model(tokens, positions)
    return F.cross_entropy(logits, target), {}


# Columns of llc.csv: results, diagnostics, then the settings that produced them.
SETTINGS = ("epsilon", "nbeta", "localization", "chains", "draws", "burnin", "batch_size")
SETTINGS += ("n_batches", "seed")


def llc_columns(chains: int) -> list[str]:
    """The columns of ``llc.csv`` for ``chains`` chains."""
    return [
        "step",
        "llc_mean",
        "llc_std",
        *(f"llc_chain_{i}" for i in range(chains)),
        "init_loss",
        "mala_acceptance",
        "trace_drift",
        "failed_chains",
        "seconds",
        *SETTINGS,
        "devinterp_version",
        "warning",
    ]


def read_llc_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read ``llc.csv`` (the run directory or the file); empty warnings read as ``""``.

    Raises:
        FileNotFoundError: there is no such file.
        ValueError: the file lacks a column of the format (the message names it and the file).
    """
    path = Path(path)
    if path.is_dir():
        path = path / LLC_CSV
    df = pd.read_csv(
        path,
        keep_default_na=False,
        na_values=["nan", "NaN", ""],
        dtype={"warning": object, "devinterp_version": object},
    )
    needed = ["step", "llc_mean", "llc_std", *SETTINGS, "warning"]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        from interp.io.errors import DamagedFileError

        raise DamagedFileError(f"{path} is not an llc.csv: column(s) {missing} are missing")
    df["warning"] = df["warning"].fillna("").astype(str)
    return df.sort_values("step").reset_index(drop=True)


def write_llc_csv(path: str | os.PathLike, df: pd.DataFrame) -> Path:
    """Write ``llc.csv`` atomically through the run-directory writer (sorted by step)."""
    from interp.io.checkpoints import write_text_atomic

    path = Path(path)
    if path.is_dir():
        path = path / LLC_CSV
    buf = io.StringIO()
    df.sort_values("step").to_csv(buf, index=False, float_format="%.9g")
    write_text_atomic(path, buf.getvalue())
    return path


def parse_steps(text: str | None, available: Sequence[int]) -> list[int]:
    """``"all"`` or ``"a,b,c"`` -> checkpoint steps, checked against the saved ones.

    Raises:
        ValueError: a step is not an integer or has no checkpoint (the message names ``--steps``).
    """
    if text is None or text.strip() == "all":
        return list(available)
    steps = []
    for part in text.split(","):
        part = part.strip()
        try:
            steps.append(int(part))
        except ValueError:
            raise ValueError(f"--steps={text!r} is invalid: {part!r} is not an integer") from None
    missing = [s for s in steps if s not in set(available)]
    if missing:
        raise ValueError(
            f"--steps={text!r} is invalid: no checkpoint at step(s) {missing}; saved: "
            f"{list(available)}"
        )
    return sorted(set(steps))


def _settings_row(cfg: LLCConfig) -> dict:
    return {name: getattr(cfg, name) for name in SETTINGS}


def _check_same_settings(existing: pd.DataFrame, cfg: LLCConfig, path: Path) -> None:
    if existing.empty:
        return
    want = _settings_row(cfg)
    last = existing.iloc[-1]
    for name, value in want.items():
        have = last[name]
        same = math.isclose(float(have), float(value), rel_tol=1e-9, abs_tol=0.0)
        if not same:
            raise ValueError(
                f"{name}={value!r} differs from {path}, which holds estimates with "
                f"{name}={have!r}: use the same settings to resume, or --overwrite"
            )


def llc_over_checkpoints(
    run_dir: str | os.PathLike,
    cfg: LLCConfig = LLCConfig(),  # noqa: B008 (frozen)
    steps: Sequence[int] | None = None,
    *,
    overwrite: bool = False,
    on_result: Callable[[int, LLCEstimate | None], None] | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """Estimate the LLC at checkpoints of a run and record them in ``RUN_DIR/llc.csv``.

    Resumable: steps already in ``llc.csv`` (with the same settings) are skipped; the file is
    rewritten atomically after every checkpoint. Every check (run directory, steps, settings
    against an existing ``llc.csv``, devinterp installed) happens before any sampling.

    Args:
        run_dir: a run directory (:func:`interp.train.training.load_run`).
        cfg: SGLD settings.
        steps: checkpoint steps (default: all saved ones).
        overwrite: discard an existing ``llc.csv`` (needed to change settings).
        on_result: called after each checkpoint with ``(step, estimate)``, ``None`` for a skipped
            one (the CLI prints progress and warnings from it).
        workers: checkpoints estimated at once, each in its own spawned process with one torch
            thread (``1``: in this process, with its threads). Each estimate depends only on its
            checkpoint and the settings (the batches and every chain are seeded), so the values
            are those of a one-thread run in this process; results are written as they come,
            ``llc.csv`` sorted by step.

    Returns:
        The whole ``llc.csv`` as a DataFrame.

    Raises:
        ValueError: a bad step, or settings that differ from those in ``llc.csv``.
        ImportError: devinterp is missing.
    """
    from interp.train.training import load_run

    run = load_run(run_dir)
    available = run.require_checkpoints()  # none: an error, llc.csv left as it was
    steps = list(available) if steps is None else list(steps)
    bad = [s for s in steps if s not in set(available)]
    if bad:
        raise ValueError(f"steps {bad} have no checkpoint in {run_dir}; saved: {available}")
    cfg = cfg.resolved(run.train_config.batch_size)
    version = _require_devinterp()
    from interp.io.outputs import writing

    # Under the run's lock from before llc.csv is read until its last rewrite: a second llc (or
    # any other writer of the run) is refused with the holder's pid, so no estimate is lost.
    with writing(run_dir):
        return _llc_locked(
            run, run_dir, cfg, steps, available, version, overwrite, on_result, workers
        )


def _llc_locked(run, run_dir, cfg, steps, available, version, overwrite, on_result, workers):
    path = Path(run_dir) / LLC_CSV
    existing = read_llc_csv(path) if path.exists() and not overwrite else pd.DataFrame()
    _check_same_settings(existing, cfg, path)
    chain_cols = [c for c in existing.columns if c.startswith("llc_chain_")]
    if chain_cols and len(chain_cols) != cfg.chains:
        raise ValueError(
            f"chains={cfg.chains} differs from {path}, which holds {len(chain_cols)} chains: use "
            "the same settings to resume, or --overwrite"
        )
    done = set(existing["step"].astype(int)) if not existing.empty else set()
    rows = existing.to_dict("records") if not existing.empty else []
    if isinstance(workers, bool) or not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is invalid: an integer >= 1")
    todo = []
    for step in steps:
        if step in done:
            if on_result is not None:
                on_result(step, None)
        elif step not in todo:
            todo.append(step)

    def record(step: int, est: LLCEstimate) -> None:
        if est.warning:
            logger.warning("LLC at step %d of %s: %s", step, run_dir, est.warning)
        rows.append(_llc_row(step, est, cfg, version))
        rows.sort(key=lambda r: int(r["step"]))
        write_llc_csv(path, pd.DataFrame(rows, columns=llc_columns(cfg.chains)))
        if on_result is not None:
            on_result(step, est)

    # Every checkpoint is read before any estimate: a damaged one fails now, with llc.csv as it was.
    models = {step: run.load_model(step) for step in todo}
    if workers > 1 and len(todo) > 1:
        _estimate_in_pool(run_dir, todo, cfg, min(workers, len(todo)), record)
    else:
        batches = run_batches(run, cfg.batch_size, cfg.n_batches, cfg.seed)
        for step in todo:
            record(step, estimate_llc(models.pop(step), batches, network_loss, cfg))
    return pd.DataFrame(rows, columns=llc_columns(cfg.chains)).sort_values("step")


def _llc_row(step: int, est: LLCEstimate, cfg: LLCConfig, version: str) -> dict:
    """One row of ``llc.csv``."""
    return {
        "step": int(step),
        "llc_mean": est.llc_mean,
        "llc_std": est.llc_std,
        **{f"llc_chain_{i}": v for i, v in enumerate(est.llc_chains)},
        "init_loss": est.init_loss,
        "mala_acceptance": est.mala_acceptance,
        "trace_drift": est.trace_drift,
        "failed_chains": est.failed_chains,
        "seconds": round(est.seconds, 3),
        **_settings_row(cfg),
        "devinterp_version": version,
        "warning": est.warning,
    }


def _init_llc_worker(plugins: tuple) -> None:
    import signal

    from interp.train.plugins import load_plugins

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool on Ctrl-C
    torch.set_num_threads(1)
    load_plugins(plugins)  # the parent's --plugin modules, for runs that use their encodings


@functools.lru_cache(maxsize=1)
def _worker_run_and_batches(run_dir: str, batch_size: int, n_batches: int, seed: int):
    """A pool worker's run and LLC batches, made once per worker process (the parent's batches)."""
    from interp.train.training import load_run

    run = load_run(run_dir)
    return run, run_batches(run, batch_size, n_batches, seed)


def _estimate_at(run_dir: str, step: int, cfg: LLCConfig) -> LLCEstimate:
    """The LLC at one checkpoint, in a pool worker."""
    run, batches = _worker_run_and_batches(run_dir, cfg.batch_size, cfg.n_batches, cfg.seed)
    return estimate_llc(run.load_model(step), batches, network_loss, cfg)


def _estimate_in_pool(run_dir, steps: list[int], cfg: LLCConfig, workers: int, record) -> None:
    """Estimate ``steps`` in ``workers`` spawned one-thread processes; ``record`` each result in
    this process as it arrives. On Ctrl-C, checkpoints not started are cancelled and running ones
    dropped (the finished ones are already in ``llc.csv``: run the command again to resume)."""
    from interp.train.plugins import loaded_plugins
    from interp.train.sweep_backends import sigterm_as_ctrl_c

    with sigterm_as_ctrl_c():  # a SIGTERM stops the workers too, as Ctrl-C does
        _run_llc_pool(run_dir, steps, cfg, workers, record, tuple(loaded_plugins()))


def _run_llc_pool(run_dir, steps, cfg, workers, record, plugins) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_llc_worker,
        initargs=(plugins,),
    )
    try:
        futures = {pool.submit(_estimate_at, str(run_dir), step, cfg): step for step in steps}
        for future in as_completed(futures):
            record(futures[future], future.result())
    except BaseException:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()  # an interrupted estimate is worth nothing: do not wait for it
        pool.shutdown(wait=True, cancel_futures=True)  # reaps them and closes the queues
        raise
    pool.shutdown(wait=True)


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
) -> dict:
    """Sweep SGLD step size and inverse temperature on one checkpoint (devinterp's
    ``EpsilonBetaAnalyzer``) and write the result beside the run's ``llc.csv``.

    Writes ``llc_calibration.csv`` (one row per pair: LLC, spread, MALA acceptance, drift,
    warning), ``llc_calibration_traces.html`` (the LLC trace of every chain, one panel per pair)
    and ``llc_calibration.json`` (the settings, the table, ``chosen`` and ``reason``: see
    :func:`_pick`; ``chosen`` is ``null`` when no step size gave a settled estimate).

    Args:
        run_dir: a run directory.
        step: checkpoint to calibrate on (default: the last one).
        epsilons: step sizes to try.
        nbetas: inverse temperatures to try (default: devinterp's default and x0.3, x3 of it).
        cfg: the other settings (chains, draws, burnin, localization, batches).

    Returns:
        The JSON written, as a dict.
    """
    from interp.train.training import load_run

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


def _calibrate_locked(run, run_dir, step, epsilons, nbetas, base, default_nb, version) -> dict:
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
    from interp.viz.llc_plots import plot_calibration_traces

    fig = plot_calibration_traces(sweep, step=step, chosen=chosen)
    out = Path(run_dir)
    buf = io.StringIO()
    table.to_csv(buf, index=False, float_format="%.9g")
    write_text_atomic(out / CALIBRATION_CSV, buf.getvalue())
    write_text_atomic(
        out / CALIBRATION_HTML,
        fig.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True),
    )
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
    return record


def chosen_from_calibration(run_dir: str | os.PathLike) -> dict:
    """``{"epsilon", "nbeta"}`` chosen by the run's last calibration.

    Raises:
        ValueError: no ``llc_calibration.json``, or it chose nothing (the message names the file).
    """
    path = Path(run_dir) / CALIBRATION_JSON
    if not path.exists():
        raise ValueError(f"--from-calibration: {path} does not exist; run llc --calibrate first")
    chosen = json.loads(path.read_text()).get("chosen")
    if not chosen:
        raise ValueError(
            f"--from-calibration: {path} chose no setting: "
            f"{json.loads(path.read_text()).get('reason', 'see llc_calibration.csv')}"
        )
    return {"epsilon": float(chosen["epsilon"]), "nbeta": float(chosen["nbeta"])}
