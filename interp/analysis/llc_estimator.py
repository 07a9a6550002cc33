"""One LLC estimate of one checkpoint with devinterp's SGLD sampler, one devinterp call per chain,
with its diagnostics (MALA acceptance, drift of the trace, failed chains) and a warning when the
hyperparameters look wrong; the batches it samples on and the network's loss
(:mod:`interp.analysis.llc` describes the method)."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

logger = logging.getLogger("interp.analysis.llc")  # one logger for the LLC modules


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
        from interp.io.budget import check_count

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


def _sample_chain(model, loader, evaluate, cfg: LLCConfig, chain: int, init_loss, device, mala):
    """One SGLD chain through devinterp (its summary dict); raises devinterp's RuntimeError on a
    NaN loss."""
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary

    return estimate_learning_coeff_with_summary(
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
    from devinterp.slt.mala import MalaAcceptanceRate
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
                result = _sample_chain(model, loader, evaluate, cfg, chain, init_loss, device, mala)
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
    problems += _problems(cfg, failed, len(good), mean, acceptance, drift, drifting)
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


def _problems(
    cfg, failed: int, n_good: int, mean: float, acceptance: float, drift: float, drifting: bool
) -> list[str]:
    """The plain-language warnings of one estimate (empty: its diagnostics look right)."""
    problems: list[str] = []
    if failed:
        problems.append(
            f"{failed} of {cfg.chains} chains diverged (NaN/inf loss): epsilon={cfg.epsilon:g} "
            "is too large"
        )
    if n_good and mean < 0:
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
    return problems


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
        run: a :class:`interp.io.rundir.Run`.
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
