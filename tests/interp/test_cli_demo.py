"""``induction-cliff demo`` and ``induction-cliff notebooks``: what they run, what they refuse."""

import os
import subprocess
import sys
from pathlib import Path

from interp.cli import make_parser
from interp.cli.commands import demo

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_what_scripts_demo_sh_runs_after_setup():
    """Every command the demo runs parses, and they are the script's, in its order."""
    parser = make_parser()
    argvs = demo.steps("runs/demo", True, "pdf,png")
    for argv in argvs:
        assert parser.parse_args(argv).func
    script = (ROOT / "scripts" / "demo.sh").read_text()
    called = [
        line.split("induction-cliff ", 1)[1].split()[0]
        for line in script.splitlines()
        if line.startswith(".venv/bin/induction-cliff ")
    ]
    assert (
        [argv[0] for argv in argvs]
        == called
        == [
            "train",
            "transition",
            "fit",
            "figures",
            "report",
        ]
    )
    assert argvs[0] == ["train", "--preset", "demo", "--out", "runs/demo", "--overwrite"]


def _cli(*argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "interp.cli", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_demo_refuses_a_folder_holding_a_run_before_any_work(tmp_path):
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "config.json").write_text("{}")
    out = _cli("demo", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == (
        "error: --out runs/demo: holds a run already; give --overwrite to train again\n"
    )
    assert out.stdout == ""


def test_notebooks_copies_every_notebook_once_and_never_overwrites(tmp_path):
    first = _cli("notebooks", "nb", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    names = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert sorted(p.name for p in (tmp_path / "nb").iterdir()) == names
    (tmp_path / "nb" / names[1]).write_text("# my edits\n")
    again = _cli("notebooks", "nb", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.startswith(f"error: would overwrite nb/{names[0]}, nb/{names[1]}, ")
    assert (tmp_path / "nb" / names[1]).read_text() == "# my edits\n"  # untouched
