"""``induction-cliff list``: what a registry holds, plugins included."""

from __future__ import annotations

NAME = "list"
HELP = "list a registry (with the plugins given by --plugin)"
EPILOG = """\
examples:
  induction-cliff list measures
  induction-cliff list experiments --markdown
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


def _models() -> list[str]:
    """Every registered dynamics model (:mod:`phenomenology.models`), plugins' included."""
    from phenomenology.models import get_model, model_names

    lines = []
    for name in model_names():
        cls = get_model(name)
        lines.append(f"{name:14s} {cls.description or _first_line(cls)}")
    return lines


def _tasks() -> list[str]:
    """Every registered task (:mod:`interp.data.tasks`), plugins' included."""
    from interp.data.tasks import TASKS

    width = max(map(len, TASKS))
    lines = []
    for name, t in TASKS.items():
        applies = "every measure" if t.measures is None else (", ".join(t.measures) or "none")
        lines.append(f"{name:{width}s} {t.description}")
        lines.append(
            f"{'':{width}s}   config {t.config.__name__}, layout {t.layout}, sets "
            f"{', '.join(t.eval_sets)}; measures: {applies}; from {t.source}"
        )
    return lines


def _experiments() -> list[str]:
    from interp.experiments import EXPERIMENTS, require_catalogue

    require_catalogue("list experiments")

    width = max(map(len, EXPERIMENTS))
    lines = []
    for name, e in EXPERIMENTS.items():
        costs = ", ".join(f"{t} {tier.cost or '?'}" for t, tier in e.tiers.items())
        lines.append(f"{name:{width}s} {e.question}")
        lines.append(f"{'':{width}s}   {costs}")
    return lines


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
    "tasks": _tasks,
    "presets": _presets,
    "interventions": _interventions,
    "experiments": _experiments,
}


def add_arguments(p) -> None:
    p.add_argument(
        "registry",
        choices=tuple(REGISTRIES),
        metavar="REGISTRY",
        help=f"one of: {', '.join(REGISTRIES)}",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="experiments: the README's table (question, headline result from each CSV, link)",
    )


def run(args) -> int:
    if args.markdown:
        if args.registry != "experiments":
            raise ValueError("--markdown is for `list experiments` only")
        from interp.experiments import experiments_table, require_catalogue

        require_catalogue("list experiments")
        print(experiments_table())
        return 0
    print("\n".join(REGISTRIES[args.registry]()))
    return 0
