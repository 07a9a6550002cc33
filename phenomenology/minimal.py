"""The minimal induction head [docs/science.md section 4, reconstruction], trained on the task.

The roles of the tokens are known by construction, so the circuit shrinks to three scalars and a
linear readout:

- layer 1: each label token mixes in its own item, ``h(l_i) = l_i + sigma(beta1) x_i`` (a
  previous-token head of strength ``s1 = sigma(beta1)``, the model's ILA1);
- layer 2: the query attends over the ``2N`` context tokens, with logits
  ``alpha (x_q . h(l_j)) + beta2`` on label tokens and ``alpha (x_q . x_j)`` on item tokens; the
  output is the attended label content ``o = sum_j a(l_j) l_j``;
- classifier: ``logits = W o`` with ``W in R^{L x D}``; cross-entropy.

``variant="two"`` fixes ``beta2 = 0`` (two attention parameters plus ``W``).

The model is a TransformerLens ``HookedRootModule`` whose attention patterns are explicit
``[batch, head_index=1, query_pos, key_pos]`` tensors at the network's hook names
(``blocks.0.attn.hook_pattern``, ``blocks.1.attn.hook_pattern``) and whose computation reads them
back, so the network's probes (:func:`interp.analysis.measures.progress_measures`) and evaluation
(:func:`interp.analysis.evaluation.evaluate`) apply unchanged and hook interventions act on the
circuit. Rows of tokens outside the circuit attend to themselves.

:func:`train_minimal` trains it with SGD on the same generator, seeds, evaluation sets and run
directory format as :func:`interp.train.training.train`, so that curves can be compared one by one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import no_type_check

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp.analysis.evaluation import EvaluateSets
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.io.rundir import register_run_kind
from interp.train.training import train
from phenomenology.live import LiveForecast

__all__ = ["MinimalConfig", "MinimalInductionHead", "train_minimal", "VARIANTS"]

VARIANTS = ("three", "two")


# Self-validating: __post_init__ gives the one-line error that names the field; the test run's
# runtime type checker (jaxtyping's hook) would pre-empt it with a traceback, so it skips this
# class.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class MinimalConfig:
    """Shape and initial values of the minimal induction head.

    Attributes:
        D: content dimensions (``TaskConfig.D``).
        L: number of labels (``TaskConfig.L``).
        variant: ``"three"`` (beta1, alpha, beta2 trained) or ``"two"`` (beta2 fixed at 0).
        beta1_init: initial ``beta1``; negative means a weak previous-token head at the start,
            like the network's (whose label rows spread attention over several keys). ``-4``
            gives ``s1 = 0.018``.
        alpha_init: initial layer-2 match strength (0: the query does not yet look for its class).
        beta2_init: initial bias of the query towards label tokens.
        W_init_std: std of the entries of ``W`` at the start (0: the classifier knows nothing).
    """

    D: int = 63
    L: int = 32
    variant: str = "three"
    beta1_init: float = -4.0
    alpha_init: float = 0.0
    beta2_init: float = 0.0
    W_init_std: float = 0.0

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"MinimalConfig.variant={self.variant!r} must be one of {VARIANTS}")
        for name in ("D", "L"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MinimalConfig.{name}={value!r} must be a positive integer")
        if self.W_init_std < 0:
            raise ValueError(f"MinimalConfig.W_init_std={self.W_init_std!r} must be >= 0")
        if self.variant == "two" and self.beta2_init != 0.0:
            raise ValueError("MinimalConfig.beta2_init must be 0 for variant='two'")

    @property
    def n_layers(self) -> int:
        """Attention layers, 2 (so the network's probes find both patterns)."""
        return 2

    @classmethod
    def from_task(cls, task: TaskConfig, **kwargs) -> MinimalConfig:
        """The minimal model for ``task`` (``D`` and ``L`` from the task)."""
        return cls(D=task.D, L=task.L, **kwargs)

    def to_dict(self) -> dict:
        """A JSON-serialisable dict of the fields (and the model kind)."""
        return {"kind": "minimal_induction_head"} | dataclasses.asdict(self)


class _Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hook_pattern = HookPoint()  # [batch, head_index, query_pos, key_pos]


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = _Attn()


class MinimalInductionHead(HookedRootModule):
    """The minimal induction head (see the module docstring).

    Args:
        cfg: the model's configuration.
        seed: seed for ``W``'s initial entries (only used when ``cfg.W_init_std > 0``); None
            for a model whose weights are loaded next (a checkpoint), which draws nothing.
    """

    def __init__(self, cfg: MinimalConfig, seed: int | None = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.beta1 = nn.Parameter(torch.tensor(float(cfg.beta1_init)))
        self.alpha = nn.Parameter(torch.tensor(float(cfg.alpha_init)))
        if cfg.variant == "three":
            self.beta2 = nn.Parameter(torch.tensor(float(cfg.beta2_init)))
        else:
            self.register_buffer("beta2", torch.tensor(0.0))
        if seed is None:
            self.W = nn.Parameter(torch.zeros(cfg.L, cfg.D))
        else:
            g = torch.Generator().manual_seed(int(seed))
            self.W = nn.Parameter(torch.randn(cfg.L, cfg.D, generator=g) * cfg.W_init_std)
        self.blocks = nn.ModuleList([_Block(), _Block()])
        self.hook_logits = HookPoint()  # [batch, L]
        self.setup()

    def forward(
        self,
        tokens: Float[Tensor, "batch pos D"],
        positions: Int[Tensor, "batch pos"] | None = None,
    ) -> Float[Tensor, "batch L"]:
        """Logits for the query of each sequence; ``positions`` are accepted and not used (token
        roles are known by construction)."""
        b, n_pos, _ = tokens.shape
        n = (n_pos - 1) // 2
        items, labels, query = tokens[:, 0:-1:2], tokens[:, 1:-1:2], tokens[:, -1]
        eye = torch.eye(n_pos, dtype=tokens.dtype, device=tokens.device).expand(b, 1, n_pos, n_pos)
        item_pos = torch.arange(n, device=tokens.device) * 2

        # Layer 1: label row 2i+1 puts s1 on its item 2i and the rest on itself.
        s1 = torch.sigmoid(self.beta1)
        p1 = eye.clone()
        p1[:, 0, item_pos + 1, item_pos] = s1
        p1[:, 0, item_pos + 1, item_pos + 1] = 1.0 - s1
        p1 = self.blocks[0].attn.hook_pattern(p1)
        h = labels + p1[:, 0, item_pos + 1, item_pos, None] * items  # [batch, n, D]

        # Layer 2: the query attends over items (even keys) and label tokens (odd keys).
        s_items = self.alpha * torch.einsum("bd,bnd->bn", query, items)
        s_labels = self.alpha * torch.einsum("bd,bnd->bn", query, h) + self.beta2
        a = torch.softmax(torch.stack([s_items, s_labels], dim=-1).reshape(b, 2 * n), dim=-1)
        p2 = eye.clone()
        p2[:, 0, -1, :] = F.pad(a, (0, 1))
        p2 = self.blocks[1].attn.hook_pattern(p2)
        o = torch.einsum("bn,bnd->bd", p2[:, 0, -1, 1:-1:2], labels)  # attended label content
        return self.hook_logits(o @ self.W.T)


# Runs of this model reopen with interp.io.rundir.load_run once this module is imported.
register_run_kind("minimal_induction_head", MinimalConfig, MinimalInductionHead)


def _readout_gain(model: MinimalInductionHead, label_vectors: Tensor) -> float:
    """The classifier's gain on label content, the analogue of the nested-logit ``xi``:
    mean ``W_m . v_m`` minus mean ``W_m . v_m'`` over ``m != m'``."""
    G = model.W.detach() @ label_vectors.T  # [L, L]
    L = G.shape[0]
    diag = G.diagonal().mean()
    off = (G.sum() - G.diagonal().sum()) / (L * (L - 1))
    return float(diag - off)


def train_minimal(
    task_config: TaskConfig,
    *,
    steps: int = 3000,
    lr: float = 0.5,
    batch_size: int = 128,
    seed: int = 0,
    out_dir: str | Path | None = None,
    eval_every: int = 50,
    variant: str = "three",
    model_config: MinimalConfig | None = None,
    weight_decay: float = 0.0,
    n_eval: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = False,
) -> pd.DataFrame:
    """Trains the minimal induction head with SGD on fresh batches of the task.

    Seeds are derived as in :func:`interp.train.training.train`
    (``derive_seed(seed, "task" | "eval" | "stream" | "init")``), so a minimal run and a network run
    with the same seed see the same classes, label vectors and evaluation sets.

    Args:
        task_config: the task.
        steps: SGD steps.
        lr: learning rate.
        batch_size: fresh sequences per step.
        seed: run seed.
        out_dir: run directory (the network's format, ``kind`` ``minimal_induction_head``;
            reopened by :func:`interp.io.rundir.load_run`); None writes nothing.
        eval_every: steps between evaluations (and at the last step).
        variant: ``"three"`` or ``"two"``; ignored when ``model_config`` is given.
        model_config: full model configuration (initial values); default
            ``MinimalConfig.from_task(task_config, variant=variant)``.
        weight_decay: SGD weight decay.
        n_eval: sequences per evaluation set (default ``task_config.n_eval``; recorded as the
            task's ``n_eval``).
        resume, overwrite, progress: as in :func:`interp.train.training.train`.

    Returns:
        metrics, one row per evaluation: ``step, train_loss``, ``{ic,ic2,iw}_{acc,loss}``, the
        progress measures of :func:`interp.analysis.measures.progress_measures` (``ila1`` equals
        ``sigmoid(beta1)``) and the parameters ``beta1, alpha, beta2, xi`` (``xi``: the
        readout's gain on label content).
    """
    for name, value, low in (("steps", steps, 1), ("batch_size", batch_size, 1)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r} must be an integer >= {low}")
    if not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"eval_every={eval_every!r} must be an integer >= 1")
    if not lr > 0:
        raise ValueError(f"lr={lr!r} must be > 0")
    cfg = model_config or MinimalConfig.from_task(task_config, variant=variant)
    if (cfg.D, cfg.L) != (task_config.D, task_config.L):
        raise ValueError("model_config D, L must match task_config (use MinimalConfig.from_task)")
    task = dataclasses.replace(task_config, n_eval=n_eval) if n_eval else task_config
    train_cfg = TrainConfig(
        optimizer="sgd",
        lr=lr,
        weight_decay=weight_decay,
        batch_size=batch_size,
        steps=steps,
        eval_every=eval_every,
        seed=seed,
        # A handful of scalars and W: weights at the start, the end and every evaluation's
        # jump cost nothing and let the figures show the circuit at any stage.
        checkpoint_every=steps,
        n_log_checkpoints=10,
        checkpoint_on_jump=0.02,
        backend="hooked",
    )

    def parameters(run, row) -> dict:
        model = run.model
        return {
            "beta1": float(model.beta1.detach()),
            "alpha": float(model.alpha.detach()),
            "beta2": float(model.beta2.detach()),
            "xi": _readout_gain(model, run.generator.label_vectors),
        }

    callbacks = [EvaluateSets(), parameters] + ([LiveForecast()] if train_cfg.live_forecast else [])

    # The one training loop (interp.train.training.train): same seeds, data stream and evaluation
    # sets as a network run, and the same run directory, resume and signal handling.
    return train(
        task,
        cfg,
        train_cfg,
        out_dir,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        kind="minimal_induction_head",
        callbacks=callbacks,
    )
