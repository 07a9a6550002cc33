"""The three defaults that follow the author's code (weight decay, classifier initialisation,
novel-class pool), the old forms kept as options, and old run directories migrated to them."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train, train_many
from interp.io.rundir import load_run
from interp.model.network import InductionNet, ModelConfig
from interp.train.training import _single_step

TASK = TaskConfig()  # the paper's task


def _zero_gradient_step(cfg: TrainConfig, model: InductionNet) -> None:
    """One step of the training loop's step function with a loss whose gradient is exactly 0."""
    run = SimpleNamespace(
        model=model,
        cfg=cfg,
        optimizer_state=None,
        sample=lambda: None,
        batch_loss=lambda batch: sum((p * 0.0).sum() for p in model.parameters()),
        diverged=lambda value: AssertionError(value),
        loss_sum=0.0,
        loss_count=0,
        step=0,
    )
    _single_step(run)()


def test_default_weight_decay_is_the_authors_multiplicative_shrink():
    cfg = TrainConfig()
    assert (cfg.weight_decay, cfg.weight_decay_form) == (1e-6, "multiplicative")
    assert cfg.is_paper_optimizer and cfg.deviation_note() == ""
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _zero_gradient_step(cfg, model)
    for name, value in model.named_parameters():
        # exactly (1 - 1e-6) * theta, whatever the lr: the author's theta <- (1 - wd) theta - lr g
        assert torch.equal(value.detach(), before[name] * (1.0 - 1e-6)), name
        assert not torch.equal(value.detach(), before[name]), name


def test_coupled_weight_decay_shrinks_by_lr_times_decay_and_is_flagged():
    cfg = TrainConfig(weight_decay_form="coupled")
    assert not cfg.is_paper_optimizer
    assert "coupled" in cfg.deviation_note()
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _zero_gradient_step(cfg, model)
    for name, value in model.named_parameters():
        expected = before[name] * (1.0 - cfg.lr * cfg.weight_decay)  # 100x weaker at lr 0.01
        torch.testing.assert_close(value.detach(), expected, rtol=0, atol=1e-12)
        assert not torch.equal(value.detach(), before[name] * (1.0 - 1e-6)), name


def test_the_shrink_also_acts_on_adam_and_on_stacked_training(tmp_path):
    """A strong decay (0.05 per step: weights x0.05 over 60 steps) must act alike in a single run
    and in a stack of seeds; a stacked step without it would end 20x larger."""
    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128)
    mcfg = ModelConfig.from_task(task, d_mlp=32)
    kw = dict(
        optimizer="adam",
        lr=1e-3,
        batch_size=32,
        steps=60,
        eval_every=30,
        checkpoint_every=60,
        n_log_checkpoints=0,
        weight_decay=0.05,
    )
    train_many(
        task,
        mcfg,
        TrainConfig(**kw),
        seeds=[0, 1],
        out_dirs=[tmp_path / "m0", tmp_path / "m1"],
        progress=False,
    )
    train(task, mcfg, TrainConfig(**kw, seed=1), tmp_path / "s1", progress=False)
    stacked = load_run(tmp_path / "m1").load_model().state_dict()
    single = load_run(tmp_path / "s1").load_model().state_dict()
    init = InductionNet(mcfg, seed=None).state_dict()  # shapes only
    for k in single:
        torch.testing.assert_close(stacked[k], single[k], rtol=1e-3, atol=1e-5, msg=k)
    w = single["classifier.readout.weight"]
    assert w.abs().mean() < 0.3 * (1 / math.sqrt(32)), "the decay did not shrink the readout"
    assert init.keys() == single.keys()


def test_classifier_init_follows_the_authors_code():
    cfg = ModelConfig.from_task(TASK)
    assert cfg.readout_init == "author"
    model = InductionNet(cfg, seed=0)
    readout = model.classifier.readout
    assert readout.bias is None  # the author's readout has no bias
    d = readout.in_features
    assert readout.weight.std().item() == pytest.approx(1 / math.sqrt(d), rel=0.05)  # N(0, 1/d)
    for layer in model.classifier.hidden:
        assert layer.weight.std().item() == pytest.approx(
            math.sqrt(2 / layer.in_features), rel=0.05
        )  # He
        assert torch.all(layer.bias == layer.bias[0])  # one scalar per layer at init
        assert layer.bias.requires_grad
    # The scalar hidden biases are N(0, 1/d_in): their spread over seeds.
    first = torch.tensor(
        [InductionNet(cfg, seed=s).classifier.hidden[1].bias[0].item() for s in range(300)]
    )
    assert first.std().item() == pytest.approx(1 / math.sqrt(cfg.d_mlp), rel=0.15)
    assert abs(first.mean().item()) < 3 / math.sqrt(cfg.d_mlp * 300)


def test_he_readout_init_is_the_old_form():
    model = InductionNet(ModelConfig.from_task(TASK, readout_init="he"), seed=0)
    readout = model.classifier.readout
    assert readout.bias is not None and torch.all(readout.bias == 0)
    assert readout.weight.std().item() == pytest.approx(
        math.sqrt(2 / readout.in_features), rel=0.05
    )
    for layer in model.classifier.hidden:
        assert torch.all(layer.bias == 0)
    with pytest.raises(ValueError, match="readout_init='x' is invalid"):
        ModelConfig.from_task(TASK, readout_init="x")


def test_novel_classes_come_from_a_pool_of_128_per_call():
    task = TaskConfig(p_C=1.0, eps=0.0)  # eps 0: every item of a class is its mean
    assert task.novel_pool == 128
    gen = TaskGenerator(task, seed=0)
    g = torch.Generator().manual_seed(0)
    a, b = gen.sample(512, g), gen.sample(512, g)
    ids_a = torch.unique(a.item_classes)
    assert 100 < len(ids_a) <= 128  # 512 sequences x 4 classes drawn from 128
    assert set(ids_a.tolist()).isdisjoint(torch.unique(b.item_classes).tolist())  # fresh pool
    assert torch.equal((a.item_classes - task.K) % task.L, a.item_labels)  # class c: label c mod L
    # The same pool class in two sequences is the same mean vector.
    items = a.tokens[:, 0:-1:2]
    cls = a.item_classes
    first_seq = {}
    for s in range(64):
        for j in range(task.N):
            c = int(cls[s, j])
            if c in first_seq:
                torch.testing.assert_close(items[s, j], first_seq[c], rtol=0, atol=1e-6)
            first_seq[c] = items[s, j]
    # The evaluation set is one call too: its IC classes come from one pool.
    ic = gen.eval_sets(seed=1, n=1024)["ic"]
    assert len(torch.unique(ic.item_classes)) <= 128


def test_per_sequence_novel_classes_remain_an_option():
    task = TaskConfig(p_C=1.0, novel_pool=None)
    a = TaskGenerator(task, seed=0).sample(512, torch.Generator().manual_seed(0))
    assert len(torch.unique(a.item_classes)) == 512 * task.N // task.B  # never reused
    for bad in (100, 0, -32):  # not a positive multiple of L=32
        with pytest.raises(ValueError, match="novel_pool"):
            TaskConfig(novel_pool=bad)


def test_a_format_2_run_opens_with_the_old_forms_marked(tmp_path):
    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=128, novel_pool=None)
    mcfg = ModelConfig.from_task(task, d_mlp=32, readout_init="he", hidden_bias="per_unit")
    tcfg = TrainConfig(
        optimizer="adam",
        lr=1e-3,
        batch_size=32,
        steps=20,
        eval_every=10,
        checkpoint_every=20,
        n_log_checkpoints=0,
        weight_decay_form="coupled",
    )
    metrics = train(task, mcfg, tcfg, tmp_path / "old", progress=False)
    path = tmp_path / "old" / "config.json"
    config = json.loads(path.read_text())
    config["format_version"] = 2
    del config["task"]["novel_pool"], config["model"]["readout_init"]
    del config["model"]["hidden_bias"]
    del config["train"]["weight_decay_form"]
    path.write_text(json.dumps(config))
    run = load_run(tmp_path / "old")
    assert run.task.novel_pool is None
    assert run.model_config.readout_init == "he"
    assert run.model_config.hidden_bias == "per_unit"
    assert run.train_config.weight_decay_form == "coupled"
    notes = " ".join(run.notes)
    assert "format version 2" in notes
    for field in (
        "task.novel_pool",
        "model.readout_init",
        "model.hidden_bias",
        "train.weight_decay_form",
    ):
        assert field in notes
    model = run.load_model()  # the old checkpoint (with its readout bias) loads
    assert model.classifier.readout.bias is not None
    assert model.classifier.hidden[0].bias.shape == (32,)  # and its per-unit hidden biases
    np.testing.assert_allclose(run.metrics["ic_acc"], metrics["ic_acc"])
