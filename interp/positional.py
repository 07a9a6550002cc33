"""Positional encodings: pluggable parts that turn absolute positions into position information.

A positional encoding decides four things, and the rest of the network asks it through this
interface only:

- ``d_model(D)``: the residual width it produces from ``D`` content dimensions;
- ``forward(positions)``: what ``hook_pos_embed`` records (one-hot rows, learned vectors, ...);
- ``combine(embed, pos_embed)``: how content and position meet in the residual stream;
- ``rotate(q, k, positions)``: a position-dependent transform of queries and keys (RoPE).

Encodings (``ModelConfig.positional``):

- ``onehot``: the paper's one-hot of the absolute position, concatenated (``d_model = D + P``);
- ``learned``: learned absolute vectors added to the content (``d_model = D``);
- ``none``: no position information (control);
- ``rope``: rotary embedding of queries and keys (Su et al.), with eval-time rescalings
  (:func:`rope_frequencies`); nothing enters the residual stream (``d_model = D``) and the head
  width must be even, so set ``d_head`` (e.g. 64) since ``d_head`` defaults to ``d_model = 63``;
- ``cope``: contextual positions (Golovneva et al. 2024). Nothing enters the residual stream;
  each attention layer owns a position table and adds ``q . e[p_ij]`` to its scores
  (:func:`cope_positions`, :func:`cope_bias`; the attention layer does the wiring).
"""

from __future__ import annotations

import math
import warnings

import pandas as pd
import torch
import torch.nn.functional as F
from einops import einsum
from jaxtyping import Float, Int
from torch import Tensor, nn

__all__ = [
    "PositionalEncoding",
    "OneHotConcat",
    "LearnedAdded",
    "NoPositions",
    "Rotary",
    "ContextualPositions",
    "POSITIONAL_ENCODINGS",
    "ROPE_SCALINGS",
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


class PositionalEncoding(nn.Module):
    """Base class: no positional information (the 'none' control)."""

    def __init__(self, n_positions: int) -> None:
        super().__init__()
        self.n_positions = n_positions

    def d_model(self, d_content: int) -> int:
        """Residual width for ``d_content`` content dimensions."""
        return d_content

    def forward(self, positions: Int[Tensor, "batch pos"]) -> Tensor:
        """What ``hook_pos_embed`` records."""
        return torch.zeros(*positions.shape, 0, device=positions.device)

    def combine(self, embed: Float[Tensor, "batch pos d_content"], pos_embed: Tensor) -> Tensor:
        """Residual stream input from content and position embeddings."""
        return embed

    def rotate(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Position-dependent transform of queries and keys (identity unless RoPE-like)."""
        return q, k

    def untrained(self, positions: Tensor) -> int:
        """How many entries of ``positions`` lie past the table this encoding was trained on."""
        return 0

    def _check_range(self, positions: Tensor) -> Tensor:
        if positions.numel() and int(positions.max()) >= self.n_positions:
            warnings.warn(
                f"positions up to {int(positions.max())} exceed the {self.n_positions} positions "
                "this encoding was built for; those tokens get no position signal (untrained).",
                UntrainedPositionWarning,
                stacklevel=3,
            )
        return positions


class NoPositions(PositionalEncoding):
    """No positional information at all (control)."""


class OneHotConcat(PositionalEncoding):
    """The paper's encoding: a one-hot of the absolute position, concatenated to the content.

    ``d_model = D + P``. Positions ``>= P`` (only reachable when evaluating longer sequences than
    ``N_max`` allows) get an all-zero position vector and an :class:`UntrainedPositionWarning`.
    """

    def d_model(self, d_content: int) -> int:
        return d_content + self.n_positions

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


class LearnedAdded(PositionalEncoding):
    """Learned absolute position vectors added to the content (``d_model = D``).

    Initialised ``N(0, 1/D)`` like the content vectors. Positions past the table get zero.
    """

    def __init__(self, n_positions: int, d_content: int) -> None:
        super().__init__(n_positions)
        self.W_pos = nn.Parameter(torch.randn(n_positions, d_content) / d_content**0.5)

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


ROPE_SCALINGS = ("none", "pi", "ntk", "mixed")


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


class Rotary(PositionalEncoding):
    """RoPE on queries and keys. Nothing enters the residual stream (``d_model = D``).

    Scores depend on positions only through ``i - j``, so the random offsets of the task do not
    matter and no position is ever "untrained"; what changes with length are the angles
    ``(i - j) theta_k`` of the slow frequencies (see :func:`rotary_frequency_report`).
    The rescaling (``scaling``, ``scale``, ``mix_b``) are plain attributes: change them on a
    trained model with :meth:`set_scaling` without retraining.
    """

    def __init__(
        self,
        n_positions: int,
        d_head: int,
        base: float = 10000.0,
        scaling: str = "none",
        scale: float = 1.0,
        mix_b: float = 0.5,
    ) -> None:
        super().__init__(n_positions)
        self.d_head, self.base = d_head, base
        self.set_scaling(scaling, scale, mix_b)

    def set_scaling(self, scaling: str, scale: float = 1.0, mix_b: float | None = None) -> None:
        """Switch the eval-time rescaling (``"none"``, ``"pi"``, ``"ntk"``, ``"mixed"``)."""
        mix_b = getattr(self, "mix_b", 0.5) if mix_b is None else mix_b
        self.freqs = rope_frequencies(self.d_head, self.base, scaling, scale, mix_b)
        self.scaling, self.scale, self.mix_b = scaling, scale, mix_b

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


class ContextualPositions(PositionalEncoding):
    """CoPE marker: nothing in the residual (``d_model = D``); each attention layer owns a table.

    The table ``W_cope [p_max + 1, d_head]`` lives in each :class:`~interp.attention.Attention`
    (zero-initialised, as in Golovneva et al.'s code), since positions are computed from that
    layer's own gates. Contextual positions never exceed ``p_max``, so no position is untrained
    in the table sense; a longer sequence can still push more of them to the clip.
    """

    def __init__(self, n_positions: int, p_max: int) -> None:
        super().__init__(n_positions)
        if not (isinstance(p_max, int) and p_max >= 1):
            raise ValueError(f"cope_p_max={p_max!r} is invalid: must be an integer >= 1")
        self.p_max = p_max


POSITIONAL_ENCODINGS = ("onehot", "learned", "none", "rope", "cope")


def make_positional(
    name: str,
    n_positions: int,
    d_content: int,
    *,
    d_head: int | None = None,
    rope_base: float = 10000.0,
    rope_scaling: str = "none",
    rope_scale: float = 1.0,
    rope_mix_b: float = 0.5,
    cope_p_max: int = 64,
) -> PositionalEncoding:
    """Build the positional encoding called ``name`` (one of :data:`POSITIONAL_ENCODINGS`).

    ``d_head`` is needed by ``rope`` only; the ``rope_*`` and ``cope_*`` arguments by their
    encodings (see :func:`rope_frequencies` and :class:`ContextualPositions`).
    """
    if name == "onehot":
        return OneHotConcat(n_positions)
    if name == "learned":
        return LearnedAdded(n_positions, d_content)
    if name == "none":
        return NoPositions(n_positions)
    if name == "rope":
        return Rotary(
            n_positions,
            d_head if d_head is not None else d_content,
            rope_base,
            rope_scaling,
            rope_scale,
            rope_mix_b,
        )
    if name == "cope":
        return ContextualPositions(n_positions, cope_p_max)
    raise ValueError(f"positional={name!r} is invalid: allowed values are {POSITIONAL_ENCODINGS}")
