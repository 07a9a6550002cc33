"""The positional encodings' registry and what a config needs of an encoding, without torch.

:data:`POSITIONAL_ENCODINGS` maps a name (``ModelConfig.positional``) to its encoding. What
validating a :class:`~interp.config.model_config.ModelConfig` asks of an encoding lives here, in
:class:`EncodingRules`: its name, its parameters' frozen config dataclass (``config_class``:
:class:`RopeConfig`, :class:`CopeConfig`), ``residual_width`` (the residual width it produces),
``check_model_config`` (extra rules on the model) and ``supports_rescaling``. The built-in
encodings are declared here by their rules (``onehot``, ``learned``, ``none``, ``rope``,
``cope``); :mod:`interp.model.positional` holds the torch modules that implement them, each a
subclass of its rules, and registering one replaces its rules' entry (an implementation of the
declared rules is the same encoding). So a command that only builds or reads configs validates
every built-in encoding without importing torch; building a network imports
:mod:`interp.model.positional`, and an encoding from a plugin is registered with
:func:`interp.model.positional.register_positional`, as a torch module from the start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, no_type_check

from interp.registry import Registry

__all__ = [
    "EncodingRules",
    "POSITIONAL_ENCODINGS",
    "ROPE_SCALINGS",
    "RopeConfig",
    "CopeConfig",
    "declare_positional",
    "get_positional",
    "positional_config",
    "positional_parameters",
]


class EncodingRules:
    """What a config asks of a positional encoding; the base of every encoding
    (:class:`interp.model.positional.PositionalEncoding` is a torch module and a subclass).

    :func:`declare_positional` sets the class attributes ``name``, ``config_class`` and
    ``description``. Defaults: the residual holds the content alone, no extra rule on the model,
    no eval-time rescaling.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type | None] = None
    description: ClassVar[str] = ""
    #: whether :func:`interp.analysis.length.rescale_rope` may call ``set_scaling`` on it (RoPE).
    supports_rescaling: ClassVar[bool] = False

    @classmethod
    def residual_width(cls, d_content: int, n_positions: int, config: Any) -> int:
        """Residual width for ``d_content`` content dimensions (no encoding is built for it)."""
        return d_content

    @classmethod
    def check_model_config(cls, model_config) -> None:
        """Raise ``ValueError`` naming the field if ``model_config`` cannot use this encoding."""


def _same_class(old: type, new: type) -> bool:
    """A class declared again by the same module (a module imported twice) is no conflict."""
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__)


def _same_encoding(old: type, new: type) -> bool:
    """The same class again, or the implementation of a built-in's declared rules (a subclass of
    them) replacing the rules."""
    return _same_class(old, new) or (old in _BUILT_IN_RULES and issubclass(new, old))


#: name -> encoding class, in registration order (``--set positional=NAME``).
POSITIONAL_ENCODINGS: Registry[type[EncodingRules]] = Registry(
    "positional encoding",
    field="positional",
    entry="PositionalEncoding",
    pattern=r"^[a-z][a-z0-9]*$",
    pattern_says="lowercase letters and digits",
    hint="(an encoding from a plugin needs --plugin PATH_OR_MODULE)",
    same=_same_encoding,
)


def declare_positional(
    name: str,
    cls: type,
    *,
    config: type | None = None,
    description: str | None = None,
    base: type = EncodingRules,
) -> type:
    """Register ``cls`` (a subclass of ``base``) as the encoding ``name``, with its parameters'
    frozen config dataclass ``config`` (None: no parameters) and its one-line ``description``
    (default: the docstring's first line). The checks of
    :func:`interp.model.positional.register_positional`, which calls this.

    Raises:
        ValueError: one line naming the registration's fault.
    """
    POSITIONAL_ENCODINGS.check_name(name)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(
            f"register_positional({name!r}): {cls!r} is not a {base.__name__} subclass"
        )
    if config is not None:
        params = getattr(config, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise ValueError(
                f"register_positional({name!r}): config={config!r} must be a frozen dataclass"
            )
        missing = [
            f.name
            for f in dataclasses.fields(config)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(
                f"register_positional({name!r}): config fields {missing} need defaults"
            )
    old = POSITIONAL_ENCODINGS.get(name)
    if old is not None and not _same_encoding(old, cls):
        raise POSITIONAL_ENCODINGS.taken(name, f"{old.__module__}.{old.__qualname__}")
    cls.name = name
    cls.config_class = config
    doc = (cls.__doc__ or "").strip().splitlines()
    cls.description = description or (doc[0] if doc else "")
    return POSITIONAL_ENCODINGS.declare(name, cls)


def get_positional(name: str) -> type[EncodingRules]:
    """The encoding class registered as ``name`` (a built-in's rules until
    :mod:`interp.model.positional`, which builds it, is imported)."""
    return POSITIONAL_ENCODINGS.require(name)


def positional_config(name: str, values: Any = None) -> Any:
    """Encoding ``name``'s config from ``values`` (None: its defaults; a mapping of its fields; or
    an instance of its config class). None for encodings without parameters.

    Raises:
        ValueError: naming the field, if ``values`` has an unknown or invalid field.
    """
    cls = get_positional(name)
    config_class = cls.config_class
    if config_class is None:
        if values not in (None, {}):
            raise ValueError(
                f"ModelConfig.positional_config={values!r} is invalid: positional={name!r} has "
                "no parameters"
            )
        return None
    if isinstance(values, config_class):
        return values
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ValueError(
            f"ModelConfig.positional_config={values!r} is invalid: positional={name!r} needs a "
            f"{config_class.__name__} or a mapping of its fields"
        )
    allowed = [f.name for f in dataclasses.fields(config_class)]
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(
            f"ModelConfig.positional_config field(s) {unknown} are unknown for positional="
            f"{name!r}: {config_class.__name__} has {allowed}"
        )
    return config_class(**values)


def positional_parameters() -> dict[str, tuple[str, str, Any]]:
    """The flat spelling of every registered encoding's parameters:
    ``{"rope_base": ("rope", "base", 10000.0), "cope_p_max": ("cope", "p_max", 64), ...}``
    (flat name -> encoding, field, default)."""
    out = {}
    for enc_name, cls in POSITIONAL_ENCODINGS.items():
        if cls.config_class is None:
            continue
        for f in dataclasses.fields(cls.config_class):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            out[f"{enc_name}_{f.name}"] = (enc_name, f.name, default)
    return out


# --------------------------------------------------------------------------------------------
# the built-in encodings' rules and parameters


ROPE_SCALINGS = ("none", "pi", "ntk", "mixed")


# Self-validating: __post_init__ gives the one-line error that names the field; the test run's
# runtime type checker (jaxtyping's hook) would pre-empt it with a traceback, so it skips this
# class.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class RopeConfig:
    """Parameters of ``rope`` (flat spelling ``rope_base``, ``rope_scaling``, ...).

    Attributes:
        base: RoPE base (``theta_i = base^(-2i/d_head)``). Source: toolkit (the usual RoPE
            base).
        scaling: length rescaling, one of ``none``, ``pi`` (interpolation), ``ntk`` (NTK-aware),
            ``mixed`` (Su's mixed base); usually changed at evaluation time only
            (:meth:`Rotary.set_scaling`). Source: toolkit.
        scale: the rescaling's length ratio ``s``. Source: toolkit.
        mix_b: exponent ``b`` of the ``mixed`` rescaling (1: NTK-aware, 0: interpolation).
            Source: toolkit.
        constant_dim: append one residual dimension that is 1 at every token (``d_model = D + 1``),
            so that ``W_Q`` and ``W_K`` can learn a query/key bias through their weights: the
            control for ``qk_bias``. The paper has none. Source: toolkit.
    """

    base: float | int = 10000.0
    scaling: str = "none"
    scale: float | int = 1.0
    mix_b: float | int = 0.5
    constant_dim: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.constant_dim, bool):
            raise ValueError(
                f"RopeConfig.constant_dim={self.constant_dim!r} (rope_constant_dim) is invalid: "
                "true or false"
            )
        for name in ("base", "scale", "mix_b"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"RopeConfig.{name}={value!r} (rope_{name}) is invalid: a number")
            object.__setattr__(self, name, float(value))  # 500 from JSON is 500.0 from here on
        if self.scaling not in ROPE_SCALINGS:
            raise ValueError(
                f"RopeConfig.scaling={self.scaling!r} (rope_scaling) is invalid: allowed values "
                f"are {ROPE_SCALINGS}"
            )
        if not self.base > 1:
            raise ValueError(f"RopeConfig.base={self.base!r} (rope_base) is invalid: must be > 1")
        if not self.scale > 0:
            raise ValueError(
                f"RopeConfig.scale={self.scale!r} (rope_scale) is invalid: must be > 0"
            )
        if not self.mix_b >= 0:
            raise ValueError(
                f"RopeConfig.mix_b={self.mix_b!r} (rope_mix_b) is invalid: must be >= 0"
            )


# Self-validating: __post_init__ gives the one-line error that names the field; the test run's
# runtime type checker (jaxtyping's hook) would pre-empt it with a traceback, so it skips this
# class.
@no_type_check
@dataclass(frozen=True, kw_only=True)
class CopeConfig:
    """Parameters of ``cope`` (flat spelling ``cope_p_max``).

    Attributes:
        p_max: largest contextual position (positions clip there). Source: toolkit.
    """

    p_max: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.p_max, bool) or not (isinstance(self.p_max, int) and self.p_max >= 1):
            raise ValueError(
                f"CopeConfig.p_max={self.p_max!r} (cope_p_max) is invalid: an integer >= 1"
            )


class NoPositionsRules(EncodingRules):
    """No positional information at all (control)."""


class OneHotRules(EncodingRules):
    """The paper's encoding: a one-hot of the absolute position, concatenated to the content."""

    @classmethod
    def residual_width(cls, d_content: int, n_positions: int, config: Any) -> int:
        return d_content + n_positions


class LearnedRules(EncodingRules):
    """Learned absolute position vectors added to the content (``d_model = D``)."""


class RotaryRules(EncodingRules):
    """RoPE on queries and keys. Nothing enters the residual stream (``d_model = D``)."""

    supports_rescaling = True

    @classmethod
    def residual_width(cls, d_content: int, n_positions: int, config: Any) -> int:
        return d_content + int(config is not None and config.constant_dim)

    @classmethod
    def check_model_config(cls, model_config) -> None:
        if model_config.d_head_effective % 2:
            raise ValueError(
                f"ModelConfig.d_head={model_config.d_head!r} is invalid for positional='rope': "
                f"the head width ({model_config.d_head_effective}) must be even; set d_head "
                "(e.g. d_head=64)"
            )


class ContextualRules(EncodingRules):
    """CoPE: nothing in the residual (``d_model = D``); each attention layer owns a table."""


_BUILT_IN_RULES = (OneHotRules, LearnedRules, NoPositionsRules, RotaryRules, ContextualRules)

declare_positional("onehot", OneHotRules)
declare_positional("learned", LearnedRules)
declare_positional("none", NoPositionsRules)
declare_positional("rope", RotaryRules, config=RopeConfig)
declare_positional("cope", ContextualRules, config=CopeConfig)
