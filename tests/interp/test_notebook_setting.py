"""The notebooks reuse a finished run of their setting (runs/demo) instead of training it again."""

import dataclasses

import pytest

from interp.experiments.notebook_setting import NotebookSetting
from interp.experiments.standard import train
from interp.train.presets import get_preset


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
