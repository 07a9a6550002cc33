"""An experiment from a plugin file: docs/contributing.md's example is the executed fixture."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "extra_experiment.py"


def test_the_doc_example_is_the_fixture():
    text = (ROOT / "docs" / "contributing.md").read_text()
    section = text[text.index("## Add an experiment") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks and blocks[0] == FIXTURE.read_text()


def test_a_plugin_experiment_is_listed_and_unknown_without_the_plugin(tmp_path):
    run = [sys.executable, "-m", "interp.cli"]
    out = subprocess.run(
        [*run, "--plugin", str(FIXTURE), "list", "experiments"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "tiny-k" in out.stdout and "twice the classes" in out.stdout
    plain = subprocess.run(
        [*run, "reproduce", "tiny-k", "--render-only", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert plain.returncode == 2 and "experiment='tiny-k' is invalid" in plain.stderr
