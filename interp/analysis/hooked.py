"""What a model must provide for the probes, the measures and the explorer: the one contract.

The probes (:mod:`interp.analysis.probes`), the registered progress measures
(:func:`interp.analysis.measures.compute_measures`) and the attention explorer
(:mod:`interp.viz.explorer`) read a model only through a :class:`ProbedModel`, which says

- **which hooks it has** (``hook_dict``, TransformerLens hook names) and, among them, **its
  attention patterns**: ``blocks.{l}.attn.hook_pattern`` for ``l = 0 .. n_layers - 1``, each
  ``[batch, head_index, query_pos, key_pos]`` over the ``2N + 1`` tokens of a sequence;
- **how to feed it a batch** (``feed(batch)``: the positional arguments of its forward and of its
  ``run_with_cache``);
- **how to read the query's logits** (``readout(output, batch)``: ``[batch, L]`` logits over the
  task's labels, from whatever the forward returns).

:func:`probed` builds one for this toolkit's networks, for any TransformerLens ``HookedRootModule``
that uses TL hook names, and for a TransformerLens 4 ``TransformerBridge`` (``boot_native``), fed
the discrete-token task (:mod:`interp.data.token_task`); ``feed`` and ``readout`` adapt anything
else. :meth:`ProbedModel.check` raises one :class:`ModelContractError` line naming what is missing,
before any work::

    from interp.analysis.hooked import probed
    from interp.analysis.measures import compute_measures

    logits, values = compute_measures(bridge, token_batch)  # probed(bridge) is implied
    probed(my_model, feed=lambda b: (b.tokens,), readout=lambda out, b: out[:, -1, :16])

docs/transformerlens.md has a worked example.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "ModelContractError",
    "ProbedModel",
    "probed",
    "pattern_hook",
    "is_bridge",
]


class ModelContractError(ValueError):
    """A model lacks what the probes need (the message is one line naming it)."""


def pattern_hook(layer: int) -> str:
    """TransformerLens name of layer ``layer``'s attention pattern (0-based)."""
    return f"blocks.{layer}.attn.hook_pattern"


def is_bridge(model: Any) -> bool:
    """Whether ``model`` is a TransformerLens 4 ``TransformerBridge`` (checked without importing
    ``transformer_lens.model_bridge``, which is slow to import)."""
    return any(
        c.__name__ == "TransformerBridge" and c.__module__.startswith("transformer_lens.")
        for c in type(model).__mro__
    )


def _name(model: Any) -> str:
    return type(model).__name__


def _n_pattern_layers(hook_names: Iterable[str]) -> int:
    names = set(hook_names)
    n = 0
    while pattern_hook(n) in names:
        n += 1
    return n


def _positional_arity(module: nn.Module) -> int | None:
    """Positional parameters of ``module.forward`` (None: ``*args``, any number)."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in params)


def _label_logits(out: Tensor, batch) -> Tensor:
    """The default readout: ``[batch, L]`` as is; ``[batch, pos, vocab]``: the query position's
    logits over the label ids (``0 .. n_labels - 1`` of a token batch, else every column)."""
    if not isinstance(out, Tensor):
        raise ModelContractError(
            f"the model returned {type(out).__name__}, not a logits tensor: pass readout= to "
            "probed()"
        )
    if out.ndim == 2:
        return out
    if out.ndim == 3:
        return out[:, -1, : getattr(batch, "n_labels", None)]
    raise ModelContractError(
        f"the model returned logits of shape {tuple(out.shape)}: expected [batch, L] or "
        "[batch, pos, vocab]; pass readout= to probed()"
    )


@dataclass
class ProbedModel:
    """A model as the probes, the measures and the explorer use it (see the module docstring).

    Attributes:
        module: the model (has ``hook_dict``, ``run_with_cache``, ``run_with_hooks``).
        n_layers: layers with an attention-pattern hook ``blocks.{l}.attn.hook_pattern``.
        feed: ``feed(batch) -> tuple`` of the forward's positional arguments.
        readout: ``readout(output, batch) -> [batch, L]`` logits of the query token.
        feeds: what ``feed`` passes, in words (for error messages).
        tokens: ``"ids"`` when the model embeds token ids (``batch.tokens`` ``[batch, pos]``
            integers), ``"vectors"`` for content vectors ``[batch, pos, D]``, ``None`` if either.
    """

    module: nn.Module
    n_layers: int
    feed: Callable[[Any], tuple]
    readout: Callable[[Tensor, Any], Tensor] = _label_logits
    feeds: str = "batch.tokens"
    tokens: str | None = None

    @property
    def hook_names(self) -> frozenset[str]:
        return frozenset(self.module.hook_dict)

    @property
    def pattern_hooks(self) -> list[str]:
        return [pattern_hook(layer) for layer in range(self.n_layers)]

    def pattern_hook(self, layer: int) -> str:
        return pattern_hook(layer)

    @property
    def name(self) -> str:
        return _name(self.module)

    def hooks_active(self) -> bool:
        """Whether any hook point has a forward hook (an intervention, an ablation)."""
        return any(getattr(hp, "_forward_hooks", None) for hp in self.module.hook_dict.values())

    def missing_hooks(self, reads: Iterable[str]) -> list[str]:
        have = self.hook_names
        return [h for h in reads if h not in have]

    def check(self, reads: Sequence[str] = (), batch=None) -> None:
        """Raise a one-line :class:`ModelContractError` if a hook in ``reads`` is missing or
        ``batch`` is not what the model is fed (token ids or content vectors)."""
        missing = self.missing_hooks(reads)
        if missing:
            raise ModelContractError(
                f"{self.name} ({self.n_layers} layers with attention-pattern hooks) has no hook "
                f"{missing}"
            )
        if batch is None:
            return
        tokens = batch.tokens
        ids = not torch.is_floating_point(tokens) and tokens.ndim == 2
        if self.tokens == "ids" and not ids:
            raise ModelContractError(
                f"{self.name} embeds token ids but batch.tokens is {tokens.dtype} "
                f"{list(tokens.shape)} (the vector task): feed it a batch of the token task "
                "(interp.data.token_task.TokenTaskGenerator)"
            )
        if self.tokens == "vectors" and ids:
            raise ModelContractError(
                f"{self.name} takes content vectors [batch, pos, D] but batch.tokens holds token "
                f"ids {list(tokens.shape)}: feed it a batch of interp.data.task.TaskGenerator"
            )
        if self.tokens == "ids":
            cfg = getattr(self.module, "cfg", None)
            d_vocab, n_ctx = getattr(cfg, "d_vocab", None), getattr(cfg, "n_ctx", None)
            if d_vocab is not None and len(tokens) and int(tokens.max()) >= d_vocab:
                raise ModelContractError(
                    f"{self.name} has d_vocab={d_vocab} but the batch uses token id "
                    f"{int(tokens.max())}: build it with the task's d_vocab"
                )
            if n_ctx is not None and tokens.shape[1] > n_ctx:
                raise ModelContractError(
                    f"{self.name} has n_ctx={n_ctx} but the sequences have {tokens.shape[1]} "
                    "tokens: build it with n_ctx >= the task's seq_len"
                )

    def _call(self, fn, batch, **kwargs):
        try:
            return fn(*self.feed(batch), **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError) as err:
            if isinstance(err, ModelContractError):
                raise
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ModelContractError(
                f"{self.name} could not be fed {self.feeds}: {first} (pass feed= to "
                "interp.analysis.hooked.probed)"
            ) from None

    def _logits(self, out: Tensor, batch) -> Tensor:
        logits = self.readout(out, batch)
        if logits.ndim != 2 or logits.shape[0] != len(batch):
            raise ModelContractError(
                f"{self.name}'s readout gave logits of shape {tuple(logits.shape)}, not "
                f"[batch={len(batch)}, L]: pass readout= to interp.analysis.hooked.probed"
            )
        return logits

    def logits(self, batch) -> Tensor:
        """``[batch, L]`` logits of the query token."""
        return self._logits(self._call(self.module, batch), batch)

    def run_with_cache(self, batch, names_filter=None) -> tuple[Tensor, Any]:
        """Logits ``[batch, L]`` and the cache (a TransformerLens ``ActivationCache``)."""
        out, cache = self._call(self.module.run_with_cache, batch, names_filter=names_filter)
        return self._logits(out, batch), cache

    def run_with_hooks(self, batch, fwd_hooks=()) -> Tensor:
        """Logits ``[batch, L]`` with the forward hooks ``[(hook name, fn)]`` applied."""
        out = self._call(self.module.run_with_hooks, batch, fwd_hooks=list(fwd_hooks))
        return self._logits(out, batch)

    def patterns(self, cache, batch) -> list[Tensor]:
        """The attention patterns of every layer from ``cache``, each checked to be
        ``[batch, head_index, query_pos, key_pos]`` over the batch's tokens."""
        n_pos = batch.tokens.shape[1]
        out = []
        for hook in self.pattern_hooks:
            p = cache[hook]
            if p.ndim != 4 or p.shape[0] != len(batch) or tuple(p.shape[2:]) != (n_pos, n_pos):
                raise ModelContractError(
                    f"{self.name}'s {hook} has shape {tuple(p.shape)}, not [batch={len(batch)}, "
                    f"head_index, query_pos={n_pos}, key_pos={n_pos}]"
                )
            out.append(p)
        return out


def probed(
    model: Any,
    *,
    feed: Callable[[Any], tuple] | None = None,
    readout: Callable[[Tensor, Any], Tensor] | None = None,
) -> ProbedModel:
    """``model`` as the probes use it; a :class:`ProbedModel` is returned as it is.

    Args:
        model: this toolkit's network, a TransformerLens ``HookedRootModule`` with TL hook names,
            or a ``TransformerBridge``.
        feed: how to pass a batch to the forward (default: a bridge gets ``batch.tokens``, token
            ids; a ``HookedRootModule`` whose forward takes two positional arguments gets
            ``(batch.tokens, batch.positions)``, one taking one gets ``batch.tokens``).
        readout: how to read ``[batch, L]`` query logits from the output (default: ``[batch, L]``
            as is; ``[batch, pos, vocab]``: the last position's logits over the label ids
            ``0 .. n_labels - 1`` of a token batch).

    Raises:
        ModelContractError: one line naming what is missing: no ``hook_dict`` or
            ``run_with_cache`` (not a hooked model), or no attention-pattern hooks.
    """
    if isinstance(model, ProbedModel):
        return model
    missing = [
        a for a in ("hook_dict", "run_with_cache", "run_with_hooks") if not hasattr(model, a)
    ]
    if missing:
        raise ModelContractError(
            f"{_name(model)} cannot be probed: it has no {', '.join(missing)} (the probes need a "
            "TransformerLens HookedRootModule or TransformerBridge with attention-pattern hooks "
            "blocks.{l}.attn.hook_pattern)"
        )
    n_layers = _n_pattern_layers(model.hook_dict)
    if n_layers == 0:
        raise ModelContractError(
            f"{_name(model)} has no attention-pattern hook blocks.0.attn.hook_pattern (the probes "
            "read blocks.{l}.attn.hook_pattern [batch, head_index, query_pos, key_pos])"
        )
    tokens = None
    if feed is not None:
        feeds = "the batch through feed="
    elif is_bridge(model):
        feed, feeds, tokens = (lambda b: (b.tokens,)), "batch.tokens (token ids)", "ids"
    elif _positional_arity(model) == 1:
        feed, feeds = (lambda b: (b.tokens,)), "batch.tokens"
    else:
        feed, feeds = (lambda b: (b.tokens, b.positions)), "(batch.tokens, batch.positions)"
    from interp.model.network import InductionNet

    if tokens is None and isinstance(model, InductionNet):
        tokens = "vectors"
    return ProbedModel(
        module=model,
        n_layers=n_layers,
        feed=feed,
        readout=readout or _label_logits,
        feeds=feeds,
        tokens=tokens,
    )
