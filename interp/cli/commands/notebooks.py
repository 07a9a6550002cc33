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
    import os
    from pathlib import Path

    from interp.io.atomic import write_bytes_atomic
    from interp.io.paths import check_output_path

    out = Path(args.dir)
    check_output_path(out)  # a link (dangling or not): nothing written
    if out.exists() and not out.is_dir():
        raise ValueError(f"PATH {out}: a file, not a folder")
    sources = notebook_files()
    if not sources:
        raise ValueError("this installation has no notebooks (interp/_notebooks is empty)")
    for f in sources:  # a dangling one too: writing through it would create a file elsewhere
        check_output_path(out / f.name)
    there = [str(out / f.name) for f in sources if os.path.lexists(out / f.name)]
    if there:
        raise ValueError(f"would overwrite {', '.join(there)}: remove them or choose another PATH")
    for f in sources:
        write_bytes_atomic(out / f.name, f.read_bytes())
        print(f"wrote {out / f.name}")
    return 0
