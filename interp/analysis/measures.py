"""The registry of progress measures: one declaration per measure, every consumer derives from it.

A progress measure is a scalar computed at every evaluation on the IC set (a column of
``metrics.csv``), recomputed at every checkpoint by ``induction-cliff measures``, drawn in the
progress-measures figure and, when it has a counterpart in the phenomenological model, fitted
jointly by :mod:`phenomenology.fit`. Each of those reads the registry (:data:`MEASURES`), so a new
measure is one :func:`register_measure` call, from any module (``--plugin PATH_OR_MODULE`` loads a
module outside the package; see ``docs/contributing.md``)::

    from interp import register_measure
    from interp.analysis.probes import pattern_hook

    register_measure(
        "l1_self",
        lambda x: float(x.pattern(0).diagonal(dim1=-2, dim2=-1).mean()),
        reads=(pattern_hook(0),),
        label="L1 self-attention",
        color="#999999",
        direction="falling",
    )

What a measure reads is declared, in the style of TransformerLens hook names: ``reads`` lists the
hook names it takes from the cache (attention patterns ``blocks.{l}.attn.hook_pattern`` or any other
activation, e.g. ``blocks.0.hook_resid_post``); the logits and the batch are always given. When
only attention patterns are read, evaluation takes the hook-free fast path
(:func:`interp.model.fast.fast_patterns`), which computes the last layer's pattern only on the query
rows that the measures declare with ``rows``. A measure that reads the last layer's pattern and
declares no ``rows`` gets the full pattern (never a pattern with rows silently zeroed). Any other
activation makes evaluation run the hooked model with ``names_filter`` on exactly the hooks read.

This module imports neither torch nor the probes at import time (``import interp`` stays cheap, and
so does :mod:`phenomenology.fit`, which reads the joint-fit names from here); the computing
functions import them when called.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from interp.registry import Check, Registry, source_of

if TYPE_CHECKING:
    from torch import Tensor

    from interp.data.task import Batch

__all__ = [
    "DIRECTIONS",
    "FIT_MAPS",
    "MEASURES",
    "RESERVED_COLUMNS",
    "Measure",
    "MeasureInputs",
    "MeasureTable",
    "check_reads",
    "compute_measures",
    "get_measure",
    "last_layer_rows_read",
    "measure_names",
    "progress_measures",
    "register_measure",
    "unregister_measure",
]

log = logging.getLogger(__name__)

DIRECTIONS = ("rising", "falling")
"""How a measure moves through the transition: ``rising`` (ILA1: 0 -> 1) or ``falling``."""

FIT_MAPS = ("affine", "identity")
"""How :mod:`phenomenology.fit` compares a measure with its model quantity."""

RESERVED_COLUMNS = frozenset(
    {"step", "train_loss"} | {f"{s}_{k}" for s in ("ic", "ic2", "iw") for k in ("acc", "loss")}
)
"""``metrics.csv`` columns that are not measures: a measure may not take their names."""

_COLOR = re.compile(r"^#[0-9A-Fa-f]{6}$")
_PATTERN_HOOK = re.compile(r"^blocks\.(\d+)\.attn\.hook_pattern$")


def _pattern_hook(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_pattern"


# The checks of a Measure's fields (interp.registry.Registry.check_fields), in order.
_CHECKS_BEFORE_READS: tuple[Check, ...] = (
    (
        "name",
        lambda v: v not in RESERVED_COLUMNS,
        f"it is a reserved metrics.csv column {sorted(RESERVED_COLUMNS)}",
    ),
    ("compute", callable, "must be a function of MeasureInputs returning a float"),
    (
        "reads",
        lambda v: not isinstance(v, str) and isinstance(v, Iterable),
        "must be a tuple of hook names, e.g. ('blocks.0.attn.hook_pattern',)",
    ),
)
_CHECKS: tuple[Check, ...] = (
    (
        "reads",
        lambda v: all(isinstance(h, str) and h for h in v),
        "must be a tuple of hook names (non-empty strings)",
    ),
    (
        "rows",
        lambda v: v is None or callable(v),
        "must be a function batch -> query positions, or None (all rows)",
    ),
    ("label", lambda v: isinstance(v, str) and bool(v), "must be a non-empty string"),
    (
        "color",
        lambda v: isinstance(v, str) and bool(_COLOR.match(v)),
        "must be a colour '#RRGGBB'",
    ),
    ("direction", lambda v: v in DIRECTIONS, f"allowed values are {DIRECTIONS}"),
)
_CHECKS_AFTER_FIT: tuple[Check, ...] = (
    ("panel", lambda v: isinstance(v, str), "must be a panel name, or '' for none"),
)


def _bad_fit_map(value, why: str) -> ValueError:
    return ValueError(f"Measure.fit_map={value!r} is invalid: {why}")


@dataclass(frozen=True)
class MeasureInputs:
    """What a measure's ``compute`` function receives.

    Attributes:
        batch: the sequences (normally the IC set), with their metadata.
        logits: the network's logits ``[batch, L]``.
        activations: ``{hook name: tensor}`` for the hooks the measure (and the others computed
            with it) declared in ``reads``. The last layer's attention pattern holds only the
            declared ``rows`` when every measure declared them (other rows are zero there).
        n_layers: layers of the network (for :meth:`pattern` with a negative layer).
    """

    batch: Batch
    logits: Tensor
    activations: Mapping[str, Tensor]
    n_layers: int

    def __getitem__(self, hook: str) -> Tensor:
        try:
            return self.activations[hook]
        except KeyError:
            raise KeyError(
                f"activation {hook!r} was not cached: add it to the measure's reads "
                f"(cached: {sorted(self.activations)})"
            ) from None

    def pattern(self, layer: int) -> Tensor:
        """Attention pattern of ``layer`` (0-based as in hook names, negative from the end)
        ``[batch, head_index, query_pos, key_pos]``."""
        return self[_pattern_hook(layer % self.n_layers if layer < 0 else layer)]


OTHER_PANEL = "other measures"
"""The progress-measure figure's row for a measure that names none."""


@dataclass(frozen=True, kw_only=True)
class Measure:
    """One registered progress measure (see the module docstring).

    Attributes:
        name: the ``metrics.csv`` column (lower case, digits and ``_``; not a reserved column).
        compute: ``compute(inputs: MeasureInputs) -> float``.
        reads: hook names the measure reads from the cache (the logits need none).
        rows: for a measure that reads the last layer's attention pattern, ``rows(batch)`` gives the
            query positions it reads (a 1-D integer tensor); ``None`` reads every row (the full
            pattern is computed).
        label: display name in figures and listings.
        color: ``#RRGGBB`` line colour in figures.
        direction: ``rising`` or ``falling`` through the transition.
        description: one line for ``induction-cliff list measures``.
        fit_quantity: the phenomenological model's quantity this measure is fitted against
            (``s1``, ``p``, ``cla``; see :mod:`phenomenology.fit`), or ``None``.
        fit_map: ``affine`` or ``identity`` (how it is compared with ``fit_quantity``).
        panel: the row of the progress-measure figure it is drawn in (a row of that name is
            added after the others when none has it; measures on a 0-1 scale), or ``""`` for
            none (the explorer shows every measure with a panel).
        optional: a measure of a part the model may lack (a hidden layer of the classifier
            beyond the model's ``n_mlp_layers``): where the model has no hook it reads, it is left
            out (no column) instead of refused.
        source: the module that registered it (filled in by :func:`register_measure`).
    """

    name: str
    compute: Callable[[MeasureInputs], float]
    reads: tuple[str, ...] = ()
    rows: Callable[[Batch], Tensor] | None = None
    label: str
    color: str
    direction: str
    description: str = ""
    fit_quantity: str | None = None
    fit_map: str | None = None
    panel: str = OTHER_PANEL
    optional: bool = False
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        MEASURES.check_name(self.name)
        MEASURES.check_fields(vars(self), _CHECKS_BEFORE_READS)
        object.__setattr__(self, "reads", tuple(self.reads))
        MEASURES.check_fields(vars(self), _CHECKS)
        if (self.fit_quantity is None) != (self.fit_map is None):
            raise _bad_fit_map(
                self.fit_map, "fit_quantity and fit_map are given together or not at all"
            )
        if self.fit_map is not None and self.fit_map not in FIT_MAPS:
            raise _bad_fit_map(self.fit_map, f"allowed values are {FIT_MAPS}")
        MEASURES.check_fields(vars(self), _CHECKS_AFTER_FIT)

    @property
    def pattern_layers(self) -> tuple[int, ...]:
        """Layers whose attention pattern the measure reads."""
        return tuple(int(m.group(1)) for h in self.reads if (m := _PATTERN_HOOK.match(h)))


MEASURES: Registry[Measure] = Registry(
    "measure",
    field="measure",
    entry="Measure",
    pattern=r"^[a-z][a-z0-9_]*$",
    pattern_says="must be lower case letters, digits and '_', starting with a letter",
    hint="(a plugin's measure needs --plugin PATH_OR_MODULE)",
)
"""The registered measures by name, in registration order (the order of ``metrics.csv``;
:class:`interp.registry.Registry`)."""


def register_measure(
    name: str,
    compute: Callable[[MeasureInputs], float],
    *,
    reads: Sequence[str] = (),
    rows: Callable[[Batch], Tensor] | None = None,
    label: str | None = None,
    color: str,
    direction: str,
    description: str = "",
    fit_quantity: str | None = None,
    fit_map: str | None = None,
    panel: str | None = None,
    optional: bool = False,
    replace: bool = False,
) -> Measure:
    """Register a progress measure (see :class:`Measure` for the fields).

    Args:
        name: column name in ``metrics.csv``.
        compute: ``compute(inputs: MeasureInputs) -> float``.
        reads: hook names it reads; ``label`` defaults to ``name``; ``panel`` to
            :data:`OTHER_PANEL`.
        replace: allow replacing a registered measure of the same name (else that is an error,
            so that two plugins cannot silently shadow each other).

    Returns:
        The :class:`Measure`.

    Raises:
        ValueError: a field is invalid (the message names it), or the name is taken.
    """
    measure = Measure(
        name=name,
        compute=compute,
        reads=reads if isinstance(reads, str) else tuple(reads),  # a bare string is refused
        rows=rows,
        label=label if label is not None else name,
        color=color,
        direction=direction,
        description=description,
        fit_quantity=fit_quantity,
        fit_map=fit_map,
        panel=OTHER_PANEL if panel is None else panel,
        optional=bool(optional),
        source=source_of(compute),
    )
    taken = MEASURES[name].source if name in MEASURES else ""
    MEASURES.declare(name, measure, replace=replace, by=taken or "another module")
    log.debug("registered measure %s from %s", name, measure.source)
    return measure


def unregister_measure(name: str) -> None:
    """Remove a registered measure (tests and notebooks that register temporary ones)."""
    MEASURES.require(name)
    MEASURES.withdraw(name)


def get_measure(name: str) -> Measure:
    """The registered measure ``name``; a ``ValueError`` listing the names if there is none."""
    return MEASURES.require(name)


def measure_names() -> tuple[str, ...]:
    """Names of the registered measures, in ``metrics.csv`` order."""
    return tuple(MEASURES)


class MeasureTable(Mapping):
    """A live read-only ``{column: value}`` table: fixed entries, then each registered measure's
    ``attribute`` (measures where it is ``None`` are left out). Read at lookup time, so a measure
    registered later (by a plugin) is in it. Used for the figures' labels and colours and the
    phenomenological fit's joint measures."""

    def __init__(self, attribute: str, fixed: Mapping[str, str] | None = None) -> None:
        self._attribute, self._fixed = attribute, dict(fixed or {})

    def _table(self) -> dict[str, str]:
        measures = {n: getattr(m, self._attribute) for n, m in MEASURES.items()}
        return {**self._fixed, **{n: v for n, v in measures.items() if v is not None}}

    def __getitem__(self, column: str) -> str:
        return self._table()[column]

    def __iter__(self):
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return f"MeasureTable({self._attribute!r}, {self._table()!r})"


def _selected(names: Iterable[str] | None) -> list[Measure]:
    return list(MEASURES.values()) if names is None else [get_measure(n) for n in names]


def last_layer_rows_read(
    batch: Batch, n_layers: int = 2, names: Iterable[str] | None = None
) -> Tensor | None:
    """Query rows of the last layer's attention pattern that the measures read on ``batch``.

    Args:
        batch: the sequences.
        n_layers: layers of the network.
        names: measures (default: every registered one).

    Returns:
        The sorted union of the declared ``rows`` (always with the query row, which the fast path
        computes anyway), or ``None`` (every row) when a measure reading that pattern declares no
        ``rows``.
    """
    import torch

    last = n_layers - 1
    parts = [torch.tensor([batch.tokens.shape[1] - 1], device=batch.tokens.device)]
    for m in _selected(names):
        if last not in m.pattern_layers:
            continue
        if m.rows is None:
            log.debug(
                "measure %s declares no rows: the full last-layer pattern is computed", m.name
            )
            return None
        parts.append(torch.as_tensor(m.rows(batch), device=batch.tokens.device).flatten().long())
    return torch.unique(torch.cat(parts))


def check_reads(model, names: Iterable[str] | None = None) -> None:
    """Raise a ``ValueError`` naming the measure if one reads a hook ``model`` does not have (the
    command line checks this before training starts). ``model``: anything
    :func:`interp.analysis.hooked.probed` accepts (its ``ModelContractError`` is a ``ValueError``
    too)."""
    from interp.analysis.hooked import ModelContractError, probed

    measures = _selected(names)
    pm = probed(model)
    for m in measures:
        missing = pm.missing_hooks(m.reads)
        if missing and not m.optional:
            raise ModelContractError(
                f"measure {m.name!r} (from {m.source or '?'}) reads {missing}, which this model "
                f"({pm.name}, {pm.n_layers} layers) has no hook for"
            )


def _evaluate(measures: list[Measure], inputs: MeasureInputs) -> dict[str, float]:
    out = {}
    for m in measures:
        value = m.compute(inputs)
        try:
            out[m.name] = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"measure {m.name!r} (from {m.source or '?'}) returned {type(value).__name__}, "
                "not a number"
            ) from None
    return out


def compute_measures(
    model, batch: Batch, names: Iterable[str] | None = None, *, chunk: int = 512
) -> tuple[Tensor, dict[str, float]]:
    """Logits on ``batch`` and the registered measures, computing only what they read.

    With attention patterns only, the hook-free fast path runs (when no hook is active) and layer
    2's pattern is computed on the rows of :func:`last_layer_rows_read`; with any other activation
    the hooked model runs with ``names_filter`` on the hooks read.

    Args:
        model: the network, or any model :func:`interp.analysis.hooked.probed` accepts (a
            TransformerLens ``HookedRootModule`` with TL hook names; a ``TransformerBridge`` fed a
            token batch of :mod:`interp.data.token_task`), or a
            :class:`~interp.analysis.hooked.ProbedModel` saying how to feed and read it.
        batch: the sequences (normally the IC set).
        names: measures to compute (default: every registered one).
        chunk: sequences per forward pass.

    Returns:
        ``(logits [batch, L], {name: value})`` in registry order.

    Raises:
        interp.analysis.hooked.ModelContractError: (a ``ValueError``) the model is not a hooked
            model, a measure reads a hook it does not have, or it is not fed this kind of batch;
            one line naming what is missing.
    """
    import torch

    from interp.analysis.hooked import probed
    from interp.analysis.probes import cache_patterns

    pm = probed(model)
    measures = [m for m in _selected(names) if not (m.optional and pm.missing_hooks(m.reads))]
    check_reads(pm, [m.name for m in measures])
    pm.check((), batch)
    n_layers = pm.n_layers
    reads = list(dict.fromkeys(h for m in measures for h in m.reads))
    with torch.no_grad():
        if all(_PATTERN_HOOK.match(h) for h in reads):
            rows = last_layer_rows_read(batch, n_layers, [m.name for m in measures])
            logits, patterns = cache_patterns(pm, batch, chunk=chunk, last_layer_rows=rows)
            acts = {_pattern_hook(layer): p for layer, p in enumerate(patterns)}
        else:
            wanted = set(reads)
            logits_parts, acts_parts = [], {h: [] for h in reads}
            for start in range(0, len(batch), chunk):
                part = batch[start : start + chunk]
                out, cache = pm.run_with_cache(part, names_filter=lambda n: n in wanted)
                logits_parts.append(out)
                for h in reads:
                    acts_parts[h].append(cache[h])
            logits = torch.cat(logits_parts)
            acts = {h: torch.cat(v) for h, v in acts_parts.items()}
    return logits, _evaluate(measures, MeasureInputs(batch, logits, acts, n_layers))


def progress_measures(
    patterns: Sequence[Tensor],
    logits: Tensor,
    batch: Batch,
    names: Iterable[str] | None = None,
) -> dict[str, float]:
    """Registered measures computed from given attention patterns and logits.

    Args:
        patterns: ``[pattern of layer l [batch, head_index, query_pos, key_pos]]`` as returned by
            :func:`interp.analysis.probes.cache_patterns` (layer 2's may hold only the rows of
            :func:`last_layer_rows_read`).
        logits: the network's logits on ``batch``.
        batch: the sequences, with metadata.
        names: measures to compute. Default: every registered measure that reads only attention
            patterns (measures reading other activations need the model:
            :func:`compute_measures`).

    Returns:
        ``{name: value}`` in registry order.
    """
    acts = {_pattern_hook(layer): p for layer, p in enumerate(patterns)}
    if names is None:
        measures = [m for m in MEASURES.values() if all(h in acts for h in m.reads)]
    else:
        measures = _selected(names)
        for m in measures:
            missing = [h for h in m.reads if h not in acts]
            if missing:
                raise ValueError(
                    f"measure {m.name!r} reads {missing}: not among the given patterns; use "
                    "compute_measures(model, batch) for it"
                )
    return _evaluate(measures, MeasureInputs(batch, logits, acts, len(patterns)))


# The built-in measures of docs/science.md section 3 (functions in :mod:`interp.analysis.probes`).
# Colours: Okabe & Ito (2008), as :data:`interp.viz.plots.OKABE_ITO`; the same as the figures used
# before the registry.


def _query_row(batch: Batch) -> Tensor:
    import torch

    return torch.tensor([batch.tokens.shape[1] - 1])


def _induction_rows(batch: Batch) -> Tensor:
    """Item rows with an induction target in some sequence of the batch (an earlier item of the
    same class), and the query row. With B = 1 no item row has one."""
    import torch

    n = batch.item_classes.shape[1]
    same = batch.item_classes[:, :, None] == batch.item_classes[:, None, :]  # [b, n, n]
    earlier = torch.ones(n, n, dtype=torch.bool, device=same.device).tril(-1)
    items = torch.nonzero((same & earlier).any(dim=(0, 2))).flatten()
    return torch.cat([2 * items, torch.tensor([2 * n], device=items.device)])


def _probes():
    from interp.analysis import probes

    return probes


def _label_rows(pattern: Tensor) -> Tensor:
    import torch

    n_pos = pattern.shape[-1]
    return torch.arange(1, n_pos - 1, 2, device=pattern.device)


_L1, _L2 = _pattern_hook(0), _pattern_hook(1)

register_measure(
    "ila1",
    lambda x: _probes().ila1(x.pattern(0), x.batch),
    reads=(_L1,),
    label="ILA1",
    color="#E69F00",
    direction="rising",
    description="layer 1: attention from each label to its own item (previous-token head)",
    fit_quantity="s1",
    fit_map="affine",
    panel="attention (IC set)",
)
register_measure(
    "tila2",
    lambda x: _probes().tila2(x.pattern(1), x.batch),
    reads=(_L2,),
    rows=_query_row,
    label="TILA2",
    color="#009E73",
    direction="rising",
    description="layer 2: query attention on the labels of items of the query's class",
    fit_quantity="p",
    fit_map="affine",
    panel="attention (IC set)",
)
register_measure(
    "tla2",
    lambda x: _probes().tla2(x.pattern(1), x.batch),
    reads=(_L2,),
    rows=_query_row,
    label="TLA2",
    color="#56B4E9",
    direction="rising",
    description="layer 2: query attention on all label tokens",
    panel="attention (IC set)",
)
register_measure(
    "cla",
    lambda x: _probes().cla(x.logits, x.batch),
    label="CLA",
    color="#CC79A7",
    direction="rising",
    description="share of predictions that are one of the context's labels",
    fit_quantity="cla",
    fit_map="identity",
    panel="accuracy (IC set)",
)
register_measure(
    "prev_token_score",
    lambda x: _probes().prev_token_score(x.pattern(0), x.batch),
    reads=(_L1,),
    label="prev-token score",
    color="#D55E00",  # distinct from ILA1, which it tracks closely in the same figure
    direction="rising",
    description="layer 1: attention on the previous token, over every token",
    panel="head scores",
)
register_measure(
    "induction_score",
    lambda x: _probes().induction_score(x.pattern(1), x.batch),
    reads=(_L2,),
    rows=_induction_rows,
    label="induction score",
    color="#000000",  # distinct from TILA2, which it tracks closely in the same figure
    direction="rising",
    description="layer 2: attention on the label after an earlier item of the row's class",
    panel="head scores",
)
register_measure(
    "l1_neff_labels",
    lambda x: float(
        _probes().attention_sparsity(x.pattern(0), _label_rows(x.pattern(0)))["n_eff"].min()
    ),
    reads=(_L1,),
    label="L1 N_eff (labels)",
    color="#0072B2",
    direction="falling",
    description="layer 1: effective number of keys on label rows / visible keys (min over heads)",
    panel="",
)
register_measure(
    "l2_neff_query",
    lambda x: float(
        _probes()
        .attention_sparsity(x.pattern(1), _query_row(x.batch).to(x.logits.device))["n_eff"]
        .min()
    ),
    reads=(_L2,),
    rows=_query_row,
    label="L2 N_eff (query)",
    color="#F0E442",
    direction="falling",
    description="layer 2: effective number of keys on the query row / visible keys (min over "
    "heads)",
    panel="",
)

BUILTIN_MEASURES = measure_names()
"""Names of the measures this module registers itself (docs/science.md section 3)."""

# The classifier's active units per hidden layer (the dead-unit measure,
# :mod:`interp.analysis.dead_units`): optional, a model with fewer hidden layers has fewer columns.


def _active_units(k: int):
    from interp.analysis.dead_units import active_fraction, hidden_hook

    hook = hidden_hook(k)
    return lambda x: active_fraction(x[hook])


def _register_active_units() -> None:
    from interp.analysis import dead_units as du

    for k in range(1, du.MAX_LAYERS + 1):
        register_measure(
            du.active_column(k),
            _active_units(k),
            reads=(du.hidden_hook(k),),
            label=f"active units, hidden {k}",
            color=du.COLORS[k - 1],
            direction="falling",  # it falls when the classifier dies; no role in the transition
            description=f"classifier hidden layer {k}: share of ReLU units firing on the IC set",
            panel=du.PANEL,
            optional=True,
        )


_register_active_units()
