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

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, no_type_check

import torch
from jaxtyping import Float, Real
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp.data.task import TaskConfig
from interp.model.attention import ATTN_SCALES, Attention
from interp.model.positional import (
    get_positional,
    positional_config,
    positional_parameters,
)

__all__ = [
    "READOUT_INITS",
    "HIDDEN_BIASES",
    "ModelConfig",
    "InductionNet",
    "Classifier",
    "TransformerBlock",
    "positional_from_config",
    "canonical_model_dict",
]


READOUT_INITS = ("author", "he")
# "scalar": one bias per hidden layer, broadcast over its units (the author's code);
# "per_unit": one bias per unit (runs before format version 4);
# "tied": the scalar form with the last two hidden layers' biases equal at initialisation, as the
# author's code's key indexing gives them (see Classifier).
HIDDEN_BIASES = ("scalar", "per_unit", "tied")


# The most attention layers a network may have (the paper's has 2).
MAX_LAYERS = 1024


# Self-validating: __post_init__ gives the one-line error that names the field; the test run's
# runtime type checker (jaxtyping's hook) would pre-empt it with a traceback, so it skips this
# class.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape and parts of the network.

    Attributes:
        D: content dimensions of the task's items and labels (``TaskConfig.D``).
        L: number of labels, the width of the readout (``TaskConfig.L``).
        n_positions: size of the positional table (``TaskConfig.P = 2 N_max + 1``).
        n_ctx_train: training sequence length ``2N + 1``; the ``log_n`` attention scale is
            normalised to it.
        n_layers: attention layers. Source: paper.
        n_heads: heads per layer. Source: paper.
        d_head: head width; ``None`` means ``d_model`` (``W_Q`` is ``d_model x d_model``).
            Source: author's code (the paper does not state it).
        d_mlp: width of the classifier's hidden layers. Source: author's code (the paper does not
            state it).
        n_mlp_layers: hidden ReLU layers of the classifier. Source: paper.
        positional: positional encoding, a name registered in
            :data:`interp.model.positional.POSITIONAL_ENCODINGS`: ``onehot`` (concatenated
            one-hot), ``learned`` (learned absolute, added), ``none``, ``rope`` (rotary q/k; needs
            an even ``d_head``, e.g. 64, since ``d_model = D = 63`` then), ``cope`` (contextual
            position encoding, Golovneva et al. 2024, arXiv 2405.18719; a different 2026 method
            also called CoPE, clipped RoPE, is not this one), or one added with
            :func:`interp.model.positional.register_positional`. Source: paper (``onehot``).
        positional_config: the encoding's own parameters, an instance of its config class
            (:class:`~interp.model.positional.RopeConfig`,
            :class:`~interp.model.positional.CopeConfig`; a mapping of its fields is converted);
            ``None`` means its defaults (and stays ``None`` for encodings without parameters). The
            old flat names (``rope_base``, ``cope_p_max``, in general ``{encoding}_{field}``) are
            accepted by :meth:`from_dict` and :meth:`from_task` and can still be read as attributes
            (``cfg.rope_base``; ``None`` when another encoding is in use).
        attn_scale: attention score scale, one of ``none`` (unscaled), ``sqrt``
            (``1/sqrt(d_head)``), ``log_n`` (entropy-invariant ``log_{n_train}(n_i)/sqrt(d_head)``).
            Source: author's code (the paper does not state it).
        attn_init_std: std of attention weight entries; ``None`` means ``1/sqrt(D)``. Source:
            author's code (the paper does not state it).
        qk_bias: trainable biases ``b_Q``, ``b_K`` (``[n_heads, d_head]``, zero-initialised) added
            to queries and keys (the paper: ``False``, no biases).
        readout_init: the classifier's initialisation, ``author`` (readout ``N(0, 1/d)`` without
            bias, hidden biases one ``N(0, 1/d)`` scalar per layer) or ``he`` (He-normal readout
            with a trainable bias, zero hidden biases: runs before format 3). Source: author's
            code.
        hidden_bias: the classifier's hidden biases, ``scalar`` (one trainable scalar per hidden
            layer, broadcast over its units; the parameter has shape ``[1]``) or ``per_unit`` (one
            per unit, shape ``[d_mlp]``: runs before format 4) or ``tied`` (the scalar form, the
            last two hidden layers' biases equal at initialisation, as the author's code's key
            indexing gives them). Source: author's code.
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
    positional_config: Any = None
    attn_scale: str = "none"
    attn_init_std: float | None = None
    qk_bias: bool = False
    readout_init: str = "author"
    hidden_bias: str = "scalar"

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
        if self.n_layers > MAX_LAYERS:
            raise ValueError(
                f"ModelConfig.n_layers={self.n_layers!r} is invalid: must be in [1, {MAX_LAYERS}]"
            )
        if self.d_head is not None and not (isinstance(self.d_head, int) and self.d_head > 0):
            raise ValueError(
                f"ModelConfig.d_head={self.d_head!r} is invalid: a positive integer or None"
            )
        try:
            encoding = get_positional(self.positional)
        except ValueError as err:
            raise ValueError(f"ModelConfig.{err}") from None
        object.__setattr__(
            self, "positional_config", positional_config(self.positional, self.positional_config)
        )
        if not isinstance(self.qk_bias, bool):
            raise ValueError(f"ModelConfig.qk_bias={self.qk_bias!r} is invalid: true or false")
        if self.readout_init not in READOUT_INITS:
            raise ValueError(
                f"ModelConfig.readout_init={self.readout_init!r} is invalid: allowed values are "
                f"{READOUT_INITS}"
            )
        if self.hidden_bias not in HIDDEN_BIASES:
            raise ValueError(
                f"ModelConfig.hidden_bias={self.hidden_bias!r} is invalid: allowed values are "
                f"{HIDDEN_BIASES}"
            )
        if self.attn_scale not in ATTN_SCALES:
            raise ValueError(
                f"ModelConfig.attn_scale={self.attn_scale!r} is invalid: "
                f"allowed values are {ATTN_SCALES}"
            )
        if self.attn_scale == "log_n" and self.n_ctx_train < 2:
            raise ValueError("ModelConfig.n_ctx_train must be >= 2 for attn_scale='log_n'")
        if self.attn_init_std is not None and not self.attn_init_std > 0:
            raise ValueError(
                f"ModelConfig.attn_init_std={self.attn_init_std!r} is invalid: must be > 0"
            )
        encoding.check_model_config(self)

    @classmethod
    def from_task(cls, task: TaskConfig, **overrides) -> ModelConfig:
        """The paper's network for ``task``, with any field overridden (old flat encoding
        parameters such as ``rope_base=500`` are accepted, as in :meth:`from_dict`)."""
        base = dict(D=task.D, L=task.L, n_positions=task.P, n_ctx_train=task.seq_len)
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelConfig:
        """A config from :meth:`to_dict`'s output, or from an old ``config.json``'s ``"model"``.

        Migrates the old format: flat encoding parameters ``{encoding}_{field}`` (``rope_base``,
        ``rope_scaling``, ``rope_scale``, ``rope_mix_b``, ``cope_p_max``) go into the selected
        encoding's ``positional_config`` (overriding the same field there); those of other
        encodings are dropped, as they never acted on the model. Fields added since take their
        defaults: for ``qk_bias`` that is the old behaviour; ``readout_init`` and ``hidden_bias``
        changed form with format versions 3 and 4, and :func:`interp.io.rundir.read_config` fills
        an old run's absent field with the form it was trained with before this is called.

        Raises:
            ValueError: a key is neither a field nor a flat encoding parameter (the message names
                it), or a value is invalid.
        """
        d = dict(d)
        fields = {f.name for f in dataclasses.fields(cls)}
        flat = positional_parameters()
        positional = d.get("positional", "onehot")
        nested: dict[str, Any] = {}
        for key in [k for k in d if k not in fields]:
            if key not in flat:
                raise ValueError(
                    f"ModelConfig field {key!r} is unknown: allowed fields are {sorted(fields)} "
                    f"and the encodings' parameters {sorted(flat)}"
                )
            value = d.pop(key)
            encoding, name, _ = flat[key]
            if encoding == positional:
                nested[name] = value
        if nested:
            given = d.get("positional_config")
            if dataclasses.is_dataclass(given):
                given = dataclasses.asdict(given)
            d["positional_config"] = {**(given or {}), **nested}
        return cls(**d)

    def __getattr__(self, name: str) -> Any:
        # Read access to the old flat encoding parameters (cfg.rope_base): only called for names
        # that are not fields. None when the config uses another encoding.
        flat = positional_parameters()
        if name in flat:
            encoding, field_name, _ = flat[name]
            if self.__dict__.get("positional") == encoding:
                return getattr(self.__dict__["positional_config"], field_name)
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def d_model(self) -> int:
        """Residual width, as the encoding declares it (``D + P`` for the paper's one-hot
        concatenation, ``D`` for the others here). No encoding is built: building a learned table
        would draw from torch's global RNG."""
        return get_positional(self.positional).residual_width(
            self.D, self.n_positions, self.positional_config
        )

    @property
    def attn_only(self) -> bool:
        """TransformerLens's ``cfg.attn_only``: the residual stream has attention blocks only (the
        classifier reads it after the last block), as ``ActivationCache.decompose_resid`` asks."""
        return True

    @property
    def d_head_effective(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def positional_from_config(cfg: ModelConfig):
    """The positional encoding ``cfg`` asks for, with its own parameters."""
    return get_positional(cfg.positional).build(
        cfg.positional_config,
        n_positions=cfg.n_positions,
        d_content=cfg.D,
        d_head=cfg.d_head_effective,
    )


def canonical_model_dict(d: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``d`` (a ``config.json``'s ``"model"``) in today's format, so that an old run's config
    compares equal to the same config written now; ``d`` itself if it does not parse (an encoding
    whose plugin is not loaded)."""
    if d is None:
        return None
    try:
        return ModelConfig.from_dict(d).to_dict()
    except (ValueError, TypeError):
        return d


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
