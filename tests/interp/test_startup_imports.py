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
