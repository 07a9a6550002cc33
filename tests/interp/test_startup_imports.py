"""What the commands import. ``train``: a one-step run in a fresh process must not load the
compiler (which torch.optim's optimisers and looking for a C++ compiler pull in), scipy's
optimisers, nor the minimal model's module (TransformerLens's model classes are the network's base,
so it stays). A command that runs no model (``fit`` of a CSV curve, every command's ``--help``)
imports neither torch nor TransformerLens (nor ``transformers`` and ``datasets`` with it), and
torch imported afterwards still runs on the thread policy's one thread. Deterministic: checks of
``sys.modules``, not timings; the CPU seconds this saves are measured by
``benchmarks/bench_startup.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from interp.cli.commands import COMMANDS
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
NOT_IMPORTED = ("torch._dynamo", "torch._inductor", "scipy.optimize", "phenomenology.minimal")


MODEL_MODULES = ("torch", "transformer_lens", "transformers", "datasets")


def _fresh(code: str, *args: str, tmp_path) -> list[str]:
    """The standard output lines of ``code`` run with ``args`` in a fresh process (torch's thread
    count left to its default: no ``OMP_NUM_THREADS``)."""
    env = dict(os.environ, INDUCTION_CLIFF_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_help_and_fit_of_a_csv_import_neither_torch_nor_transformer_lens(tmp_path):
    """Every command's ``--help``, then ``fit CURVE.csv`` (a 61-point curve, no bootstrap): none
    imports torch or TransformerLens; torch imported after them runs on one thread, the policy of
    every command. Cost: one fresh process, about 4 s CPU (torch's import, to read its thread
    count, a third of it)."""
    steps = np.arange(0, 60001, 1000)
    loss = 0.5 + 2.0 / (1 + np.exp((steps - 30000.0) / 1500.0))
    curve = tmp_path / "curve.csv"
    curve.write_text("step,ic_loss\n" + "".join(f"{s},{v:.6f}\n" for s, v in zip(steps, loss)))
    code = (
        "import contextlib, io, sys\n"
        "from interp.cli import main\n"
        "from interp.cli._base import command_modules\n"
        f"heavy = {MODEL_MODULES!r}\n"
        "for module in command_modules():\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main([module.NAME, '--help'])\n"
        "        except SystemExit as stop:\n"
        "            assert stop.code == 0, module.NAME\n"
        "    print(module.NAME, '--help', sorted(m for m in heavy if m in sys.modules))\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['fit', sys.argv[1], '--n-boot', '0', '--json', sys.argv[2]])\n"
        "print('fit', code, sorted(m for m in heavy if m in sys.modules))\n"
        "import torch\n"
        "print('threads', torch.get_num_threads())\n"
    )
    lines = _fresh(code, str(curve), str(tmp_path / "fit.json"), tmp_path=tmp_path)
    assert len(lines) == len(COMMANDS) + 2  # each command's help, the fit, the threads
    assert all(line.endswith(" --help []") for line in lines[:-2]), lines[:-2]
    assert lines[-2:] == ["fit 0 []", "threads 1"]
    assert (tmp_path / "fit.json").is_file()  # it did fit


def test_commands_that_run_no_model_on_a_run_import_neither_torch_nor_transformer_lens(tmp_path):
    """``transition RUN`` and ``forecast`` (the default preset and another learning
    rate, where the collapse rates are looked up) read files and configs only: in a fresh
    process, none of them imports torch or TransformerLens. Cost: a 20-step tiny run here, then
    one fresh process, about 3 s CPU."""
    from interp.cli import main

    run = tmp_path / "run"
    assert (
        main(["train", "--preset", "tiny", "--set", "steps=20", "--quiet", "--out", str(run)]) == 0
    )
    code = (
        "import contextlib, io, sys\n"
        "from interp.cli import main\n"
        f"heavy = {MODEL_MODULES!r}\n"
        "calls = [['transition', sys.argv[1]],\n"
        "         ['forecast', '--preset', 'paper-fig3'],\n"
        "         ['forecast', '--preset', 'paper-fig3', '--set', 'lr=0.03']]\n"
        "for call in calls:\n"
        "    quiet = io.StringIO()\n"
        "    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        "        code = main(call)\n"
        "    print(call[0], code, sorted(m for m in heavy if m in sys.modules))\n"
    )
    lines = _fresh(code, str(run), tmp_path=tmp_path)
    assert lines == ["transition 0 []", "forecast 0 []", "forecast 0 []"]


def test_train_start_up_imports_no_compiler_nor_fitter(tmp_path):
    """Cost: one fresh process, about 4 s CPU."""
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
