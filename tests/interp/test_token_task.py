"""The discrete-token version of the task: sequence structure, vocabulary, metadata, evaluation
sets, and a few training steps of a TransformerBridge on it."""

import math

import pytest
import torch

from interp.data.task import Batch
from interp.data.token_task import (
    TokenTaskBatch,
    TokenTaskConfig,
    TokenTaskGenerator,
    bridge_config,
)
from interp.experiments.token_bridge import train_token_model

TASK = TokenTaskConfig(K=32, L=8, N=4, B=2, p_C=0.5, n_novel=16, n_eval=128)


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _check_structure(batch: TokenTaskBatch, task: TokenTaskConfig) -> None:
    """Every label token is its pair's label id, and the target is the label the context gives
    the query's class (or, with no such item, the class's own label)."""
    assert isinstance(batch, Batch) and batch.tokens.dtype == torch.long
    assert batch.tokens.shape == (len(batch), task.seq_len)
    assert batch.n_labels == task.L
    assert torch.equal(batch.tokens[:, 1:-1:2], batch.item_labels)
    assert ((batch.item_labels >= 0) & (batch.item_labels < task.L)).all()
    items = batch.tokens[:, 0:-1:2]
    assert (items >= task.L).all() and (items < task.d_vocab).all()
    assert torch.equal(batch.positions[0], torch.arange(task.seq_len))
    # one class, one token, within a sequence
    for i in range(len(batch)):
        for c, t in zip(batch.item_classes[i].tolist(), items[i].tolist()):
            same = batch.item_classes[i] == c
            assert (items[i][same] == t).all()


def test_known_items_are_their_class_token_and_carry_its_label():
    iw = TokenTaskGenerator(TASK).iw(64, _g(0))
    _check_structure(iw, TASK)
    assert torch.equal(iw.tokens[:, 0:-1:2], TASK.L + iw.item_classes)
    assert torch.equal(iw.item_labels, iw.item_classes % TASK.L)
    assert torch.equal(iw.tokens[:, -1], TASK.L + iw.query_class)
    assert torch.equal(iw.target, iw.query_class % TASK.L)


def test_ic_uses_novel_tokens_whose_label_only_the_context_gives():
    ic = TokenTaskGenerator(TASK).ic(256, _g(0))
    _check_structure(ic, TASK)
    items = ic.tokens[:, 0:-1:2]
    assert (items >= TASK.L + TASK.K).all()  # the novel pool
    assert (ic.item_classes >= TASK.K).all()
    # B = 2: each of the N / B classes twice; the query is one of them; target = its context label
    mask = ic.query_class_mask()
    assert (mask.sum(-1) == TASK.B).all()
    assert torch.equal(ic.item_labels[mask].view(-1, TASK.B)[:, 0], ic.target)
    assert torch.equal(ic.tokens[:, -1], items[mask].view(-1, TASK.B)[:, 0])
    # the same novel token gets different labels in different sequences
    token_labels = {}
    for t, y in zip(items.flatten().tolist(), ic.item_labels.flatten().tolist()):
        token_labels.setdefault(t, set()).add(y)
    assert max(len(v) for v in token_labels.values()) > 1


def test_ic2_shifts_every_context_label_and_the_target():
    gen = TokenTaskGenerator(TASK)
    ic2 = gen.ic2(64, _g(3))
    _check_structure(ic2, TASK)
    assert torch.equal(ic2.item_labels, (ic2.item_classes + 1) % TASK.L)
    assert torch.equal(ic2.target, (ic2.query_class + 1) % TASK.L)


def test_training_batches_mix_the_kinds_and_are_reproducible():
    gen = TokenTaskGenerator(TASK)
    a = gen.sample(512, _g(7))
    _check_structure(a, TASK)
    b = TokenTaskGenerator(TASK).sample(512, _g(7))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.target, b.target)
    novel = (a.item_classes >= TASK.K).all(-1).float().mean()
    assert abs(float(novel) - TASK.p_C) < 0.1
    sets = gen.eval_sets(seed=1)
    assert list(sets) == ["ic", "ic2", "iw"] and all(len(s) == TASK.n_eval for s in sets.values())
    part = sets["ic"][2:5]
    assert isinstance(part, TokenTaskBatch) and part.n_labels == TASK.L and len(part) == 3


@pytest.mark.parametrize(
    "fields, name",
    [
        (dict(K=30), "K"),
        (dict(B=3), "B"),
        (dict(n_novel=1), "n_novel"),
        (dict(p_C=1.5), "p_C"),
        (dict(N=40), "N"),
    ],
)
def test_invalid_fields_are_named_in_one_line(fields, name):
    with pytest.raises(ValueError, match=rf"^TokenTaskConfig\.{name}=") as err:
        TokenTaskConfig(**{**dict(K=32, L=8, N=4, B=2, n_novel=16), **fields})
    assert "\n" not in str(err.value)


def test_a_bridge_trains_on_it_with_the_training_loop():
    from transformer_lens import TransformerBridge

    from interp.analysis.measures import MEASURES, measure_names
    from interp.train.training import TrainConfig

    bridge = TransformerBridge.boot_native(bridge_config(TASK, d_model=16, seed=0))
    before = {k: v.clone() for k, v in bridge.state_dict().items()}
    cfg = TrainConfig(
        optimizer="adam", lr=1e-2, batch_size=32, steps=4, eval_every=2, weight_decay=0.0
    )
    rows = train_token_model(bridge, TASK, cfg)
    assert rows["step"].tolist() == [0, 2, 4]
    # every measure but those of parts a bridge lacks (the classifier's hidden layers)
    assert {n for n in measure_names() if not MEASURES[n].optional} <= set(rows.columns)
    for column in ("ic_acc", "ic2_acc", "iw_acc", "ila1", "tila2"):
        assert rows[column].between(0, 1).all(), column
    assert all(math.isfinite(v) for v in rows["train_loss"].iloc[1:])
    after = bridge.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_the_token_task_is_registered_and_listed(capsys):
    from interp.cli import main
    from interp.data.tasks import get_task, task_name
    from interp.data.token_task import TokenTaskConfig, TokenTaskGenerator

    task = get_task("discrete-tokens")
    assert task.config is TokenTaskConfig and task.generator is TokenTaskGenerator
    assert task.layout == "pairs" and task.eval_sets == ("ic", "ic2", "iw")
    assert task_name(TokenTaskConfig()) == "discrete-tokens"
    assert main(["list", "tasks"]) == 0
    assert "discrete-tokens" in capsys.readouterr().out
