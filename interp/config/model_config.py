"""The model's config (:class:`ModelConfig`): the shape and parts of the paper's network,
validated without torch, so that a command that only reads or builds configs (``forecast``,
``transition``) never imports it nor TransformerLens. The network itself is
:mod:`interp.model.network`, which re-exports the class; the encodings' rules come from
:mod:`interp.config.positional`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, no_type_check

from interp.config.positional import get_positional, positional_config, positional_parameters

if TYPE_CHECKING:
    from interp.config.task_config import TaskConfig

__all__ = [
    "ATTN_SCALES",
    "READOUT_INITS",
    "HIDDEN_BIASES",
    "MAX_LAYERS",
    "ModelConfig",
    "canonical_model_dict",
]

# Attention score scales (:func:`interp.model.attention.attention_scale`).
ATTN_SCALES = ("none", "sqrt", "log_n")

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
