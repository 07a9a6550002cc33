"""The device rows of the GPU check, run on the CPU: bench_device's measurement, gpu_check's
``--dry`` mode (the CPU-side parts of what the GPU machine will run); bench_sampler's."""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.waits import HANG_S

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_rows_measure_a_stack_on_the_cpu():
    torch.set_num_threads(1)
    row = _load("bench_device").rows(torch.device("cpu"), 2, steps=1, rounds=1, n_eval=64)
    assert set(row) == {"sampling", "step", "evaluation", "end to end", "with evaluations"}
    assert all(math.isfinite(v) and v > 0 for v in row.values())
    # model-steps/s: two models per (sampling + step); evaluations only slow it down
    assert row["end to end"] == pytest.approx(2e3 / (row["sampling"] + row["step"]))
    assert row["with evaluations"] < row["end to end"]


def test_a_compiled_step_the_compiler_cannot_build_is_nan_with_one_line(monkeypatch, capsys):
    """Where torch.compile fails (no C++ compiler, no Triton), the compiled columns are nan and
    stderr says why in one line; the uncompiled row is still measured."""
    torch.set_num_threads(1)

    def refuse(fn, **kwargs):
        def compiled(*args):
            raise RuntimeError("no compiler here\nsecond line")

        return compiled

    monkeypatch.setattr(torch, "compile", refuse)
    row = _load("bench_device").rows(torch.device("cpu"), 2, 1, 1, n_eval=64, compiled=True)
    assert math.isnan(row["compiled step"]) and math.isnan(row["compile"])
    assert math.isfinite(row["step"]) and row["step"] > 0
    assert capsys.readouterr().err.strip().splitlines() == [
        "bench_device: no compiled step at 2 models: no compiler here"
    ]


def test_bench_device_refuses_bad_input_in_one_line():
    for args, field in ((["--stacks", "0"], "--stacks"), (["--steps", "0"], "--steps")):
        done = subprocess.run(
            [sys.executable, str(BENCH / "bench_device.py"), *args],
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and field in lines[0] and lines[0].startswith("bench_device:")


@pytest.mark.slow
def test_gpu_check_dry_runs_the_device_rows_and_a_device_sampled_run_on_the_cpu(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(BENCH / "gpu_check.sh"), "--dry"],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = (tmp_path / "device_rows.txt").read_text()
    # the device sampler, the step and the compiled step at every stack the GPU run measures
    assert [line.split()[0] for line in rows.splitlines()[2:6]] == ["1", "16", "64", "256"]
    assert "end to end at 256 models:" in rows
    assert "compiled step at 256 models:" in rows and " nan ms" not in rows
    assert '"sample_on": "device"' in (tmp_path / "device-train" / "config.json").read_text()


def test_bench_sampler_measures_both_samplers_the_generator_and_the_rest_of_a_step():
    torch.set_num_threads(1)
    ms = _load("bench_sampler").measure("tiny", rounds=1, n=2)
    assert set(ms) == {"host", "device", "generator", "step"}
    assert all(math.isfinite(v) and v > 0 for v in ms.values())
