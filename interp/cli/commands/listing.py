"""``induction-cliff list``: what a registry holds, plugins included."""

from __future__ import annotations

NAME = "list"
HELP = "list a registry (with the plugins given by --plugin)"
EPILOG = """\
examples:
  induction-cliff list measures
  induction-cliff --plugin my_measure.py list measures
"""


def _first_line(obj) -> str:
    return ((getattr(obj, "__doc__", None) or "").strip().splitlines() or [""])[0]


def _measures() -> list[str]:
    from interp.analysis.measures import MEASURES

    width = max(map(len, MEASURES))
    lines = []
    for name, m in MEASURES.items():
        reads = ", ".join(m.reads) or "logits"
        fit = f"; fitted as {m.fit_quantity} ({m.fit_map})" if m.fit_quantity else ""
        lines.append(f"{name:{width}s} {m.direction:7s} {m.label} - {m.description}")
        lines.append(f"{'':{width}s}         reads {reads}{fit}; from {m.source}")
    return lines


def _positional() -> list[str]:
    from interp.model.positional import POSITIONAL_ENCODINGS

    if isinstance(POSITIONAL_ENCODINGS, dict):
        return [f"{name:10s} {_first_line(obj)}" for name, obj in POSITIONAL_ENCODINGS.items()]
    return list(POSITIONAL_ENCODINGS)


def _dynamics_models() -> dict[str, object]:
    """The dynamics models ``induction-cliff fit`` can fit (``phenomenology.MODELS`` where it
    exists)."""
    import phenomenology

    registry = getattr(phenomenology, "MODELS", None)
    if registry is not None:
        return dict(registry)
    from phenomenology.fit import NestedLogitFit

    return {"nested-logit": NestedLogitFit}


def _models() -> list[str]:
    return [f"{name:14s} {_first_line(obj)}" for name, obj in _dynamics_models().items()]


def _interventions() -> list[str]:
    from interp.model.interventions import INTERVENTIONS

    return [
        f"{name:18s} layer {layer + 1}: {_first_line(fn)}"
        for name, (layer, fn) in INTERVENTIONS.items()
    ]


def _presets() -> list[str]:
    from interp.cli.commands.presets import preset_lines

    return preset_lines()


# registry name -> the lines that list it
REGISTRIES = {
    "measures": _measures,
    "positional": _positional,
    "models": _models,
    "presets": _presets,
    "interventions": _interventions,
}


def add_arguments(p) -> None:
    p.add_argument("registry", choices=tuple(REGISTRIES), metavar="REGISTRY",
                   help=f"one of: {', '.join(REGISTRIES)}")  # fmt: skip


def run(args) -> int:
    print("\n".join(REGISTRIES[args.registry]()))
    return 0
