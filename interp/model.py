"""The paper's network as a TransformerLens ``HookedRootModule`` (docs/science.md section 2).

Two causal attention-only layers (one head each, residual, no LayerNorm, no MLP between them, no
``1/sqrt(d)`` scale), then a classifier on the final (query) token: three ReLU layers of width 128
and a linear readout to L logits.

Deviation from the original code, on purpose: each hidden layer of the classifier has per-unit
biases (the original uses one scalar bias per layer). Harmless for the phenomenon.

Hook names follow TransformerLens, so ``run_with_cache``, ``run_with_hooks`` and ``ActivationCache``
indexing work as usual::

    logits, cache = model.run_with_cache(batch.tokens, batch.positions)
    cache["blocks.0.attn.hook_pattern"]   # [batch, head_index, query_pos, key_pos]
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp.attention import ATTN_SCALES, Attention
from interp.positional import POSITIONAL_ENCODINGS, ROPE_SCALINGS, make_positional
from interp.task import TaskConfig

__all__ = [
    "ModelConfig",
    "InductionNet",
    "Classifier",
    "TransformerBlock",
    "positional_from_config",
]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape and parts of the network.

    Attributes:
        D: content dimensions of the task's items and labels (``TaskConfig.D``).
        L: number of labels, the width of the readout (``TaskConfig.L``).
        n_positions: size of the positional table (``TaskConfig.P = 2 N_max + 1``).
        n_ctx_train: training sequence length ``2N + 1``; the ``log_n`` attention scale is
            normalised to it.
        n_layers: attention layers (the paper: 2).
        n_heads: heads per layer (the paper: 1).
        d_head: head width; ``None`` means ``d_model`` (the paper: ``W_Q`` is ``d_model x d_model``).
        d_mlp: width of the classifier's hidden layers (the paper: 128).
        n_mlp_layers: hidden ReLU layers of the classifier (the paper: 3).
        positional: positional encoding, one of ``onehot`` (the paper: concatenated one-hot),
            ``learned`` (learned absolute, added), ``none``, ``rope`` (rotary q/k; needs an even
            ``d_head``, e.g. 64, since ``d_model = D = 63`` then), ``cope`` (contextual positions,
            Golovneva et al. 2024). See :mod:`interp.positional`.
        attn_scale: attention score scale, one of ``none`` (the paper), ``sqrt`` (``1/sqrt(d_head)``),
            ``log_n`` (entropy-invariant ``log_{n_train}(n_i)/sqrt(d_head)``).
        attn_init_std: std of attention weight entries; ``None`` means ``1/sqrt(D)`` (the paper).
        rope_base: RoPE base (``theta_i = base^(-2i/d_head)``); used by ``rope`` only.
        rope_scaling: RoPE length rescaling, one of ``none``, ``pi`` (interpolation), ``ntk``
            (NTK-aware), ``mixed`` (Su's mixed base); usually changed at evaluation time only
            (:meth:`interp.positional.Rotary.set_scaling`).
        rope_scale: the rescaling's length ratio ``s``.
        rope_mix_b: exponent ``b`` of the ``mixed`` rescaling (1: NTK-aware, 0: interpolation).
        cope_p_max: largest contextual position of ``cope`` (positions clip there).
    """

    D: int = 63
    L: int = 32
    n_positions: int = 65
    n_ctx_train: int = 17
    n_layers: int = 2
    n_heads: int = 1
    d_head: int | None = None
    d_mlp: int = 128
    n_mlp_layers: int = 3
    positional: str = "onehot"
    attn_scale: str = "none"
    attn_init_std: float | None = None
    rope_base: float = 10000.0
    rope_scaling: str = "none"
    rope_scale: float = 1.0
    rope_mix_b: float = 0.5
    cope_p_max: int = 64

    def __post_init__(self) -> None:
        for name in (
            "D",
            "L",
            "n_positions",
            "n_ctx_train",
            "n_layers",
            "n_heads",
            "d_mlp",
            "n_mlp_layers",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(
                    f"ModelConfig.{name}={value!r} is invalid: must be a positive integer"
                )
        if self.d_head is not None and not (isinstance(self.d_head, int) and self.d_head > 0):
            raise ValueError(
                f"ModelConfig.d_head={self.d_head!r} is invalid: a positive integer or None"
            )
        if self.positional not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"ModelConfig.positional={self.positional!r} is invalid: allowed values are "
                f"{POSITIONAL_ENCODINGS}"
            )
        if self.attn_scale not in ATTN_SCALES:
            raise ValueError(
                f"ModelConfig.attn_scale={self.attn_scale!r} is invalid: allowed values are {ATTN_SCALES}"
            )
        if self.attn_scale == "log_n" and self.n_ctx_train < 2:
            raise ValueError("ModelConfig.n_ctx_train must be >= 2 for attn_scale='log_n'")
        if self.attn_init_std is not None and not self.attn_init_std > 0:
            raise ValueError(
                f"ModelConfig.attn_init_std={self.attn_init_std!r} is invalid: must be > 0"
            )
        if self.rope_scaling not in ROPE_SCALINGS:
            raise ValueError(
                f"ModelConfig.rope_scaling={self.rope_scaling!r} is invalid: allowed values are "
                f"{ROPE_SCALINGS}"
            )
        if not (self.rope_base > 1 and self.rope_scale > 0 and self.rope_mix_b >= 0):
            raise ValueError(
                "ModelConfig.rope_base must be > 1, rope_scale > 0 and rope_mix_b >= 0; got "
                f"{self.rope_base!r}, {self.rope_scale!r}, {self.rope_mix_b!r}"
            )
        if not (isinstance(self.cope_p_max, int) and self.cope_p_max >= 1):
            raise ValueError(
                f"ModelConfig.cope_p_max={self.cope_p_max!r} is invalid: an integer >= 1"
            )
        if self.positional == "rope" and self.d_head_effective % 2:
            raise ValueError(
                f"ModelConfig.d_head={self.d_head!r} is invalid for positional='rope': the head "
                f"width ({self.d_head_effective}) must be even; set d_head (e.g. d_head=64)"
            )

    @classmethod
    def from_task(cls, task: TaskConfig, **overrides) -> ModelConfig:
        """The paper's network for ``task``, with any field overridden."""
        base = dict(D=task.D, L=task.L, n_positions=task.P, n_ctx_train=task.seq_len)
        base.update(overrides)
        return cls(**base)

    @property
    def d_model(self) -> int:
        """Residual width (``D + P`` for the one-hot concatenation, ``D`` otherwise)."""
        # Only the one-hot concatenation widens the residual; learned positions are added, and
        # rope/cope/none act inside attention or not at all. (No encoding is built here: building
        # a learned table would draw from torch's global RNG.)
        return self.D + self.n_positions if self.positional == "onehot" else self.D

    @property
    def d_head_effective(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def positional_from_config(cfg: ModelConfig):
    """The positional encoding ``cfg`` asks for, with its own parameters."""
    return make_positional(
        cfg.positional,
        cfg.n_positions,
        cfg.D,
        d_head=cfg.d_head_effective if cfg.positional == "rope" else None,  # RoPE only
        rope_base=cfg.rope_base,
        rope_scaling=cfg.rope_scaling,
        rope_scale=cfg.rope_scale,
        rope_mix_b=cfg.rope_mix_b,
        cope_p_max=cfg.cope_p_max,
    )


class TransformerBlock(nn.Module):
    """Residual attention block: ``resid_post = resid_pre + attn(resid_pre)``. No LayerNorm, no MLP."""

    def __init__(self, cfg: ModelConfig, positional) -> None:
        super().__init__()
        self.attn = Attention(
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            d_head=cfg.d_head_effective,
            attn_scale=cfg.attn_scale,
            n_train=cfg.n_ctx_train,
            positional=positional,
            init_std=cfg.attn_init_std or 1.0 / math.sqrt(cfg.D),
        )
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, resid: Tensor, positions: Tensor) -> Tensor:
        resid = self.hook_resid_pre(resid)
        attn_out = self.hook_attn_out(self.attn(resid, positions))
        return self.hook_resid_post(resid + attn_out)


class Classifier(nn.Module):
    """ReLU MLP on the query token's residual, then a linear readout to L logits (He init)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        widths = [cfg.d_model] + [cfg.d_mlp] * cfg.n_mlp_layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.readout = nn.Linear(widths[-1], cfg.L)
        for i in range(cfg.n_mlp_layers):
            # Named hook_hidden_{i}, post-ReLU activations [batch, d_mlp].
            setattr(self, f"hook_hidden_{i}", HookPoint())
        for layer in [*self.hidden, self.readout]:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)

    def forward(self, x: Float[Tensor, "batch d_model"]) -> Float[Tensor, "batch d_mlp"]:
        for i, layer in enumerate(self.hidden):
            x = getattr(self, f"hook_hidden_{i}")(torch.relu(layer(x)))
        return self.readout(x)


class InductionNet(HookedRootModule):
    """The 2-layer attention-only network with an MLP classifier on the query token.

    Args:
        cfg: the network's shape and parts.
        seed: seed of the weight initialisation (no global RNG is touched).

    Example::

        task = TaskConfig(K=256, B=1)
        model = InductionNet(ModelConfig.from_task(task), seed=0)
        logits = model(batch.tokens, batch.positions)          # [batch, L]
    """

    def __init__(self, cfg: ModelConfig, seed: int | None = 0) -> None:
        super().__init__()
        self.cfg = cfg
        fork_devices: list = []
        with torch.random.fork_rng(devices=fork_devices):
            if seed is not None:
                torch.manual_seed(seed)
            self.positional = positional_from_config(cfg)
            self.blocks = nn.ModuleList(
                TransformerBlock(cfg, self.positional) for _ in range(cfg.n_layers)
            )
            self.classifier = Classifier(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, D]: the content vectors
        self.hook_pos_embed = HookPoint()  # [batch, pos, P] one-hot, or [batch, pos, d_model]
        self.hook_logits = HookPoint()  # [batch, L]
        self.setup()

    def forward(
        self,
        tokens: Float[Tensor, "batch pos d_content"],
        positions: Int[Tensor, "batch pos"] | None = None,
    ) -> Float[Tensor, "batch L"]:
        """Logits of the query token.

        Args:
            tokens: content vectors, as in :class:`interp.task.Batch`.
            positions: absolute positions; ``None`` means ``0..pos-1`` for every sequence.
        """
        if tokens.ndim != 3 or tokens.shape[-1] != self.cfg.D:
            raise ValueError(
                f"tokens must have shape [batch, pos, D={self.cfg.D}], got {tuple(tokens.shape)}"
            )
        if positions is None:
            positions = torch.arange(tokens.shape[1], device=tokens.device).expand(tokens.shape[:2])
        embed = self.hook_embed(tokens)
        pos_embed = self.hook_pos_embed(self.positional(positions))
        resid = self.positional.combine(embed, pos_embed)
        for block in self.blocks:
            resid = block(resid, positions)
        return self.hook_logits(self.classifier(resid[:, -1]))

    @property
    def attention_parameters(self) -> list[nn.Parameter]:
        return [p for b in self.blocks for p in (b.attn.W_Q, b.attn.W_K, b.attn.W_V)]
