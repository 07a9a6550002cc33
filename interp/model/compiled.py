"""The fast training loss, compiled with ``torch.compile`` (``TrainConfig.backend="compiled"``).

The fast path (:mod:`interp.model.fast`) is a few dozen small operations per step, and at the
paper's sizes each one's fixed cost (dispatch, a pass over memory, its autograd node) is a large
part of the step. Inductor fuses the elementwise ones into a few generated C++ loops, forward and
backward, for a faster step on one CPU thread (``benchmarks/bench_train.py`` prints
``compiled/fast``; the matrix products, most of the step, are the same).
It computes the same function, equal to float rounding (``tests/interp/test_compiled.py``); a run
is bit-identical to itself when resumed, not to the ``fast`` run of its seed.

What stays outside the compiled region, eagerly at every step: layer 1's input (the tokens and their
one-hot positions, which do not depend on the weights) with its data-dependent checks (positions
past the one-hot table), whether ``W_O`` is the identity, and the cached causal masks, so the
traced function has no graph break. Only the two-layer one-hot network of the fast path is compiled,
and only on the CPU (the device it is tested on); any other model or device takes the uncompiled
fast path (or the hooked one) as ``backend="fast"`` would.

Compiling takes 10-60 s of CPU at the first step. The compiler's artefacts are kept in a per-user
cache folder, so that the next process (another run, a sweep's next worker) with the same shapes
loads them in a few seconds instead (:func:`compile_cache_dir`): ``$XDG_CACHE_HOME/induction-cliff``
(``~/.cache/induction-cliff`` when ``XDG_CACHE_HOME`` is unset), moved by
``INDUCTION_CLIFF_CACHE=DIR``, turned off by ``INDUCTION_CLIFF_CACHE=off`` (then a temporary folder
removed when the process ends); a ``TORCHINDUCTOR_CACHE_DIR`` the user set is used as it is. On the
CPU it needs a C++ compiler: :func:`check_compiler` refuses up front without one.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

# Whether this machine compiles, and the compile cache, are judged without torch's compiler (a
# run's checks); importing them from here is the old path, kept.
from interp.config.compiler import (  # noqa: F401
    _INDUCTOR_ENV,
    CACHE_ENV,
    _own_cache_dir,
    _user_inductor_dir,
    check_compiler,
    compile_cache_dir,
    compiles_on,
)
from interp.model.fast import (
    _Inputs,
    _two_layer,
    causal_masks,
    output_is_identity,
    supports_fast_path,
)
from interp.model.network import InductionNet
from interp.model.positional import OneHotConcat

__all__ = [
    "CompiledLoss",
    "supports_compile",
    "check_compiler",
    "compiles_on",
    "compile_cache_dir",
    "CACHE_ENV",
]


def supports_compile(model: torch.nn.Module) -> bool:
    """Whether :class:`CompiledLoss` computes this model's loss (else the uncompiled paths do):
    the two-layer one-hot network of the fast path, on the CPU."""
    return (
        supports_fast_path(model)
        and len(model.blocks) == 2
        and isinstance(model.positional, OneHotConcat)
        and compiles_on(next(model.parameters()).device)
    )


@contextlib.contextmanager
def _shape_checks_off():
    """jaxtyping's runtime shape checks off (what the test run turns on, wrapping every function
    of :mod:`interp.model`): their wrappers cannot be traced, so inside the compiled call they are
    off, while tracing and while running (its guards read the flag). The uncompiled fast path
    keeps them."""
    from jaxtyping import config

    before = config.jaxtyping_disable
    config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        config.update("jaxtyping_disable", before)


def _loss(
    model: InductionNet,
    inp: _Inputs,
    target: Tensor,
    identity: tuple[bool, bool],
    masks: tuple[Tensor, Tensor],
) -> Tensor:
    logits = _two_layer(model, inp, None, identity=identity, masks=masks)[0]
    return F.cross_entropy(logits, target)


class CompiledLoss:
    """Cross-entropy of the query's label under ``model``, compiled on the first call.

    The model's parameters are read at every call (the optimiser updates the model itself), as by
    :func:`interp.model.fast.fast_logits`. A new input shape compiles again.
    """

    def __init__(self, model: InductionNet) -> None:
        if not supports_compile(model):
            raise ValueError("CompiledLoss needs the two-layer one-hot network of the fast path")
        _own_cache_dir()
        self.model = model
        self._fn = torch.compile(_loss, dynamic=False, fullgraph=True)

    def __call__(
        self,
        tokens: Float[Tensor, "batch pos d_content"],
        positions: Int[Tensor, "batch pos"],
        target: Int[Tensor, " batch"],
    ) -> Float[Tensor, ""]:
        model = self.model
        # Layer 1's input does not depend on the weights: built eagerly, with its checks.
        inp = _Inputs(model, tokens, positions)
        identity = tuple(output_is_identity(block.attn.W_O) for block in model.blocks)
        masks = causal_masks(tokens.shape[1], tokens.device)
        with _shape_checks_off():
            return self._fn(model, inp, target, identity, masks)
