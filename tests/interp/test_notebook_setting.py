"""The notebooks reuse a finished run of their setting (runs/demo) instead of training it again."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interp.experiments.notebook_setting import NotebookSetting
from interp.experiments.standard import train
from interp.train.presets import get_preset
from tests.waits import HANG_S


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A tiny run trained to the end: (setting's preset, train config, model config, its path)."""
    from interp.model.network import ModelConfig

    preset = get_preset("tiny")
    cfg = dataclasses.replace(preset.train, steps=20, eval_every=10, n_log_checkpoints=0)
    model = ModelConfig.from_task(preset.task, **preset.model)
    path = tmp_path_factory.mktemp("demo") / "run"
    train(preset.task, model, cfg, path, progress=False)
    return preset, cfg, model, path


def _setting(finished, tmp_path, **train_changes):
    preset, cfg, model, path = finished
    return NotebookSetting(
        small=False,
        preset=preset,
        train=dataclasses.replace(cfg, **train_changes),
        model=model,
        runs=tmp_path / "notebook-runs",
        demo_run=path,
    )


def test_seed_0_reuses_the_finished_run_and_writes_nothing(finished, tmp_path):
    path = finished[3]
    before = sorted(p.name for p in path.rglob("*"))
    # how many threads trained it does not matter
    setting = _setting(finished, tmp_path, num_threads=2)
    assert setting.ensure_run(seed=0) == path
    assert not (tmp_path / "notebook-runs").exists()
    assert sorted(p.name for p in path.rglob("*")) == before


def test_other_seeds_interventions_and_settings_train_their_own(finished, tmp_path):
    setting = _setting(finished, tmp_path)
    assert setting.ensure_run(seed=1) == tmp_path / "notebook-runs" / "tiny-seed1"
    # a different learning rate is another setting: trained, not reused
    other = _setting(finished, tmp_path, lr=1e-3)
    assert other.ensure_run(seed=0) == tmp_path / "notebook-runs" / "tiny-seed0"
    # more steps than the finished run has: not finished for this setting
    longer = _setting(finished, tmp_path / "longer", steps=30)
    assert longer.ensure_run(seed=0) == tmp_path / "longer" / "notebook-runs" / "tiny-seed0"


def test_missing_demo_run_trains(finished, tmp_path):
    preset, cfg, model, _ = finished
    setting = NotebookSetting(
        small=False,
        preset=preset,
        train=cfg,
        model=model,
        runs=tmp_path / "runs",
        demo_run=tmp_path / "no-such-run",
    )
    assert setting.ensure_run(seed=0) == tmp_path / "runs" / "tiny-seed0"
    assert (tmp_path / "runs" / "tiny-seed0" / "metrics.csv").is_file()


def _write_finished_demo_run(path):
    """A run directory of the demo setting whose metrics reach the last step: what
    ``bash scripts/demo.sh`` leaves in ``runs/demo``, as far as reuse reads it (the config and
    the last evaluation; no weights are needed to decide)."""
    from interp.io.rundir import configs_dict
    from interp.model.network import ModelConfig

    preset = get_preset("demo")
    model = ModelConfig.from_task(preset.task, **preset.model)
    path.mkdir(parents=True)
    config = configs_dict(preset.task, model, preset.train)
    (path / "config.json").write_text(json.dumps(config))
    (path / "metrics.csv").write_text(f"step,train_loss\n50,3.4\n{preset.train.steps},0.1\n")


def test_a_fresh_clone_reuses_runs_demo_without_arguments(tmp_path):
    """In a clone with runs/demo (the package imported from the clone, a notebook's working
    directory), notebook_setting() finds the demo run and ensure_run trains nothing."""
    root = Path(__file__).resolve().parents[2]
    clone = tmp_path / "clone"
    shutil.copytree(root / "interp", clone / "interp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "pyproject.toml", clone / "pyproject.toml")
    (clone / "notebooks").mkdir()
    _write_finished_demo_run(clone / "runs" / "demo")
    before = sorted(str(p.relative_to(clone)) for p in (clone / "runs").rglob("*"))
    script = (
        "import interp.train.training as t\n"
        "def refuse(*a, **k):\n"
        "    raise SystemExit('training started')\n"
        "t.train = refuse\n"
        "from interp.experiments.notebook_setting import notebook_setting\n"
        "s = notebook_setting()\n"
        "print(s.ensure_run(seed=0))\n"
        "print(s.runs)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTION_CLIFF_")}
    env["PYTHONPATH"] = str(clone)
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=clone / "notebooks",
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    used, runs = out.stdout.split()
    assert Path(used) == clone / "runs" / "demo"
    assert Path(runs) == clone / "runs" / "notebooks"
    assert sorted(str(p.relative_to(clone)) for p in (clone / "runs").rglob("*")) == before


def test_an_installed_package_finds_runs_demo_from_the_working_directory(tmp_path, monkeypatch):
    """From a wheel (no checkout around the package) the runs folder is the first ``runs`` with
    a demo run at or above the working directory, or the one INDUCTION_CLIFF_RUNS_ROOT names."""
    from interp.experiments import notebook_setting as presets

    monkeypatch.setattr(presets, "repository_root", lambda: None)
    monkeypatch.delenv(presets.RUNS_ENV, raising=False)
    for name in ("INDUCTION_CLIFF_RUNS", "INDUCTION_CLIFF_DEMO_RUN", "INDUCTION_CLIFF_SMALL"):
        monkeypatch.delenv(name, raising=False)
    _write_finished_demo_run(tmp_path / "project" / "runs" / "demo")
    (tmp_path / "project" / "analysis").mkdir()
    monkeypatch.chdir(tmp_path / "project" / "analysis")
    setting = presets.notebook_setting()
    assert setting.demo_run == tmp_path / "project" / "runs" / "demo"
    assert setting.runs == tmp_path / "project" / "runs" / "notebooks"
    monkeypatch.setenv(presets.RUNS_ENV, str(tmp_path / "elsewhere"))
    assert presets.notebook_setting().demo_run == tmp_path / "elsewhere" / "demo"
