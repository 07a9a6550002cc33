"""The paper's network as a TransformerLens ``HookedRootModule`` (docs/science.md section 2).

Two causal attention-only layers (one head each, residual, no LayerNorm, no MLP between them, no
``1/sqrt(d)`` scale), then a classifier on the final (query) token: three ReLU layers of width 128
and a linear readout to L logits.

The classifier is the author's (``readout_init="author"``, ``hidden_bias="scalar"``): hidden
layers He-normal ``N(0, 2/d_in)``, each with one trainable scalar bias drawn from ``N(0, 1/d_in)``
and broadcast over its units, the readout ``N(0, 1/d_in)`` with no bias. ``hidden_bias="per_unit"``
gives every unit its own trainable bias, each starting at that layer's scalar (the same initial
network; training then moves the units apart, and the common mode moves ``d_mlp`` times more
slowly than the author's scalar, which receives the sum of the units' gradients): the form of runs
written before format version 4. ``readout_init="he"`` is the form of runs written before format
version 3 (He-normal readout with a zero-initialised bias, zero hidden biases).

Hook names follow TransformerLens, so ``run_with_cache``, ``run_with_hooks`` and ``ActivationCache``
indexing work as usual::

    logits, cache = model.run_with_cache(batch.tokens, batch.positions)
    cache["blocks.0.attn.hook_pattern"]   # [batch, head_index, query_pos, key_pos]
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Real
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

# The config lives in a module without torch (commands that only build configs never load it);
# importing it from here is the old path, kept.
from interp.config.model_config import (
    HIDDEN_BIASES,
    MAX_LAYERS,
    READOUT_INITS,
    ModelConfig,
    canonical_model_dict,
)
from interp.model.attention import Attention
from interp.model.positional import get_positional

__all__ = [
    "MAX_LAYERS",
    "READOUT_INITS",
    "HIDDEN_BIASES",
    "ModelConfig",
    "InductionNet",
    "Classifier",
    "TransformerBlock",
    "positional_from_config",
    "canonical_model_dict",
]


def positional_from_config(cfg: ModelConfig):
    """The positional encoding ``cfg`` asks for, with its own parameters."""
    return get_positional(cfg.positional).build(
        cfg.positional_config,
        n_positions=cfg.n_positions,
        d_content=cfg.D,
        d_head=cfg.d_head_effective,
    )


class TransformerBlock(nn.Module):
    """Residual attention block: ``resid_post = resid_pre + attn(resid_pre)``. No LayerNorm, no
    MLP."""

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
            qk_bias=cfg.qk_bias,
        )
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, resid: Tensor, positions: Tensor) -> Tensor:
        resid = self.hook_resid_pre(resid)
        attn_out = self.hook_attn_out(self.attn(resid, positions))
        return self.hook_resid_post(resid + attn_out)


class Classifier(nn.Module):
    """ReLU MLP on the query token's residual, then a linear readout to L logits.

    Initialisation (``cfg.readout_init``, see the module docstring): ``author`` draws hidden
    weights ``N(0, 2/d_in)``, each hidden layer's bias as one scalar ``N(0, 1/d_in)``, and the
    readout ``N(0, 1/d_in)`` without bias; ``he`` draws every weight ``N(0, 2/d_in)`` with zero
    biases, the readout's included. With ``cfg.hidden_bias="scalar"`` a hidden layer's bias is a
    ``[1]`` parameter broadcast over the units; with ``per_unit`` it is ``[d_mlp]``, every entry
    starting at the layer's scalar. Both forms draw the same numbers: a seed gives the same initial
    network in either.

    ``tied`` is the scalar form with one change at initialisation, after the same draws: the last
    hidden layer's bias is set to the one before it. The author's JAX code splits its key into
    ``n_mlp_layers + 1`` keys and reads layer ``k``'s weight and bias keys at indices ``2k`` and
    ``2k + 1``; JAX clamps the out-of-range indices, so with three hidden layers the second
    layer's bias and the third layer's weight and bias share one key, and the two biases (same
    shape, same ``1/sqrt(d_in)`` scale) start equal. Only that equality is reproduced: the third
    layer's weight is an independent draw here (JAX's draws of different shapes from one key have
    no counterpart in torch's generator). The biases are trained separately afterwards.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        widths = [cfg.d_model] + [cfg.d_mlp] * cfg.n_mlp_layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        if cfg.hidden_bias in ("scalar", "tied"):
            for layer in self.hidden:  # nn.Linear adds a [1] bias to every unit (broadcast)
                layer.bias = nn.Parameter(torch.zeros(1))
        author = cfg.readout_init == "author"
        self.readout = nn.Linear(widths[-1], cfg.L, bias=not author)
        for i in range(cfg.n_mlp_layers):
            # Named hook_hidden_{i}, post-ReLU activations [batch, d_mlp].
            setattr(self, f"hook_hidden_{i}", HookPoint())
        with torch.no_grad():
            for layer in self.hidden:
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                if author:
                    layer.bias.fill_(torch.randn(()).item() / math.sqrt(layer.in_features))
                else:
                    layer.bias.zero_()
            if cfg.hidden_bias == "tied" and len(self.hidden) >= 2:
                self.hidden[-1].bias.copy_(self.hidden[-2].bias)
            if author:
                nn.init.normal_(self.readout.weight, std=1.0 / math.sqrt(widths[-1]))
            else:
                nn.init.kaiming_normal_(self.readout.weight, nonlinearity="relu")
                self.readout.bias.zero_()

    def forward(self, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch L"]:
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
        positions: Real[Tensor, "batch pos"] | None = None,
    ) -> Float[Tensor, "batch L"]:
        """Logits of the query token.

        Args:
            tokens: content vectors, as in :class:`interp.data.task.Batch`.
            positions: absolute positions; ``None`` means ``0..pos-1`` for every sequence.
                Integer for the tabled encodings; RoPE also takes fractional ones (scaled
                positions, :func:`interp.analysis.length.rescale_rope`).
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

    def run_with_cache(self, *model_args, return_cache_object: bool = True, **kwargs):
        """TransformerLens's ``run_with_cache``: ``(logits, cache)`` with the cache a
        ``transformer_lens.ActivationCache`` (dict-compatible: ``cache[name]``, ``keys()``,
        ``items()``, ``in``; ``return_cache_object=False`` gives the plain dict)."""
        out, cache = super().run_with_cache(*model_args, **kwargs)
        if not return_cache_object:
            return out, cache
        has_batch_dim = not kwargs.get("remove_batch_dim", False)
        return out, ActivationCache(cache, self, has_batch_dim=has_batch_dim)
