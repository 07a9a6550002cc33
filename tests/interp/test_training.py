import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from interp.cli import main
from interp.config.train_config import TrainConfig, checkpoint_schedule
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train
from interp.io import checkpoints
from interp.io.rundir import RunDirectoryError, load_run
from interp.model.network import ModelConfig
from interp.train.training import TrainingDiverged

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
MODEL = ModelConfig.from_task(TASK, d_mlp=32)


def cfg(**kw):
    base = dict(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=60,
        eval_every=20,
        checkpoint_every=40,
        n_log_checkpoints=3,
        seed=0,
    )
    base.update(kw)
    return TrainConfig(**base)


def test_tiny_run_learns_and_writes_run_directory(tmp_path):
    metrics = train(TASK, MODEL, cfg(steps=200, eval_every=50), tmp_path / "run", progress=False)
    assert list(metrics["step"]) == [0, 50, 100, 150, 200]
    assert metrics["train_loss"].iloc[-1] < math.log(8) - 0.3
    for col in (
        "train_loss",
        "ic_acc",
        "ic_loss",
        "ic2_acc",
        "ic2_loss",
        "iw_acc",
        "iw_loss",
        "ila1",
        "tila2",
        "tla2",
        "cla",
    ):
        assert col in metrics
    run = load_run(tmp_path / "run")
    assert run.task == TASK and run.model_config == MODEL
    pd.testing.assert_frame_equal(run.metrics, metrics, check_dtype=False)
    assert 0 in run.checkpoint_steps and 200 in run.checkpoint_steps
    cfg_json = json.loads((tmp_path / "run" / "config.json").read_text())
    assert set(cfg_json) >= {"task", "model", "train"}
    model = run.load_model(200)
    logits = model(*(lambda b: (b.tokens, b.positions))(run.eval_sets()["ic"]))
    acc = (logits.argmax(-1) == run.eval_sets()["ic"].target).float().mean().item()
    assert acc == pytest.approx(metrics["ic_acc"].iloc[-1], abs=1e-6)


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path):
    full = train(TASK, MODEL, cfg(), tmp_path / "full", progress=False)
    train(TASK, MODEL, cfg(), tmp_path / "part", progress=False, stop_after=33)  # mid-interval
    resumed = train(TASK, MODEL, cfg(), tmp_path / "part", resume=True, progress=False)
    pd.testing.assert_frame_equal(full, resumed)
    a = load_run(tmp_path / "full").load_model(60).state_dict()
    b = load_run(tmp_path / "part").load_model(60).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_keyboard_interrupt_saves_state_and_resume_is_exact(tmp_path, monkeypatch):
    sgd = cfg(optimizer="sgd", lr=0.05, sample_on="host")  # the host sampler: patched below
    full = train(TASK, MODEL, sgd, tmp_path / "full", progress=False)
    calls = {"n": 0}
    original = TaskGenerator.sample

    def flaky(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 27:
            raise KeyboardInterrupt
        return original(self, *a, **k)

    monkeypatch.setattr(TaskGenerator, "sample", flaky)
    with pytest.raises(KeyboardInterrupt):
        train(TASK, MODEL, sgd, tmp_path / "part", progress=False)
    monkeypatch.setattr(TaskGenerator, "sample", original)
    resumed = train(TASK, MODEL, sgd, tmp_path / "part", resume=True, progress=False)
    pd.testing.assert_frame_equal(full, resumed)


def test_divergence_stops_cleanly_and_keeps_last_good_checkpoint(tmp_path):
    with pytest.raises(TrainingDiverged, match="NaN|nan|inf"):
        train(
            TASK, MODEL, cfg(optimizer="sgd", lr=1e6, steps=200), tmp_path / "run", progress=False
        )
    run = load_run(tmp_path / "run")
    assert 0 in run.checkpoint_steps
    for step in run.checkpoint_steps:
        assert all(torch.isfinite(v).all() for v in run.load_model(step).state_dict().values())
    assert len(run.metrics) >= 1


def test_run_directory_refusals(tmp_path):
    train(TASK, MODEL, cfg(steps=20), tmp_path / "run", progress=False)
    with pytest.raises(RunDirectoryError, match="same config.*resume"):
        train(TASK, MODEL, cfg(steps=20), tmp_path / "run", progress=False)
    with pytest.raises(RunDirectoryError, match="different config"):
        train(TASK, MODEL, cfg(steps=20, lr=1e-2), tmp_path / "run", progress=False)
    with pytest.raises(RunDirectoryError, match="different config"):
        train(TASK, MODEL, cfg(steps=20, lr=1e-2), tmp_path / "run", resume=True, progress=False)
    # overwrite starts again; resume may extend the number of steps
    train(TASK, MODEL, cfg(steps=20, lr=1e-2), tmp_path / "run", overwrite=True, progress=False)
    longer = train(
        TASK, MODEL, cfg(steps=40, lr=1e-2), tmp_path / "run", resume=True, progress=False
    )
    assert list(longer["step"]) == [0, 20, 40]


def test_corrupted_checkpoints_give_clear_errors(tmp_path):
    train(TASK, MODEL, cfg(steps=20), tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    path = checkpoints.weights_path(tmp_path / "run" / "checkpoints", 20)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(checkpoints.CheckpointError, match="truncated or corrupted"):
        run.load_model(20)
    resume = tmp_path / "run" / "checkpoints" / checkpoints.RESUME_NAME
    resume.write_bytes(resume.read_bytes()[:50])
    with pytest.raises(checkpoints.CheckpointError, match="truncated or corrupted"):
        train(TASK, MODEL, cfg(steps=40), tmp_path / "run", resume=True, progress=False)


def test_checkpoint_schedule_is_log_spaced_plus_regular():
    steps = checkpoint_schedule(
        TrainConfig(steps=10000, checkpoint_every=2500, n_log_checkpoints=5)
    )
    assert {0, 1, 10, 100, 1000, 2500, 5000, 7500, 10000} <= steps


def test_checkpoints_are_dense_around_the_jump(tmp_path):
    train(
        TASK,
        MODEL,
        cfg(
            steps=200,
            eval_every=10,
            checkpoint_every=1000,
            n_log_checkpoints=0,
            checkpoint_on_jump=0.02,
        ),
        tmp_path / "run",
        progress=False,
    )
    run = load_run(tmp_path / "run")
    jumps = run.metrics["step"][run.metrics["ic_acc"].diff().abs() > 0.02]
    # the check is not vacuous: accuracy did jump, at steps the regular schedule ({0, 200})
    # would not have saved
    assert len(set(jumps) - {0, 200}) >= 2
    assert set(jumps) <= set(run.checkpoint_steps)
    assert set(run.checkpoint_steps) == set(jumps) | {0, 200}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(optimizer="rmsprop"), "optimizer"),
        (dict(steps=0), "steps"),
        (dict(lr=-1.0), "lr"),
        (dict(batch_size=0), "batch_size"),
        (dict(intervention="lobotomy"), "intervention"),
        (dict(per_class_iw=-1), "per_class_iw"),
        (dict(per_class_iw=2.5), "per_class_iw"),
        (dict(per_class_iw=True), "per_class_iw"),
        (dict(per_class_iw=None), "per_class_iw"),
    ],
)
def test_invalid_train_config(kwargs, field):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field}="):
        TrainConfig(**kwargs)


def test_cli_train_and_errors(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--preset",
                "tiny",
                "--set",
                "steps=20",
                "--out",
                str(tmp_path / "r"),
                "--quiet",
            ]
        )
        == 0
    )
    assert "IC acc" in capsys.readouterr().out
    assert main(["train", "--preset", "tiny", "--out", str(tmp_path / "r"), "--quiet"]) == 3
    assert "resume" in capsys.readouterr().err
    assert (
        main(["train", "--preset", "tiny", "--set", "bogus=1", "--out", str(tmp_path / "x")]) == 2
    )
    assert "unknown" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["train", "--preset", "nope"]) == 2
    assert "allowed values" in capsys.readouterr().err
    assert main(["train", "--preset", "tiny", "--set", "B=3", "--out", str(tmp_path / "y")]) == 2
    assert "TaskConfig.B=3" in capsys.readouterr().err


def test_same_seed_same_run(tmp_path):
    a = train(TASK, MODEL, cfg(steps=20), None, progress=False)
    b = train(TASK, MODEL, cfg(steps=20), None, progress=False)
    pd.testing.assert_frame_equal(a, b)
    c = train(TASK, MODEL, cfg(steps=20, seed=1), None, progress=False)
    assert not np.allclose(a["ic_loss"], c["ic_loss"])


def test_ctrl_c_in_the_middle_of_a_step_stops_after_it_and_resume_is_exact(tmp_path, monkeypatch):
    """A real SIGINT that arrives after a batch was drawn: the step completes, then the run stops
    with its state saved, and the resumed run equals the uninterrupted one."""
    import os
    import signal

    host = cfg(sample_on="host")  # the interruption is planted in the host sampler
    full = train(TASK, MODEL, host, tmp_path / "full", progress=False)
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job
    calls = {"n": 0}
    original = TaskGenerator.sample

    def sample_then_sigint(self, *a, **k):
        batch = original(self, *a, **k)  # the data stream has moved on
        calls["n"] += 1
        if calls["n"] == 27:
            os.kill(os.getpid(), signal.SIGINT)
        return batch

    monkeypatch.setattr(TaskGenerator, "sample", sample_then_sigint)
    with pytest.raises(KeyboardInterrupt):
        train(TASK, MODEL, host, tmp_path / "part", progress=False)
    monkeypatch.setattr(TaskGenerator, "sample", original)
    assert signal.getsignal(signal.SIGINT) is before  # the handler in place before is restored
    state = checkpoints.load_resume(tmp_path / "part" / "checkpoints" / checkpoints.RESUME_NAME)
    assert state["step"] == 27  # the interrupted step was finished, not lost
    resumed = train(TASK, MODEL, host, tmp_path / "part", resume=True, progress=False)
    pd.testing.assert_frame_equal(full, resumed)


def test_plain_sgd_update_is_the_optimisers_step_bit_for_bit():
    """The loop's own update of plain SGD (two multi-tensor ops) gives exactly the weights of the
    multiplicative shrink followed by ``torch.optim.SGD.step``, and skips a weight without a
    gradient; known answer: theta = 2, grad = 4, wd = 0.5, lr = 0.25 -> 2 * 0.5 - 0.25 * 4 = 0."""
    from interp.train.training import _make_optimizer, _shrink_weights, _update

    c = TrainConfig(optimizer="sgd", lr=0.25, weight_decay=0.5)
    w = torch.full((3,), 2.0, requires_grad=True)
    frozen = torch.full((2,), 2.0, requires_grad=True)  # no gradient this step: left alone
    w.grad = torch.full((3,), 4.0)
    _update(_make_optimizer([w, frozen], c), c)
    assert torch.equal(w.detach(), torch.zeros(3))
    assert torch.equal(frozen.detach(), torch.full((2,), 2.0))

    c = TrainConfig(optimizer="sgd", lr=0.1, weight_decay=1e-6)
    g = torch.Generator().manual_seed(0)
    ours = [torch.randn(5, 7, generator=g, requires_grad=True) for _ in range(3)]
    ref = [t.detach().clone().requires_grad_() for t in ours]
    opt_ours, opt_ref = _make_optimizer(ours, c), _make_optimizer(ref, c)
    for _ in range(3):
        grads = [torch.randn(5, 7, generator=g) for _ in ours]
        for a, b, gr in zip(ours, ref, grads):
            a.grad, b.grad = gr.clone(), gr.clone()
        _update(opt_ours, c)
        _shrink_weights(opt_ref, c)
        opt_ref.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))
    assert opt_ours.state_dict() == opt_ref.state_dict()  # SGD without momentum keeps no state


def test_update_with_momentum_is_sgds_own_step():
    """With momentum, the update is the optimiser's step (its momentum buffer is kept): after two
    steps with grad 1, lr 1, momentum 0.5 and no decay, theta = 0 - 1 - (0.5 + 1) = -2.5."""
    from interp.train.training import _make_optimizer, _update

    c = TrainConfig(optimizer="sgd", lr=1.0, weight_decay=0.0, momentum=0.5)
    w = torch.zeros(2, requires_grad=True)
    opt = _make_optimizer([w], c)
    for _ in range(2):
        w.grad = torch.ones(2)
        _update(opt, c)
    assert torch.equal(w.detach(), torch.full((2,), -2.5))
    assert "momentum_buffer" in opt.state[w]


def test_a_resumed_auto_run_keeps_the_backend_it_trained_with(tmp_path, monkeypatch):
    """``backend=auto`` chooses from the steps left; a resumed run must not choose again, since
    the backends agree only to float rounding and the resumed run must equal the uninterrupted."""
    import interp.train.training as training

    chosen = iter(["fast", "hooked"])  # what auto would say at the start, then at the resume
    monkeypatch.setattr(training, "choose_backend", lambda run: next(chosen))
    train(TASK, MODEL, cfg(backend="auto"), tmp_path / "run", progress=False, stop_after=33)
    state = torch.load(tmp_path / "run" / "checkpoints" / "resume.pt", weights_only=True)
    assert state["backend"] == "fast"
    used = []
    real = training.training_loss
    monkeypatch.setattr(
        training, "training_loss", lambda m, b, **kw: used.append(b) or real(m, b, **kw)
    )
    train(TASK, MODEL, cfg(backend="auto"), tmp_path / "run", resume=True, progress=False)
    assert used == ["fast"]
