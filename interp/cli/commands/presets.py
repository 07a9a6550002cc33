"""``induction-cliff presets``: the presets and how each departs from the paper."""

from __future__ import annotations

NAME = "presets"
HELP = "list the presets with their deviations from the paper"
EPILOG = """\
example:
  induction-cliff presets
"""


def add_arguments(p) -> None:
    pass


def preset_lines() -> list[str]:
    from interp.train.presets import PRESETS

    width = max(map(len, PRESETS))
    lines = []
    for name, preset in PRESETS.items():
        lines.append(f"{name:{width}s} {preset.note}")
        if preset.grid:
            axes = " x ".join(f"{k} in {list(v)}" for k, v in preset.grid.items())
            lines.append(f"{'':{width}s}   sweep: {axes}; seeds {list(preset.seeds)}")
    return lines


def run(args) -> int:
    print("\n".join(preset_lines()))
    return 0
