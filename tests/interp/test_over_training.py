import pandas as pd
import pytest

from interp.analysis.over_training import measures_over_checkpoints, patterns_over_checkpoints
from interp.analysis.probes import ila1
from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io.rundir import load_run

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    train(
        TASK,
        None,
        TrainConfig(
            optimizer="adam",
            lr=3e-3,
            batch_size=32,
            steps=60,
            eval_every=10,
            checkpoint_every=20,
            n_log_checkpoints=0,
        ),
        out,
        progress=False,
    )
    return out


def test_measures_over_checkpoints_reproduce_training_metrics(run_dir):
    df = measures_over_checkpoints(run_dir)
    assert list(df.columns) == ["step", "measure", "value"]
    wide = df.pivot(index="step", columns="measure", values="value")
    metrics = load_run(run_dir).metrics.set_index("step")
    for col in ("ic_acc", "ila1", "tila2", "tla2", "cla", "induction_score"):
        pd.testing.assert_series_equal(
            wide[col], metrics.loc[wide.index, col], check_names=False, atol=1e-6
        )


def test_new_probe_on_old_run(run_dir):
    df = measures_over_checkpoints(
        run_dir, {"my_ila1": lambda patterns, logits, batch: ila1(patterns[0], batch)}
    )
    assert set(df["measure"]) == {"my_ila1"}
    assert len(df) == len(load_run(run_dir).checkpoint_steps)


def test_patterns_over_checkpoints_shape(run_dir):
    steps, patterns, batch = patterns_over_checkpoints(run_dir, n=8)
    assert patterns.shape == (len(steps), 2, 8, 9, 9)
    assert patterns.sum(-1).allclose(patterns.new_ones(patterns.shape[:-1]))


def test_cli_measures_and_transition(run_dir, capsys, tmp_path):
    assert main(["measures", str(run_dir)]) == 0
    assert (run_dir / "checkpoint_measures.csv").exists()
    assert main(["transition", str(run_dir), "--out", str(tmp_path / "t.csv")]) == 0
    report = pd.read_csv(tmp_path / "t.csv")
    assert list(report["run"])[-2:] == ["mean", "std"]
