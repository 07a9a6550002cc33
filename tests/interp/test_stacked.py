import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp.data.task import TaskConfig, TaskGenerator
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.model.stacked import ModelStack, stacked_logits, supports_stacking

TASK = TaskConfig(K=64, L=32, N=8, B=2, p_C=0.5)


def _batches(n_models: int, size: int = 16):
    gen = TaskGenerator(TASK, 0)
    return [gen.sample(size, torch.Generator().manual_seed(10 + i)) for i in range(n_models)]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(attn_scale="log_n"),
        dict(positional="learned"),
        dict(positional="none", attn_scale="sqrt"),
        dict(d_head=48),  # q and k projected; W_V W_O is not the identity
    ],
)
def test_stacked_models_equal_separate_models_logits_and_gradients(overrides):
    cfg = ModelConfig.from_task(TASK, **overrides)
    batches = _batches(3)
    separate = [InductionNet(cfg, seed=s).double() for s in range(3)]
    stack = ModelStack([InductionNet(cfg, seed=s).double() for s in range(3)])
    tokens = torch.stack([b.tokens.double() for b in batches])
    positions = torch.stack([b.positions for b in batches])
    logits = stacked_logits(stack, tokens, positions)
    targets = torch.stack([b.target for b in batches])
    # The sum of the models' mean losses: each model's gradient is its own loss's gradient.
    F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(3, -1).mean(
        1
    ).sum().backward()
    for i, (model, batch) in enumerate(zip(separate, batches)):
        ref = model(batch.tokens.double(), batch.positions)
        torch.testing.assert_close(logits[i], ref, rtol=1e-10, atol=1e-10)
        F.cross_entropy(ref, batch.target).backward()
        for name, param in model.named_parameters():
            torch.testing.assert_close(
                stack.params[name].grad[i], param.grad, rtol=1e-9, atol=1e-11, msg=name
            )


def test_optimizer_step_on_the_stack_updates_every_model_like_separate_training():
    cfg = ModelConfig.from_task(TASK)
    batches = _batches(2)
    separate = [InductionNet(cfg, seed=s).double() for s in range(2)]
    models = [InductionNet(cfg, seed=s).double() for s in range(2)]
    stack = ModelStack(models)
    opt = torch.optim.Adam(stack.parameters(), lr=1e-3, weight_decay=1e-6)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=1e-6) for m in separate]
    tokens = torch.stack([b.tokens.double() for b in batches])
    positions = torch.stack([b.positions for b in batches])
    targets = torch.stack([b.target for b in batches])
    for _ in range(3):
        logits = stacked_logits(stack, tokens, positions)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
        opt.zero_grad()
        loss.view(2, -1).mean(1).sum().backward()
        opt.step()
        for model, o, batch in zip(separate, opts, batches):
            o.zero_grad()
            F.cross_entropy(
                fast_logits(model, batch.tokens.double(), batch.positions), batch.target
            ).backward()
            o.step()
    for model, ref in zip(models, separate):  # the stacked models' own parameters moved too
        for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-11, msg=name)


def test_stack_refuses_unsupported_and_mixed_models():
    with pytest.raises(ValueError, match="cannot be stacked"):
        ModelStack([InductionNet(ModelConfig.from_task(TASK, n_heads=2, d_head=32), seed=0)])
    with pytest.raises(ValueError, match="different configs"):
        ModelStack(
            [
                InductionNet(ModelConfig.from_task(TASK), seed=0),
                InductionNet(ModelConfig.from_task(TASK, attn_scale="sqrt"), seed=0),
            ]
        )
    assert not supports_stacking(InductionNet(ModelConfig.from_task(TASK, n_layers=3), seed=0))


# --- train_many: several seeds trained together, each into its own ordinary run directory ---

from interp.config.train_config import TrainConfig  # noqa: E402
from interp.experiments.standard import train, train_many  # noqa: E402
from interp.io.rundir import RunDirectoryError, load_run  # noqa: E402

SMALL = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
SMALL_MODEL = ModelConfig.from_task(SMALL, d_mlp=32)


def _cfg(**kw):
    base = dict(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=60,
        eval_every=20,
        checkpoint_every=40,
        n_log_checkpoints=3,
    )
    return TrainConfig(**{**base, **kw})


def test_train_many_gives_each_seed_the_run_train_gives_it(tmp_path):
    many = train_many(
        SMALL,
        SMALL_MODEL,
        _cfg(),
        seeds=[0, 1],
        out_dirs=[tmp_path / "m0", tmp_path / "m1"],
        progress=False,
    )
    for seed, metrics in zip([0, 1], many):
        single = train(SMALL, SMALL_MODEL, _cfg(seed=seed), tmp_path / f"s{seed}", progress=False)
        assert list(metrics["step"]) == [0, 20, 40, 60]
        for col in ("train_loss", "ic_loss", "iw_loss", "ila1", "tila2"):
            np.testing.assert_allclose(metrics[col], single[col], rtol=1e-3, atol=1e-5, err_msg=col)
        # Same directory format: config (with its seed), checkpoints, reopenable.
        run = load_run(tmp_path / f"m{seed}")
        assert run.train_config.seed == seed
        assert run.checkpoint_steps == load_run(tmp_path / f"s{seed}").checkpoint_steps
        a, b = (
            run.load_model().state_dict(),
            load_run(tmp_path / f"s{seed}").load_model().state_dict(),
        )
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=1e-3, atol=1e-5)
    # The seeds really are different runs.
    assert not np.allclose(many[0]["train_loss"][1:], many[1]["train_loss"][1:])


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_train_many_interrupted_then_resumed_equals_uninterrupted(tmp_path, optimizer):
    kw = dict(optimizer=optimizer, lr=3e-3 if optimizer == "adam" else 0.05, momentum=0.0)
    dirs = lambda name: [tmp_path / f"{name}{s}" for s in (0, 1, 2)]  # noqa: E731
    full = train_many(SMALL, SMALL_MODEL, _cfg(**kw), [0, 1, 2], dirs("full"), progress=False)
    train_many(
        SMALL, SMALL_MODEL, _cfg(**kw), [0, 1, 2], dirs("part"), progress=False, stop_after=33
    )
    resumed = train_many(
        SMALL, SMALL_MODEL, _cfg(**kw), [0, 1, 2], dirs("part"), resume=True, progress=False
    )
    for a, b in zip(full, resumed):
        pd.testing.assert_frame_equal(a, b)
    # A stacked run's resume state is an ordinary one: train() continues it alone.
    train_many(
        SMALL, SMALL_MODEL, _cfg(**kw), [5, 6], dirs("mixed")[:2], progress=False, stop_after=33
    )
    alone = train(
        SMALL, SMALL_MODEL, _cfg(seed=5, **kw), tmp_path / "mixed0", resume=True, progress=False
    )
    ref = train(SMALL, SMALL_MODEL, _cfg(seed=5, **kw), tmp_path / "ref", progress=False)
    np.testing.assert_allclose(alone["ic_loss"], ref["ic_loss"], rtol=1e-3, atol=1e-5)


def test_train_many_refusals(tmp_path):
    with pytest.raises(ValueError, match="intervention"):
        train_many(SMALL, SMALL_MODEL, _cfg(intervention="uniform_layer1"), [0, 1], progress=False)
    with pytest.raises(ValueError, match="cannot be trained stacked"):
        train_many(
            SMALL, ModelConfig.from_task(SMALL, n_heads=2, d_head=8), _cfg(), [0, 1], progress=False
        )
    with pytest.raises(ValueError, match="distinct seeds"):
        train_many(SMALL, SMALL_MODEL, _cfg(), [0, 0], progress=False)
    train(SMALL, SMALL_MODEL, _cfg(seed=0), tmp_path / "a", progress=False, stop_after=20)
    train(SMALL, SMALL_MODEL, _cfg(seed=1), tmp_path / "b", progress=False, stop_after=40)
    with pytest.raises(RunDirectoryError, match="different steps"):
        train_many(
            SMALL,
            SMALL_MODEL,
            _cfg(),
            [0, 1],
            [tmp_path / "a", tmp_path / "b"],
            resume=True,
            progress=False,
        )
