"""Early-warning signals of the transition proposed in the literature, as optional progress
measures, one module each, for comparing them on the same runs:

- ``repetition_bias`` (:mod:`.repetition_bias`, after Gopalani and Hu 2025): the query's
  attention on earlier copies of its item, minus a uniform pattern's share;
- ``representation_collapse`` (:mod:`.representation_collapse`): the mean pairwise cosine of the
  query's residual stream after layer 2 across the evaluation sequences;
- ``attention_participation`` (:mod:`.attention_participation`): layer 2's participation ratio
  ``1 / sum p^2`` on the query row over the number of keys, smallest head;
- ``heat_capacity`` (:mod:`.heat_capacity`): a two-datapoint spectral heat capacity in the spirit
  of Corlouer and Hennick (2026); not their code.

Importing this package registers them (:func:`interp.analysis.measures.register_measure`); the
package's own import does not, so a run's ``metrics.csv`` has their columns only when they are
switched on, as any extra measure is, with the plugin option::

    induction-cliff --plugin interp.analysis.signals train --preset tiny --out runs/t
    induction-cliff --plugin interp.analysis.signals list measures

(``config.json`` then records the plugin, and commands that reopen the run ask for it again).
Each is ``optional``: on a model without the hook it reads it is left out instead of refused.
"""

from __future__ import annotations

from interp.analysis.signals import (
    attention_participation,
    heat_capacity,
    repetition_bias,
    representation_collapse,
)

__all__ = [
    "SIGNALS",
    "attention_participation",
    "heat_capacity",
    "repetition_bias",
    "representation_collapse",
]

SIGNALS = (
    "attention_participation",
    "heat_capacity",
    "repetition_bias",
    "representation_collapse",
)
"""The measures this package registers, in registration order (``metrics.csv`` order)."""
