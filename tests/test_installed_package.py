"""The package as a user installs it: a wheel built from this checkout, installed into a fresh
virtualenv, used from an empty folder (no checkout on the path).

The fresh virtualenv sees this environment's packages (torch, plotly, ...) through a .pth line,
so nothing is downloaded; the wheel itself is installed with ``--no-deps --no-index``.
"""

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT_VERSION = re.search(
    r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE
).group(1)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _run(argv, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict]:
    """(the fresh virtualenv's bin folder, an environment without this checkout on its path)."""
    tmp = tmp_path_factory.mktemp("installed")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp / "dist"), str(ROOT)],
        tmp,
        env,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("induction_cliff-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = _run([str(python), "-c", where], tmp, env)
    (Path(purelib.stdout.strip()) / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    done = _run([*pip, "--no-deps", "--no-index", str(wheel)], tmp, env)
    assert done.returncode == 0, done.stderr
    return venv / "bin", env


def test_from_an_empty_folder_the_notebooks_and_the_demo_are_there(installed, tmp_path):
    bin_dir, env = installed
    here = tmp_path / "empty"
    here.mkdir()
    cli = str(bin_dir / "induction-cliff")
    imported = _run(
        [str(bin_dir / "python"), "-c", "import interp; print(interp.__file__)"], here, env
    )
    assert Path(imported.stdout.strip()).is_relative_to(bin_dir.parent)  # the wheel, no checkout
    version = _run(
        [str(bin_dir / "python"), "-c", "import interp; print(interp.__version__)"], here, env
    )
    assert version.stdout.strip() == PYPROJECT_VERSION

    copied = _run([cli, "notebooks", "nb"], here, env)
    assert copied.returncode == 0, copied.stderr
    got = sorted((here / "nb").iterdir())
    assert [p.name for p in got] == [p.name for p in NOTEBOOKS] and len(got) == 5
    for mine, theirs in zip(got, NOTEBOOKS, strict=True):
        assert mine.read_bytes() == theirs.read_bytes()
    again = _run([cli, "notebooks", "nb"], here, env)
    assert again.returncode == 2
    assert again.stderr.startswith("error: would overwrite nb/01_attention_maps.py, ")
    assert "Traceback" not in again.stderr

    demo = _run([cli, "demo", "--help"], here, env)
    assert demo.returncode == 0 and "--out DIR" in demo.stdout


PLUGIN = """
from interp.experiments import Column, Experiment, Sweep, Tier, register_experiment

register_experiment(Experiment(
    name="mine", title="Mine", question="Does my own experiment list without a checkout?",
    tiers={t: Tier(sweeps=(Sweep(preset="tiny"),), cost="a minute") for t in ("quick", "full")},
    columns=(Column(key="ic_acc", header="IC accuracy"),),
))
"""


def test_the_project_experiments_need_a_checkout_and_say_so(installed, tmp_path):
    """The wheel holds no ``experiments`` package (the project's own experiments are a folder of
    the checkout): ``reproduce`` and ``list experiments`` say in one line what they need and how
    to get it, before any work; a plugin's own experiment is listed all the same."""
    bin_dir, env = installed
    cli = str(bin_dir / "induction-cliff")
    find = "import importlib.util as u; print(u.find_spec('experiments'))"
    assert _run([str(bin_dir / "python"), "-c", find], tmp_path, env).stdout.strip() == "None"
    for argv in (
        ["reproduce", "all", "--render-only"],
        ["reproduce", "demo", "--tier", "quick"],
        ["list", "experiments"],
        ["list", "experiments", "--markdown"],
    ):
        got = _run([cli, *argv], tmp_path, env)
        assert got.returncode == 2, (argv, got.stderr)
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, got.stderr)
        assert "needs a checkout of the repository" in lines[0], lines[0]
        assert "pip install -e ." in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written

    (tmp_path / "mine.py").write_text(PLUGIN)
    listed = _run(
        [cli, "--plugin", str(tmp_path / "mine.py"), "list", "experiments"], tmp_path, env
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[0] == "mine"
    unknown = _run([cli, "--plugin", "mine.py", "reproduce", "demo"], tmp_path, env)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith(
        "error: experiment='demo' is invalid: registered experiments are"
    )
    assert "experiments/ of a checkout" in unknown.stderr and "pip install -e ." in unknown.stderr


def test_the_forecast_from_the_wheel_is_the_checkouts(installed, tmp_path):
    """``forecast`` reads only tables that ship with the package (the transition law and the
    collapse rates): installed, it says what a checkout says, collapse risk included."""
    bin_dir, env = installed
    argv = ["forecast", "--preset", "paper-fig3"]
    wheel = _run([str(bin_dir / "induction-cliff"), *argv], tmp_path, env)
    checkout = _run(
        [sys.executable, "-m", "interp.cli", *argv], ROOT, {**env, "PYTHONPATH": str(ROOT)}
    )
    assert wheel.returncode == checkout.returncode == 0, wheel.stderr + checkout.stderr
    assert "runs died" in checkout.stdout and "unmeasured" not in checkout.stdout
    assert (wheel.stdout, wheel.stderr) == (checkout.stdout, checkout.stderr)
