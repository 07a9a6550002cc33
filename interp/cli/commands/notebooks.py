"""``induction-cliff notebooks``: copy the toolkit's notebooks into a folder, to open them."""

from __future__ import annotations

NAME = "notebooks"
HELP = "copy the notebooks (jupytext .py files that open as notebooks in JupyterLab) into PATH"
EPILOG = """\
example:
  induction-cliff notebooks nb      # then: jupyter lab nb (a .py opens as a notebook)
"""


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="PATH", help="folder to copy them into (made if missing)")


def notebook_files() -> list:
    """The notebooks shipped with the package (``interp/_notebooks``: in a checkout, a link to
    ``notebooks/``), in order."""
    from importlib.resources import files

    folder = files("interp") / "_notebooks"
    return sorted(
        (f for f in folder.iterdir() if f.name[:2].isdigit() and f.name.endswith(".py")),
        key=lambda f: f.name,
    )


def run(args) -> int:
    from pathlib import Path

    out = Path(args.dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"PATH {out}: a file, not a folder")
    sources = notebook_files()
    if not sources:
        raise ValueError("this installation has no notebooks (interp/_notebooks is empty)")
    there = [str(out / f.name) for f in sources if (out / f.name).exists()]
    if there:
        raise ValueError(f"would overwrite {', '.join(there)}: remove them or choose another PATH")
    out.mkdir(parents=True, exist_ok=True)
    for f in sources:
        (out / f.name).write_bytes(f.read_bytes())
        print(f"wrote {out / f.name}")
    return 0
