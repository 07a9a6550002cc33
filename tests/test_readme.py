"""The README: short, its commands first, its experiments table generated, its links alive, and
(slow) its worked examples run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interp.experiments import experiments_table, load_catalogue, results_index
from interp.experiments.core import RESULTS_DIR

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TABLE = re.compile(r"<!-- experiments table -->\n(.*?)<!-- end of experiments table -->", re.S)
assert load_catalogue()  # the checkout's experiments/ (the declared experiments)


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = README.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)"
    assert lines[2] == "```bash"
    assert lines[3].startswith("bash scripts/demo.sh") and lines[4].startswith(
        "bash scripts/test.sh"
    )
    for script in ("scripts/demo.sh", "scripts/test.sh", "scripts/notebooks.sh"):
        assert (ROOT / script).exists()


def test_the_experiments_tables_are_generated():
    found = TABLE.search(README)
    assert found, "README.md lost its experiments table markers"
    assert found.group(1).strip() == experiments_table().strip(), (
        "README's experiments table is stale: paste `induction-cliff list experiments --markdown`"
    )
    assert (RESULTS_DIR / "README.md").read_text() == results_index(), (
        "docs/results/README.md is stale: `induction-cliff reproduce all --render-only`"
    )


def test_the_readmes_links_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def _examples() -> list[tuple[str, str]]:
    return re.findall(r"<!-- example -->\n```(bash|python)\n(.*?)```", README, re.S)


def test_the_worked_examples_are_marked():
    kinds = [k for k, _ in _examples()]
    assert kinds.count("bash") >= 3 and kinds.count("python") >= 3


@pytest.mark.slow
def test_the_worked_examples_run_as_written(tmp_path):
    """The examples in order, in a fresh folder whose runs/demo is a tiny run with a plateau and a
    jump (the demo itself takes minutes; its paths and commands are the same)."""
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }
    train = [
        sys.executable,
        "-m",
        "interp.cli",
        "train",
        "--preset",
        "tiny",
        "--set",
        "steps=600",
        "--set",
        "eval_every=25",
        "--set",
        "num_threads=1",
        "--quiet",
        "--out",
        "runs/demo",
    ]
    subprocess.run(train, cwd=tmp_path, env=env, check=True, capture_output=True)
    if shutil.which("induction-cliff", path=env["PATH"]) is None:
        pytest.skip("the induction-cliff command is not installed")
    for kind, code in _examples():
        cmd = (
            ["bash", "-euo", "pipefail", "-c", code]
            if kind == "bash"
            else [sys.executable, "-c", code]
        )
        out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, f"{kind} example failed:\n{code}\n{out.stderr[-2000:]}"
    assert (tmp_path / "runs" / "my_curve.fit.json").exists()
    assert not list(tmp_path.glob("my_curve*"))  # nothing left in the folder the user is in
    assert any((tmp_path / "runs" / "paper-figures").glob("dynamics.*"))
