"""``heat_capacity``: a two-datapoint spectral heat capacity of the query's residual stream.

A two-datapoint spectral heat capacity in the spirit of Corlouer and Hennick (2026); not their
code. The definition here is the toolkit's own, from first principles:

- ``x1, x2`` are two evaluation sequences' residual vectors at the final (query) position after
  the last attention layer (``blocks.1.hook_resid_post[:, -1]``, as ``representation_collapse``);
- their Gram matrix ``G = [[x1.x1, x1.x2], [x2.x1, x2.x2]]`` divided by its trace is a 2 x 2
  density matrix ``rho`` (symmetric, positive semi-definite, unit trace) with eigenvalues
  ``lambda_1 + lambda_2 = 1``;
- ``E_i = -log lambda_i`` are energies, and the heat capacity at unit temperature is the variance
  of the energy under the distribution ``lambda``::

      C = sum_i lambda_i E_i^2 - (sum_i lambda_i E_i)^2

  with ``lambda log^2 lambda = 0`` at ``lambda = 0``. For eigenvalues ``(p, 1 - p)`` this is
  ``p (1 - p) log^2(p / (1 - p))``: ``0`` for ``(1/2, 1/2)`` (orthogonal vectors of equal
  length) and for ``(1, 0)`` (parallel vectors), positive in between;
- the measure is the mean of ``C`` over the disjoint pairs ``(0, 1), (2, 3), ...`` of the
  evaluation batch (a last odd sequence is left out; pairs of two zero vectors, whose ``rho`` is
  undefined, too; NaN when no pair is left).

Eigenvalues by :func:`torch.linalg.eigvalsh` in float64. Cost per evaluation (``compute`` on the
``paper-fig3`` IC set: 1024 pairs, ``d_model`` 128; median of 20 calls, one CPU thread): see
:data:`COST`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.analysis.measures import register_measure
from interp.analysis.signals._common import FINAL_RESID, final_vectors

__all__ = ["COST", "mean_pair_heat_capacity", "pair_heat_capacity"]

COST = "1.2 ms"
"""Measured cost of one ``compute`` on the ``paper-fig3`` IC set (module docstring), beside about
170 ms for the evaluation's forward pass on the same set (``compute_measures``, same thread)."""


def pair_heat_capacity(x1: Tensor, x2: Tensor) -> Tensor:
    """``C`` of the module docstring for each pair ``(x1[k], x2[k])`` of ``[pairs, d]`` vectors;
    ``[pairs]``, NaN where both vectors are zero."""
    x = torch.stack([x1.double(), x2.double()], dim=1)  # [pairs, 2, d]
    gram = x @ x.transpose(1, 2)  # [pairs, 2, 2]
    trace = gram.diagonal(dim1=1, dim2=2).sum(-1)  # [pairs]
    rho = gram / torch.where(trace > 0, trace, float("nan"))[:, None, None]
    lam = torch.linalg.eigvalsh(torch.nan_to_num(rho)).clamp(min=0.0)  # [pairs, 2]
    energy = torch.where(lam > 0, -torch.log(lam.clamp(min=torch.finfo(lam.dtype).tiny)), 0.0)
    mean = (lam * energy).sum(-1)
    c = (lam * energy.square()).sum(-1) - mean.square()
    return torch.where(trace > 0, c, float("nan"))


def mean_pair_heat_capacity(vectors: Tensor) -> float:
    """The measure: mean ``C`` over the disjoint pairs ``(0, 1), (2, 3), ...`` of the rows of
    ``vectors [n, d]`` (module docstring)."""
    m = vectors.shape[0] // 2
    if m == 0:
        return float("nan")
    c = pair_heat_capacity(vectors[0 : 2 * m : 2], vectors[1 : 2 * m : 2])
    c = c[~torch.isnan(c)]
    return float(c.mean()) if len(c) else float("nan")


register_measure(
    "heat_capacity",
    lambda x: mean_pair_heat_capacity(final_vectors(x)),
    reads=(FINAL_RESID,),
    label="two-point heat capacity",
    color="#AA4499",
    direction="rising",
    description="variance of -log(eigenvalue) of the unit-trace Gram matrix of two sequences' "
    f"query residuals, mean over disjoint pairs ({COST} per paper-fig3 evaluation)",
    panel="",
    optional=True,
)
