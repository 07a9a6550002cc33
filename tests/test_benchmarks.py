"""The benchmarks' logic that this machine cannot time for real: the GPU rows of bench_many (run
here on the CPU) and the bad-input lines of bench_protocol."""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

from tests.waits import HANG_S

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_rows_run_on_the_cpu_with_one_model_and_a_stack():
    torch.set_num_threads(1)
    many = _load("bench_many")
    rates = many.device_stack_rates("cpu", steps=2, rounds=1, stacks=(3,))
    assert list(rates) == [1, 3]
    assert all(math.isfinite(r) and r > 0 for r in rates.values())


def test_presampled_gpu_rows_run_on_the_cpu_and_say_no_gpu_in_one_line():
    torch.set_num_threads(1)
    many = _load("bench_many")
    rates = many.device_stack_rates("cpu", steps=2, rounds=1, stacks=(2,), presampled=True)
    assert list(rates) == [1, 2]
    assert all(math.isfinite(r) and r > 0 for r in rates.values())
    # no GPU visible, on any machine (so that the line is checked where a GPU exists too)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_many.py"), "--gpu-only"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "bench_many: --gpu-only needs a GPU that torch sees; there is none here"
    ]


def test_the_stacked_benchmark_step_moves_every_models_weights(monkeypatch):
    many = _load("bench_many")
    setup = many._setup(3, "cpu")
    stack = setup[3]
    before = [p.detach().clone() for p in stack.parameters()]
    monkeypatch.setattr(many, "_setup", lambda n, device: setup)
    many._timed_steps(3, "cpu", steps=1, rounds=1)
    trained = [(p, b) for p, b in zip(stack.parameters(), before) if p.requires_grad]
    assert trained and all(p.ndim and p.shape[0] == 3 for p, _ in trained)  # one slice per model
    for p, b in trained:
        assert all(not torch.equal(p[i], b[i]) for i in range(3))


def test_protocol_bad_input_is_one_line_before_any_run(tmp_path):
    for args, field in (
        (["--steps", "0"], "--steps"),
        (["--quick", "--steps", "5"], "--quick or --steps"),
        (["--quick", "--baseline", str(tmp_path)], "--baseline"),
        (["--quick", "--keep", str(tmp_path / "kept")], "--keep"),
        (["--steps", "10", "--keep", str(tmp_path)], "--keep"),  # exists already
    ):
        done = subprocess.run(
            [sys.executable, str(BENCH / "bench_protocol.py"), *args],
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and field in lines[0] and "bench_protocol" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_every_timing_benchmark_announces_the_cpu_model_and_the_load():
    """Each ``bench_*.py`` calls ``machine.announce()`` first in its ``__main__`` block, and one run
    (``--help``: nothing timed) prints the CPU model first and the load at the end last."""
    import ast

    for path in sorted(BENCH.glob("bench_*.py")):
        tree = ast.parse(path.read_text())
        main = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        assert main, f"{path.name} has no __main__ block"
        calls = [ast.unparse(s) for s in main[0].body if isinstance(s, ast.Expr)]
        assert calls and calls[0] == "announce()", f"{path.name} does not announce the machine"
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_step.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    lines = done.stdout.strip().splitlines()
    assert (
        done.returncode == 0 and lines[0].startswith("CPU: ") and " CPUs; load average" in lines[0]
    )
    assert lines[-1].startswith("load average at the end: ")
