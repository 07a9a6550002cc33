"""Positional encodings: pluggable parts that turn absolute positions into residual-stream input.

A positional encoding decides three things, and the rest of the network asks it through this
interface only:

- ``d_model(D)``: the residual width it produces from ``D`` content dimensions;
- ``forward(positions)``: what ``hook_pos_embed`` records (one-hot rows, learned vectors, ...);
- ``combine(embed, pos_embed)``: how content and position meet in the residual stream.

Encodings that act inside attention (RoPE, CoPE) would override :meth:`PositionalEncoding.rotate`
or add a score bias; the paper's one-hot concatenation does neither.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

__all__ = [
    "PositionalEncoding",
    "OneHotConcat",
    "LearnedAdded",
    "NoPositions",
    "POSITIONAL_ENCODINGS",
    "make_positional",
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


POSITIONAL_ENCODINGS = ("onehot", "learned", "none")


def make_positional(name: str, n_positions: int, d_content: int) -> PositionalEncoding:
    """Build the positional encoding called ``name`` (one of :data:`POSITIONAL_ENCODINGS`)."""
    if name == "onehot":
        return OneHotConcat(n_positions)
    if name == "learned":
        return LearnedAdded(n_positions, d_content)
    if name == "none":
        return NoPositions(n_positions)
    raise ValueError(f"positional={name!r} is invalid: allowed values are {POSITIONAL_ENCODINGS}")
