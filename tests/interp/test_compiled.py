"""The compiled training loss (``backend="compiled"``): the fast path's function, resumable bit for
bit, refused by name where no C++ compiler is found."""

import dataclasses
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train
from interp.io.rundir import load_run
from interp.model.backends import training_loss
from interp.model.compiled import CompiledLoss, check_compiler, supports_compile
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.model.positional import UntrainedPositionWarning

TASK = TaskConfig(K=64, L=32, N=8, B=2, p_C=0.5)
SMALL = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
SMALL_MODEL = ModelConfig.from_task(SMALL, d_mlp=32)


def _loss_and_grads(model, fn):
    model.zero_grad()
    loss = fn()
    loss.backward()
    return loss.detach(), {
        n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()
    }


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        pytest.param(
            dict(n_heads=2, d_head=32, attn_scale="log_n", qk_bias=True), marks=pytest.mark.slow
        ),
        pytest.param(dict(far=True), marks=pytest.mark.slow),  # another compile: ~15 s each
    ],
)
def test_compiled_loss_equals_the_fast_loss_and_its_gradients(overrides):
    far = overrides.pop("far", False)
    batch = TaskGenerator(TASK, 0).sample(32, torch.Generator().manual_seed(1))
    model = InductionNet(ModelConfig.from_task(TASK, **overrides), seed=0).double()
    tokens = batch.tokens.double()
    assert supports_compile(model)
    compiled = CompiledLoss(model)

    def fast():
        return F.cross_entropy(fast_logits(model, tokens, batch.positions), batch.target)

    ref, ref_grads = _loss_and_grads(model, fast)
    got, got_grads = _loss_and_grads(model, lambda: compiled(tokens, batch.positions, batch.target))
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
    # Every parameter the fast path trains gets the same gradient (b_K: None on both, see fast.py).
    assert {n for n, g in ref_grads.items() if g is not None} == {
        n for n, g in got_grads.items() if g is not None
    }
    for name, g in ref_grads.items():
        if g is not None:
            torch.testing.assert_close(got_grads[name], g, rtol=1e-9, atol=1e-11, msg=name)
    # After an update the compiled loss reads the new weights (not a copy taken when compiled).
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
    torch.testing.assert_close(
        compiled(tokens, batch.positions, batch.target).detach(),
        fast().detach(),
        rtol=1e-10,
        atol=1e-12,
    )
    if not far:
        return
    # Positions past the one-hot table: the same warning and the same masked input as fast.
    past = batch.positions.clone()
    past[:, 0] = model.cfg.n_positions + 3
    with pytest.warns(UntrainedPositionWarning):
        want = F.cross_entropy(fast_logits(model, tokens, past), batch.target)
    with pytest.warns(UntrainedPositionWarning):
        got = compiled(tokens, past, batch.target)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_the_backend_picks_the_compiled_loss_only_where_it_applies():
    paper = InductionNet(ModelConfig.from_task(TASK), seed=0)
    assert isinstance(training_loss(paper, "compiled"), CompiledLoss)
    assert not isinstance(training_loss(paper, "compiled", hooked=True), CompiledLoss)
    assert not isinstance(training_loss(paper, "fast"), CompiledLoss)
    three = InductionNet(ModelConfig.from_task(TASK, n_layers=3), seed=0)
    rope = InductionNet(ModelConfig.from_task(TASK, positional="rope", d_head=64), seed=0)
    assert not supports_compile(three) and not supports_compile(rope)
    batch = TaskGenerator(TASK, 0).sample(8, torch.Generator().manual_seed(3))
    for model in (three, rope):  # the uncompiled paths, with the hooked model's loss
        loss = training_loss(model, "compiled")(batch.tokens, batch.positions, batch.target)
        want = F.cross_entropy(model(batch.tokens, batch.positions), batch.target)
        torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)


def _cfg(**kw):
    base = dict(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=60,
        eval_every=20,
        checkpoint_every=40,
        n_log_checkpoints=3,
        backend="compiled",
    )
    return TrainConfig(**{**base, **kw})


def test_a_compiled_run_resumes_bit_for_bit_is_recorded_and_follows_the_fast_run(tmp_path):
    full = train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "full", progress=False)
    train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "part", progress=False, stop_after=33)
    resumed = train(SMALL, SMALL_MODEL, _cfg(), tmp_path / "part", resume=True, progress=False)
    pd.testing.assert_frame_equal(full, resumed)
    a = load_run(tmp_path / "full").load_model(60).state_dict()
    b = load_run(tmp_path / "part").load_model(60).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    config = json.loads((tmp_path / "full" / "config.json").read_text())
    assert config["train"]["backend"] == "compiled"
    assert load_run(tmp_path / "full").train_config.backend == "compiled"
    # The fast run of the seed: the same trajectory to float rounding, not the same bits.
    fast = train(SMALL, SMALL_MODEL, _cfg(backend="fast"), tmp_path / "fast", progress=False)
    pd.testing.assert_series_equal(full["train_loss"], fast["train_loss"], rtol=1e-4)
    c = load_run(tmp_path / "fast").load_model(60).state_dict()
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_without_a_cpp_compiler_the_backend_is_refused_by_name_before_any_work(tmp_path):
    check_compiler("cpu")  # this machine has one
    out = tmp_path / "run"
    env = {**os.environ, "CXX": str(tmp_path / "no-such-g++")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp.cli",
            "train",
            "--preset",
            "tiny",
            "--set",
            "backend=compiled",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith("error: TrainConfig.backend='compiled' is invalid here")
    assert done.stderr.strip().splitlines()[-1] == errors[0]
    assert not out.exists()


def test_compiled_points_do_not_stack_on_the_cpu_and_a_stacked_sweep_of_them_is_refused(tmp_path):
    from interp.experiments.sweep import SweepSpec, run_sweep
    from interp.experiments.sweep_backends import stack_jobs
    from interp.model.backends import stacks

    assert stacks("fast", "cpu") and not stacks("compiled", "cpu") and not stacks("hooked", "cpu")
    assert stacks("compiled", "cuda")  # off the CPU it trains as fast, so it stacks
    fast = SweepSpec(preset="tiny", grid={"K": (16,)}, overrides={"steps": "4"}, seeds=(0, 1))
    assert [len(j) for j in stack_jobs(fast.points(), 2)] == [2]
    compiled = dataclasses.replace(fast, overrides={"steps": "4", "backend": "compiled"})
    assert [len(j) for j in stack_jobs(compiled.points(), 2)] == [1, 1]
    with pytest.raises(ValueError, match=r"^stack=2 is invalid here: .*backend='compiled'"):
        run_sweep(compiled, tmp_path / "sweep", backend="serial", stack=2, log=lambda _: None)
    assert not (tmp_path / "sweep").exists()  # refused before anything is written


def test_the_compilers_files_are_kept_in_the_users_cache_folder(tmp_path):
    """Kept across processes (the next run loads them instead of compiling again) in the
    per-user cache folder, never a temporary one removed at exit; movable and off by choice."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TORCHINDUCTOR_CACHE_DIR", "INDUCTION_CLIFF_CACHE", "XDG_CACHE_HOME")
    }
    env["TMPDIR"] = str(tmp_path / "tmp")  # where tempfile makes a folder
    (tmp_path / "tmp").mkdir()
    code = (
        "import os; from interp.model.compiled import check_compiler; check_compiler('cpu'); "
        "print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"
    )

    def folder(**extra) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra}
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    home = tmp_path / "home"
    kept = folder(HOME=str(home))
    assert kept == str(home / ".cache" / "induction-cliff" / "inductor")
    assert os.path.isdir(kept)  # still there after the process ended
    # Off: a folder of the process, removed at its end.
    off = folder(INDUCTION_CLIFF_CACHE="off", HOME=str(home))
    assert os.path.dirname(off) == str(tmp_path / "tmp")
    assert os.path.basename(off).startswith("induction-cliff-compile-")
    assert not os.path.exists(off) and os.listdir(tmp_path / "tmp") == []


def test_the_compile_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    from interp.model.compiled import compile_cache_dir

    for name in ("TORCHINDUCTOR_CACHE_DIR", "INDUCTION_CLIFF_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache_dir() == tmp_path / "home" / ".cache" / "induction-cliff" / "inductor"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache_dir() == tmp_path / "xdg" / "induction-cliff" / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))  # the user's, as it is
    assert compile_cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("INDUCTION_CLIFF_CACHE", str(tmp_path / "moved"))
    assert compile_cache_dir() == tmp_path / "moved" / "inductor"
    monkeypatch.setenv("INDUCTION_CLIFF_CACHE", "off")
    assert compile_cache_dir() is None
