"""Positional encodings: a registry of pluggable parts that give the network position information.

An encoding is a subclass of :class:`PositionalEncoding` registered under a name with
:func:`register_positional`; ``ModelConfig(positional=NAME)`` picks it and the rest of the network
asks it through these hooks only (none of them has a branch for a particular encoding):

- ``residual_width(d_content, n_positions, config)`` (class method): the residual width it produces;
- ``forward(positions)``: what ``hook_pos_embed`` records (one-hot rows, learned vectors, ...);
- ``combine(embed, pos_embed)``: how content and position meet in the residual stream;
- ``rotate(q, k, positions)``: a position-dependent transform of queries and keys (RoPE);
- ``setup_layer(attn)``: parameters and hook points the encoding adds to each attention layer;
- ``score_bias(attn, scores=..., q=..., k=..., positions=..., causal=...)``: a term added to the
  (scaled, causally masked) attention scores (CoPE, ALiBi);
- ``check_model_config(cfg)`` (class method): extra rules on the model (RoPE: an even head width);
- ``supports_rescaling``: whether :mod:`interp.analysis.length` may change its eval-time rescaling.

An encoding's own parameters live in its own frozen config dataclass (``RopeConfig``,
``CopeConfig``), held by ``ModelConfig.positional_config``. The old flat spelling of a parameter,
``{encoding}_{field}`` (``rope_base``, ``cope_p_max``), is still accepted by ``--set`` and by
:meth:`interp.model.network.ModelConfig.from_dict` (old ``config.json`` files).

Encodings registered here (:data:`POSITIONAL_ENCODINGS`):

- ``onehot``: the paper's one-hot of the absolute position, concatenated (``d_model = D + P``);
- ``learned``: learned absolute vectors added to the content (``d_model = D``);
- ``none``: no position information (control);
- ``rope``: rotary embedding of queries and keys (Su et al.), with eval-time rescalings
  (:func:`rope_frequencies`); nothing enters the residual stream (``d_model = D``) and the head
  width must be even, so set ``d_head`` (e.g. 64) since ``d_head`` defaults to ``d_model = 63``;
- ``cope``: contextual positions (Golovneva et al. 2024). Nothing enters the residual stream;
  each attention layer owns a position table and adds ``q . e[p_ij]`` to its scores
  (:func:`cope_positions`, :func:`cope_bias`).

``docs/contributing.md`` adds ALiBi from a module outside the package.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from einops import einsum
from jaxtyping import Float, Int, Real
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

# The registry and what a config asks of an encoding live without torch; importing them from
# here is the old path, kept.
from interp.config.positional import (
    POSITIONAL_ENCODINGS,
    ROPE_SCALINGS,
    ContextualRules,
    CopeConfig,
    EncodingRules,
    LearnedRules,
    NoPositionsRules,
    OneHotRules,
    RopeConfig,
    RotaryRules,
    declare_positional,
    get_positional,
    positional_config,
    positional_parameters,
)
from interp.model.position_range import positions_trusted

__all__ = [
    "PositionalEncoding",
    "OneHotConcat",
    "LearnedAdded",
    "NoPositions",
    "Rotary",
    "RopeConfig",
    "ContextualPositions",
    "CopeConfig",
    "POSITIONAL_ENCODINGS",
    "ROPE_SCALINGS",
    "register_positional",
    "get_positional",
    "positional_config",
    "positional_parameters",
    "positional_table",
    "make_positional",
    "rope_frequencies",
    "apply_rotary",
    "rotary_frequency_report",
    "cope_positions",
    "cope_bias",
    "UntrainedPositionWarning",
]


class UntrainedPositionWarning(UserWarning):
    """Positions beyond the encoding's table were used (length generalisation past N_max)."""


class PositionalEncoding(EncodingRules, nn.Module):
    """Base class of the encodings: no positional information, every hook a no-op.

    Subclasses override the hooks they need and are registered with :func:`register_positional`,
    which sets the class attributes ``name``, ``config_class`` and ``description``; what a config
    asks of an encoding (``residual_width``, ``check_model_config``, ``supports_rescaling``) is
    :class:`~interp.config.positional.EncodingRules`'s.

    Args:
        n_positions: size of the absolute-position table (``TaskConfig.P``).
        config: the encoding's own config (an instance of ``config_class``), or None.
    """

    def __init__(self, n_positions: int, config: Any = None) -> None:
        super().__init__()
        self.n_positions = n_positions
        self.config = config

    # ---- construction and shape

    @classmethod
    def build(
        cls, config: Any, *, n_positions: int, d_content: int, d_head: int
    ) -> PositionalEncoding:
        """The encoding for a model with these sizes (``config``: its ``config_class`` or None).

        Called inside the model's seeded RNG fork, before the attention layers are built.
        """
        return cls(n_positions, config)

    def d_model(self, d_content: int) -> int:
        """Residual width for ``d_content`` content dimensions."""
        return type(self).residual_width(d_content, self.n_positions, self.config)

    # ---- the residual stream

    def forward(self, positions: Real[Tensor, "batch pos"]) -> Tensor:
        """What ``hook_pos_embed`` records. (Positions are integers for the tabled encodings;
        relative ones such as RoPE also take fractional, rescaled positions.)"""
        return torch.zeros(*positions.shape, 0, device=positions.device)

    def combine(self, embed: Float[Tensor, "batch pos d_content"], pos_embed: Tensor) -> Tensor:
        """Residual stream input from content and position embeddings."""
        return embed

    # ---- inside attention

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Position-dependent transform of queries and keys (identity unless RoPE-like)."""
        return q, k

    def setup_layer(self, attn: nn.Module) -> None:
        """Add this encoding's per-layer parameters and hook points to attention layer ``attn``.

        Called at the end of :class:`~interp.model.attention.Attention`'s constructor; attributes
        set here are part of the layer (state-dict key ``blocks.{l}.attn.NAME``, hook name
        ``blocks.{l}.attn.hook_NAME``).
        """

    def score_bias(
        self,
        attn: nn.Module,
        *,
        scores: Float[Tensor, "batch head_index query_pos key_pos"],
        q: Float[Tensor, "batch pos head_index d_head"],
        k: Float[Tensor, "batch pos head_index d_head"],
        positions: Real[Tensor, "batch pos"],
        causal: Tensor,
    ) -> Tensor | None:
        """A term added to the scaled, causally masked ``scores`` (broadcastable to them), or
        None. The layer masks the sum causally again."""
        return None

    @property
    def rotates(self) -> bool:
        """Whether this encoding transforms queries and keys (overrides :meth:`rotate`)."""
        return type(self).rotate is not PositionalEncoding.rotate

    @property
    def biases_scores(self) -> bool:
        """Whether this encoding adds to the attention scores (overrides :meth:`score_bias`)."""
        return type(self).score_bias is not PositionalEncoding.score_bias

    @property
    def acts_in_attention(self) -> bool:
        """Whether attention layers need this encoding (then the fast paths do not apply)."""
        return self.rotates or self.biases_scores or type(self).setup_layer is not _base_setup_layer

    # ---- length generalisation

    def untrained(self, positions: Tensor) -> int:
        """How many entries of ``positions`` lie past the table this encoding was trained on."""
        return 0

    def _check_range(self, positions: Tensor) -> Tensor:
        if positions_trusted():  # in the table by construction: no host read of the positions
            return positions
        if positions.numel() and int(positions.max()) >= self.n_positions:
            warnings.warn(
                f"positions up to {int(positions.max())} exceed the {self.n_positions} positions "
                "this encoding was built for; those tokens get no position signal (untrained).",
                UntrainedPositionWarning,
                stacklevel=3,
            )
        return positions


_base_setup_layer = PositionalEncoding.setup_layer


# --------------------------------------------------------------------------------------------
# registration


def register_positional(
    name: str,
    cls: type | None = None,  # any class: one that is not a PositionalEncoding is refused below
    *,
    config: type | None = None,
    description: str | None = None,
):
    """Register a positional encoding under ``name`` (usable as a class decorator).

    Args:
        name: lowercase letters and digits (``--set positional=NAME``); the old flat spelling of
            its parameters is ``NAME_FIELD``.
        cls: a subclass of :class:`PositionalEncoding`; omit it to decorate a class.
        config: its parameters, a frozen dataclass whose fields all have defaults (validated in
            its ``__post_init__``); None if it has no parameters.
        description: one line for ``list positional`` (default: the docstring's first line).

    Returns:
        ``cls`` (or the decorator).

    Example::

        @register_positional("alibi", config=AlibiConfig)
        class Alibi(PositionalEncoding):
            def score_bias(self, attn, *, scores, q, k, positions, causal):
                distance = (positions[:, :, None] - positions[:, None]).abs()
                return -self.config.slope * distance[:, None]
    """

    def add(cls: type) -> type[PositionalEncoding]:
        return declare_positional(
            name, cls, config=config, description=description, base=PositionalEncoding
        )

    return add if cls is None else add(cls)


def positional_table() -> pd.DataFrame:
    """One row per registered encoding: ``name, description, parameters, class`` (for ``list``)."""
    rows = []
    for name, cls in POSITIONAL_ENCODINGS.items():
        params = (
            ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(cls.config_class))
            if cls.config_class
            else ""
        )
        rows.append(
            {
                "name": name,
                "description": cls.description,
                "parameters": params,
                "class": f"{cls.__module__}.{cls.__qualname__}",
            }
        )
    return pd.DataFrame(rows, columns=["name", "description", "parameters", "class"])


def make_positional(
    name: str,
    n_positions: int,
    d_content: int,
    *,
    d_head: int | None = None,
    config: Any = None,
) -> PositionalEncoding:
    """Build the encoding registered as ``name`` (``config``: its parameters, see
    :func:`positional_config`; ``d_head`` defaults to ``d_content``)."""
    cls = get_positional(name)
    return cls.build(
        positional_config(name, config),
        n_positions=n_positions,
        d_content=d_content,
        d_head=d_head if d_head is not None else d_content,
    )


class NoPositions(NoPositionsRules, PositionalEncoding):
    """No positional information at all (control)."""


class OneHotConcat(OneHotRules, PositionalEncoding):
    """The paper's encoding: a one-hot of the absolute position, concatenated to the content.

    ``d_model = D + P``. Positions ``>= P`` (only reachable when evaluating longer sequences than
    ``N_max`` allows) get an all-zero position vector and an :class:`UntrainedPositionWarning`.
    """

    def forward(
        self, positions: Int[Tensor, "batch pos"]
    ) -> Float[Tensor, "batch pos n_positions"]:
        positions = self._check_range(positions)
        in_range = positions < self.n_positions
        one_hot = F.one_hot(positions.clamp(max=self.n_positions - 1), self.n_positions)
        return one_hot.float() * in_range[..., None]

    def combine(self, embed: Tensor, pos_embed: Tensor) -> Tensor:
        return torch.cat([embed, pos_embed], dim=-1)

    def untrained(self, positions: Tensor) -> int:
        return int((positions >= self.n_positions).sum())


class LearnedAdded(LearnedRules, PositionalEncoding):
    """Learned absolute position vectors added to the content (``d_model = D``).

    Initialised ``N(0, 1/D)`` like the content vectors. Positions past the table get zero.
    """

    def __init__(self, n_positions: int, d_content: int) -> None:
        super().__init__(n_positions)
        self.W_pos = nn.Parameter(torch.randn(n_positions, d_content) / d_content**0.5)

    @classmethod
    def build(cls, config, *, n_positions, d_content, d_head) -> LearnedAdded:
        return cls(n_positions, d_content)

    def forward(self, positions: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
        positions = self._check_range(positions)
        in_range = positions < self.n_positions
        return self.W_pos[positions.clamp(max=self.n_positions - 1)] * in_range[..., None]

    def combine(self, embed: Tensor, pos_embed: Tensor) -> Tensor:
        return embed + pos_embed

    def untrained(self, positions: Tensor) -> int:
        return int((positions >= self.n_positions).sum())


# --------------------------------------------------------------------------------------------
# RoPE


def rope_frequencies(
    d_head: int,
    base: float = 10000.0,
    scaling: str = "none",
    scale: float = 1.0,
    mix_b: float = 0.5,
) -> Float[Tensor, " n_freq"]:
    """Rotary angular frequencies ``theta_i``, ``i = 0 .. d_head/2 - 1``, with a length rescaling.

    Args:
        d_head: head width (even).
        base: RoPE base; plain RoPE has ``theta_i = base^(-2i/d_head)``.
        scaling: ``"none"``; ``"pi"`` positional interpolation (positions / s, i.e. every
            frequency divided by ``s``); ``"ntk"`` NTK-aware, ``base' = base * s^(d/(d-2))``, which
            leaves ``theta_0`` unchanged and divides the lowest frequency by exactly ``s``;
            ``"mixed"`` Su's mixed-base variant, ``theta_i / s^((i/(d/2-1))^b)`` (Su writes the
            divisor as ``exp(a i^b)``; fixing the lowest frequency's divisor to ``s`` gives this
            form). ``b = 1`` is NTK-aware and ``b = 0`` (with ``0^0 = 1``) is interpolation.
        scale: the length ratio ``s`` (test length / training length); 1 leaves plain RoPE.
        mix_b: the exponent ``b`` of the mixed variant.
    """
    if d_head % 2 or d_head < 4:
        raise ValueError(f"d_head={d_head} is invalid for RoPE: must be even and >= 4")
    if scaling not in ROPE_SCALINGS:
        raise ValueError(f"rope_scaling={scaling!r} is invalid: allowed values are {ROPE_SCALINGS}")
    if not scale > 0:
        raise ValueError(f"rope_scale={scale!r} is invalid: must be > 0")
    i = torch.arange(d_head // 2, dtype=torch.float64)
    theta = base ** (-2.0 * i / d_head)
    if scaling == "pi":
        theta = theta / scale
    elif scaling == "ntk":
        theta = (base * scale ** (d_head / (d_head - 2))) ** (-2.0 * i / d_head)
    elif scaling == "mixed":
        frac = i / (d_head // 2 - 1)
        theta = theta / scale ** torch.pow(frac, mix_b)  # torch: 0 ** 0 = 1
    return theta.float()


def apply_rotary(
    x: Float[Tensor, "batch pos head_index d_head"],
    positions: Tensor,
    freqs: Float[Tensor, " n_freq"],
) -> Float[Tensor, "batch pos head_index d_head"]:
    """Rotate each pair ``(x_i, x_{i + d/2})`` by the angle ``position * theta_i`` (NeoX layout)."""
    angles = positions.to(freqs.dtype)[..., None] * freqs.to(x.device)  # [batch, pos, n_freq]
    cos, sin = angles.cos()[:, :, None, :], angles.sin()[:, :, None, :]
    x1, x2 = x[..., : freqs.numel()], x[..., freqs.numel() :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Rotary(RotaryRules, PositionalEncoding):
    """RoPE on queries and keys. Nothing enters the residual stream (``d_model = D``).

    Scores depend on positions only through ``i - j``, so the random offsets of the task do not
    matter and no position is ever "untrained"; what changes with length are the angles
    ``(i - j) theta_k`` of the slow frequencies (see :func:`rotary_frequency_report`).
    The rescaling (``scaling``, ``scale``, ``mix_b``) are plain attributes: change them on a
    trained model with :meth:`set_scaling` without retraining (``config`` follows).
    """

    def __init__(
        self,
        n_positions: int,
        d_head: int,
        base: float = 10000.0,
        scaling: str = "none",
        scale: float = 1.0,
        mix_b: float = 0.5,
        constant_dim: bool = False,
    ) -> None:
        super().__init__(n_positions)
        self.d_head, self.base, self.constant_dim = d_head, base, constant_dim
        self.set_scaling(scaling, scale, mix_b)

    @classmethod
    def build(cls, config: RopeConfig, *, n_positions, d_content, d_head) -> Rotary:
        return cls(
            n_positions,
            d_head,
            config.base,
            config.scaling,
            config.scale,
            config.mix_b,
            config.constant_dim,
        )

    def forward(self, positions: Real[Tensor, "batch pos"]) -> Tensor:
        """Nothing, or the constant dimension (``constant_dim``): ones ``[batch, pos, 1]``."""
        width = int(self.constant_dim)
        return torch.ones(*positions.shape, width, device=positions.device)

    def combine(self, embed: Tensor, pos_embed: Tensor) -> Tensor:
        return torch.cat([embed, pos_embed.to(embed.dtype)], dim=-1)

    def set_scaling(self, scaling: str, scale: float = 1.0, mix_b: float | None = None) -> None:
        """Switch the eval-time rescaling (``"none"``, ``"pi"``, ``"ntk"``, ``"mixed"``)."""
        mix_b = getattr(self, "mix_b", 0.5) if mix_b is None else mix_b
        self.freqs = rope_frequencies(self.d_head, self.base, scaling, scale, mix_b)
        self.scaling, self.scale, self.mix_b = scaling, scale, mix_b
        self.config = RopeConfig(
            base=self.base,
            scaling=scaling,
            scale=float(scale),
            mix_b=float(mix_b),
            constant_dim=self.constant_dim,
        )

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        return apply_rotary(q, positions, self.freqs), apply_rotary(k, positions, self.freqs)


def rotary_frequency_report(
    d_head: int,
    n_train: int,
    n_test: int,
    base: float = 10000.0,
    scaling: str = "none",
    scale: float = 1.0,
    mix_b: float = 0.5,
) -> pd.DataFrame:
    """Which rotary frequencies fall between the training and the test lengths.

    A frequency whose wavelength ``2 pi / theta`` is at most the largest training distance
    ``n_train - 1`` has shown every phase during training; one whose wavelength exceeds the largest
    test distance ``n_test - 1`` turns by less than a full period even at test length. Only those in
    between (``in_between``) meet phases at test time that training never showed. If no frequency
    is in between, the rescalings cannot rescue anything that plain RoPE gets wrong (read
    ``max_train_angle`` / ``max_test_angle`` too: a slow frequency still sees larger angles).

    Args:
        d_head: head width.
        n_train: training sequence length (tokens), e.g. ``2N + 1``.
        n_test: test sequence length (tokens).
        base, scaling, scale, mix_b: as in :func:`rope_frequencies` (the rescaling in use at test).

    Returns:
        One row per frequency: ``index, theta, wavelength, theta_scaled, wavelength_scaled,
        max_train_angle, max_test_angle, in_between``.
    """
    theta = rope_frequencies(d_head, base).double()
    scaled = rope_frequencies(d_head, base, scaling, scale, mix_b).double()
    wavelength = 2 * math.pi / theta
    df = pd.DataFrame(
        {
            "index": range(len(theta)),
            "theta": theta.numpy(),
            "wavelength": wavelength.numpy(),
            "theta_scaled": scaled.numpy(),
            "wavelength_scaled": (2 * math.pi / scaled).numpy(),
            "max_train_angle": (theta * (n_train - 1)).numpy(),
            "max_test_angle": (scaled * (n_test - 1)).numpy(),
        }
    )
    df["in_between"] = (df["wavelength"] > n_train - 1) & (df["wavelength"] <= n_test - 1)
    return df


# --------------------------------------------------------------------------------------------
# CoPE


def cope_positions(
    gates: Float[Tensor, "batch head_index query_pos key_pos"], p_max: int
) -> Float[Tensor, "batch head_index query_pos key_pos"]:
    """Contextual positions ``p_ij = sum_{t=j..i} g_it``, clipped at ``p_max`` (Golovneva eq. 3).

    ``gates`` must already be zero above the diagonal (``t > i``); the sum runs over the key axis
    as a reversed cumulative sum. With every visible gate equal to 1, ``p_ij = i - j + 1``.
    """
    positions = gates.flip(-1).cumsum(-1).flip(-1)
    return positions.clamp(max=p_max)


def cope_bias(
    q: Float[Tensor, "batch pos head_index d_head"],
    W_pos: Float[Tensor, "n_cope d_head"],
    positions: Float[Tensor, "batch head_index query_pos key_pos"],
) -> Float[Tensor, "batch head_index query_pos key_pos"]:
    """``q_i . e[p_ij]`` with ``e[p]`` interpolated linearly between ``floor(p)`` and ``ceil(p)``.

    As Golovneva et al. do, ``q_i . e[p]`` is computed once for every integer ``p`` (a
    ``[query_pos, n_cope]`` table) and then gathered at floor and ceil and mixed, instead of
    building ``e[p_ij]`` vectors. Exact at integer positions.
    """
    logits_int = einsum(
        q,
        W_pos,
        "batch query_pos head_index d_head, n_cope d_head -> batch head_index query_pos n_cope",
    )
    floor = positions.floor()
    w = positions - floor
    floor = floor.long()
    ceil = positions.ceil().long()
    return logits_int.gather(-1, ceil) * w + logits_int.gather(-1, floor) * (1 - w)


class ContextualPositions(ContextualRules, PositionalEncoding):
    """CoPE: nothing in the residual (``d_model = D``); each attention layer owns a table.

    The table ``W_cope [p_max + 1, d_head]`` lives in each
    :class:`~interp.model.attention.Attention` (zero-initialised, as in Golovneva et al.'s code),
    since positions are computed from that layer's own gates: ``g_ij = sigmoid(s_ij)`` of the
    scaled, causally masked scores ``s_ij`` (``hook_cope_gates``, masked causally again after the
    hook, so a hook that forces them to 1 gives ``p_ij = i - j + 1``), contextual positions
    (``hook_cope_positions``), and ``q_i . e[p_ij]`` added to the scores *unscaled*. Of the two
    published scalings (the paper's equations use ``sigmoid(q.k)``; its code gates the logits
    already divided by ``sqrt(d)`` and adds the position term after that division) this is the
    code's; with ``attn_scale="none"`` (the paper's network) the two coincide. Contextual positions
    never exceed ``p_max``, so no position is untrained in the table sense; a longer sequence can
    still push more of them to the clip.
    """

    def __init__(self, n_positions: int, p_max: int) -> None:
        super().__init__(n_positions, CopeConfig(p_max=p_max))
        self.p_max = p_max

    @classmethod
    def build(cls, config: CopeConfig, *, n_positions, d_content, d_head) -> ContextualPositions:
        return cls(n_positions, config.p_max)

    def setup_layer(self, attn: nn.Module) -> None:
        # Zero init (Golovneva et al.'s code): CoPE starts as plain content attention.
        attn.W_cope = nn.Parameter(torch.zeros(self.p_max + 1, attn.d_head))
        attn.hook_cope_gates = HookPoint()  # [batch, head_index, query_pos, key_pos]
        attn.hook_cope_positions = HookPoint()  # [batch, head_index, query_pos, key_pos]

    def score_bias(self, attn, *, scores, q, k, positions, causal) -> Tensor:
        gates = attn.hook_cope_gates(torch.sigmoid(scores)) * causal
        cope_pos = attn.hook_cope_positions(cope_positions(gates, self.p_max))
        return cope_bias(q, attn.W_cope, cope_pos)


register_positional("onehot", OneHotConcat)
register_positional("learned", LearnedAdded)
register_positional("none", NoPositions)
register_positional("rope", Rotary, config=RopeConfig)
register_positional("cope", ContextualPositions, config=CopeConfig)
