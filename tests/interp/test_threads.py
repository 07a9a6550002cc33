"""The thread policy (interp.train.threads): one torch thread by default in training, in every
preset and in every command; ``num_threads`` overrides it; bench_load's input checks."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.cli import main
from interp.data.task import TaskConfig
from interp.model.network import ModelConfig
from interp.train.presets import PRESETS
from interp.train.threads import DEFAULT_NUM_THREADS, apply_thread_policy
from interp.train.training import TrainConfig, train
from tests.waits import HANG_S

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_the_default_is_one_thread_in_the_config_and_every_preset():
    assert DEFAULT_NUM_THREADS == 1
    assert TrainConfig().num_threads == 1
    assert {name: p.train.num_threads for name, p in PRESETS.items()} == dict.fromkeys(PRESETS, 1)


@pytest.mark.parametrize(("setting", "expected"), [(1, 1), (None, 1), (2, 2)])
def test_training_runs_on_the_policys_threads_unless_told_otherwise(two_threads, setting, expected):
    cfg = TrainConfig(steps=2, eval_every=2, batch_size=8, num_threads=setting, live_forecast=False)
    train(TASK, ModelConfig.from_task(TASK, d_mlp=16), cfg, progress=False)
    assert torch.get_num_threads() == expected


def test_every_command_starts_on_one_thread(two_threads, capsys):
    assert main(["presets"]) == 0
    assert torch.get_num_threads() == 1
    assert apply_thread_policy(2) == 2 and torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="num_threads=0 is invalid"):
        apply_thread_policy(0)


def test_bench_load_refuses_bad_input_in_one_line_before_any_run():
    for args, field in (
        (["--steps", "0"], "--steps"),
        (["--rounds", "0"], "--rounds"),
        (["--threads", "1,x"], "--threads"),
        (["--threads", "0"], "--threads"),
        (["--preset", "nope"], "--preset"),
        (["--baseline", "/nonexistent"], "--baseline"),
    ):
        done = subprocess.run(
            [sys.executable, str(BENCH / "bench_load.py"), *args],
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert done.returncode == 1, args
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and field in lines[0] and lines[0].startswith("bench_load:"), lines


@pytest.mark.slow
def test_bench_load_runs_a_short_round_and_prints_its_ratios():
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_load.py"),
            "--preset",
            "tiny",
            "--steps",
            "5",
            "--rounds",
            "1",
            "--threads",
            "1",
            "--competitors",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("before: load average") and "best setting: num_threads=1" in lines
    assert lines[-1].startswith("shipped/best: ") and float(lines[-1].split()[-1]) > 0
