"""The per-class IW evaluation (``TrainConfig.per_class_iw``): the set, ``per_class_iw.csv`` on the
fast, hooked and stacked training paths, exact resumption, configs written before the field
existed, the reader and the command line."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train, train_many
from interp.io.rundir import RunDirectoryError, load_run, read_per_class_iw
from interp.model.network import ModelConfig
from interp.train.overrides import build_configs

# K = 16 classes with Zipf frequencies; half the sequences non-bursty.
TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=1, p_B=0.5, p_C=0.25, alpha=1.0, n_eval=64)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)
N_PER_CLASS = 4


def cfg(**kw) -> TrainConfig:
    base = dict(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=60,
        eval_every=20,
        checkpoint_every=60,
        n_log_checkpoints=0,
        seed=0,
        num_threads=1,
        per_class_iw=N_PER_CLASS,
    )
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same run with and without the per-class evaluation, and one stopped at step 40."""
    base = tmp_path_factory.mktemp("pc")
    with_pc = train(TASK, MODEL, cfg(), base / "with", progress=False)
    without = train(TASK, MODEL, cfg(per_class_iw=0), base / "without", progress=False)
    train(TASK, MODEL, cfg(), base / "part", progress=False, stop_after=40)
    return base, with_pc, without


def test_the_set_has_n_sequences_per_class_with_contexts_from_p():
    gen = TaskGenerator(TASK, seed=3)
    batch = gen.per_class_iw(500, torch.Generator().manual_seed(1))
    K, L, N = TASK.K, TASK.L, TASK.N
    assert len(batch) == 500 * K and batch.n_pairs == N
    assert torch.equal(batch.query_class, torch.arange(K).repeat_interleave(500))
    assert torch.equal(batch.target, batch.query_class % L)
    assert torch.equal(batch.item_labels, batch.item_classes % L)
    # The query is a noisy item of its class: the nearest class mean is its class (eps = 0.1).
    nearest = torch.cdist(batch.tokens[:, -1], gen.class_means).argmin(-1)
    assert torch.equal(nearest, batch.query_class)
    # Fresh noise: no two queries of a class are the same vector.
    assert not torch.equal(batch.tokens[0, -1], batch.tokens[1, -1])
    # Context classes i.i.d. from p(k) = (k+1)^-1 / H_16: within 5 standard errors.
    p = 1.0 / np.arange(1, K + 1)
    p /= p.sum()
    counts = np.bincount(batch.item_classes.flatten().numpy(), minlength=K)
    n = counts.sum()
    assert np.all(np.abs(counts / n - p) < 5 * np.sqrt(p * (1 - p) / n))
    # Deterministic in its generator; refuses a bad size.
    again = gen.per_class_iw(500, torch.Generator().manual_seed(1))
    assert torch.equal(again.tokens, batch.tokens)
    with pytest.raises(ValueError, match="n_per_class=0"):
        gen.per_class_iw(0, torch.Generator())


def test_csv_equals_a_hooked_evaluation_of_the_checkpoint_and_changes_nothing_else(runs):
    base, with_pc, without = runs
    run = load_run(base / "with")
    frame = run.per_class_iw()
    assert list(frame.columns) == ["step"] + [f"c{k}" for k in range(TASK.K)]
    assert list(frame["step"]) == [0, 20, 40, 60]
    # The accuracies are multiples of 1/N_PER_CLASS.
    values = frame.drop(columns="step").to_numpy()
    assert np.allclose(values * N_PER_CLASS, np.round(values * N_PER_CLASS))
    # Recomputed from the step-60 checkpoint with the hooked forward, class by class.
    batch = run.per_class_iw_set()
    model = run.load_model(60).eval()
    with torch.no_grad():
        correct = (model(batch.tokens, batch.positions).argmax(-1) == batch.target).numpy()
    by_class = correct.reshape(TASK.K, N_PER_CLASS).mean(axis=1)
    np.testing.assert_allclose(frame.iloc[-1].drop("step").to_numpy(float), by_class)
    # Its own seed: metrics.csv is exactly that of the same run without the evaluation.
    pd.testing.assert_frame_equal(with_pc, without)
    assert not (base / "without" / "per_class_iw.csv").exists()


def test_interrupted_then_resumed_writes_the_same_file_bit_for_bit(runs, tmp_path):
    base, _, _ = runs
    run = shutil.copytree(base / "part", tmp_path / "part")
    assert list(pd.read_csv(run / "per_class_iw.csv")["step"]) == [0, 20, 40]
    (run / "per_class_iw.csv").write_text("step,c0\n0,0.5\n")  # damaged: rewritten from resume.pt
    train(TASK, MODEL, cfg(), run, resume=True, progress=False)
    full = base / "with"
    assert (run / "per_class_iw.csv").read_bytes() == (full / "per_class_iw.csv").read_bytes()
    assert (run / "metrics.csv").read_bytes() == (full / "metrics.csv").read_bytes()


def test_hooked_and_intervention_paths(runs, tmp_path):
    base, _, _ = runs
    fast = read_per_class_iw(base / "with").drop(columns="step").to_numpy()
    hooked = train(TASK, MODEL, cfg(backend="hooked"), tmp_path / "hooked", progress=False)
    assert len(hooked) == 4
    other = read_per_class_iw(tmp_path / "hooked", TASK.K).drop(columns="step").to_numpy()
    # The same function to float rounding: at most one sequence of a class can flip.
    assert np.abs(other - fast).max() <= 1 / N_PER_CLASS + 1e-12
    # An intervention trains on the hooked forward with its hooks, and evaluates with them.
    train(TASK, MODEL, cfg(intervention="uniform_layer1"), tmp_path / "iv", progress=False)
    assert read_per_class_iw(tmp_path / "iv", TASK.K).shape == (4, TASK.K + 1)


def test_stacked_path(runs, tmp_path):
    base, _, _ = runs
    fast = read_per_class_iw(base / "with").drop(columns="step").to_numpy()
    # Stacked seeds: each run's file, and an interrupted stack resumes to the same bytes.
    dirs = [tmp_path / "s0", tmp_path / "s1"]
    train_many(TASK, MODEL, cfg(), [0, 1], dirs, progress=False)
    stacked = read_per_class_iw(dirs[0], TASK.K).drop(columns="step").to_numpy()
    assert np.abs(stacked - fast).max() <= 1 / N_PER_CLASS + 1e-12
    part = [tmp_path / "p0", tmp_path / "p1"]
    train_many(TASK, MODEL, cfg(), [0, 1], part, progress=False, stop_after=20)
    train_many(TASK, MODEL, cfg(), [0, 1], part, resume=True, progress=False)
    for a, b in zip(dirs, part):
        assert (a / "per_class_iw.csv").read_bytes() == (b / "per_class_iw.csv").read_bytes()


def test_a_config_without_the_field_reads_as_off_and_resumes(tmp_path):
    run = tmp_path / "old"
    train(TASK, MODEL, cfg(per_class_iw=0), run, progress=False, stop_after=40)
    config = json.loads((run / "config.json").read_text())
    del config["train"]["per_class_iw"]  # as written before the field existed
    (run / "config.json").write_text(json.dumps(config))
    before = (run / "config.json").read_bytes()
    loaded = load_run(run)
    assert loaded.train_config.per_class_iw == 0 and loaded.notes == []
    assert main(["train", "--resume", "--out", str(run), "--quiet"]) == 0
    assert load_run(run).metrics["step"].max() == 60
    assert (run / "config.json").read_bytes() == before  # nothing to migrate, nothing rewritten


def test_reader_and_command_line_errors(runs, tmp_path, capsys):
    base, _, _ = runs
    with pytest.raises(RunDirectoryError, match="per_class_iw.csv is missing.*per_class_iw=8"):
        read_per_class_iw(base / "without")
    bad = shutil.copytree(base / "with", tmp_path / "bad")
    frame = pd.read_csv(bad / "per_class_iw.csv").rename(columns={"c3": "x"})
    frame.to_csv(bad / "per_class_iw.csv", index=False)
    with pytest.raises(RunDirectoryError, match="'x' out of place"):
        load_run(bad).per_class_iw()
    with pytest.raises(RunDirectoryError, match=r"c31 \(32 classes\); found 16 columns"):
        read_per_class_iw(base / "with", n_classes=32)
    # --set reaches the field; a bad value is one line naming it, before anything is written.
    assert build_configs("tiny", {"per_class_iw": "8"}, None)[2].per_class_iw == 8
    out = tmp_path / "x"
    assert main(["train", "--preset", "tiny", "--set", "per_class_iw=-2", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TrainConfig.per_class_iw=-2" in err[0] and not out.exists()
    # --overwrite deletes the run's own per-class file (and quanta.json) with it.
    again = shutil.copytree(base / "with", tmp_path / "again")
    (again / "quanta.json").write_text("{}")
    train(TASK, MODEL, cfg(per_class_iw=0), again, overwrite=True, progress=False)
    assert not (again / "per_class_iw.csv").exists() and not (again / "quanta.json").exists()
