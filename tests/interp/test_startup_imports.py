"""What ``train`` imports: a one-step run in a fresh process must not load the compiler (which
torch.optim's optimisers and looking for a C++ compiler pull in), scipy's optimisers, nor the
minimal model's module (TransformerLens's model classes are the network's base, so it stays).
Deterministic: a check of ``sys.modules`` at exit, not a timing; the CPU seconds this saves are
measured by ``benchmarks/bench_startup.py``. Cost: one fresh process, about 3 s CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
NOT_IMPORTED = ("torch._dynamo", "torch._inductor", "scipy.optimize", "phenomenology.minimal")


def test_train_start_up_imports_no_compiler_nor_fitter(tmp_path):
    code = (
        "import atexit, sys\n"
        "from interp.cli import main\n"
        f"atexit.register(lambda: print(sorted(m for m in {NOT_IMPORTED!r} if m in sys.modules)))\n"
        "sys.argv[0] = 'induction-cliff'\n"
        "sys.exit(main())\n"
    )
    out = tmp_path / "run"
    env = dict(os.environ, INDUCTION_CLIFF_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code, "train", "--preset", "tiny", "--set", "steps=1", "--quiet"]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "metrics.csv").is_file()  # it did train and evaluate
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_a_fresh_command_reopens_a_minimal_model_run_by_its_module_name(tmp_path):
    """The command line registers the minimal model's kind by module name; a command opening
    such a run imports the module then (``transition`` reads its model). A fresh process, about
    3 s CPU, and 40 steps of the minimal model here."""
    from interp.data.task import TaskConfig
    from phenomenology.minimal import train_minimal

    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
    train_minimal(task, steps=40, lr=1.0, eval_every=10, seed=0, out_dir=tmp_path / "m")
    code = (
        "import sys\n"
        "from interp.cli import main\n"
        "from interp.io.rundir import RUN_KINDS\n"
        "code = main(['transition', sys.argv[1]])\n"
        "print(type(RUN_KINDS['minimal_induction_head']).__name__, 'phenomenology.minimal' in "
        "sys.modules)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "RunKind True"  # the module was imported and registered its classes
