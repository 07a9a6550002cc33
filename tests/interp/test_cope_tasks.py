"""CoPE's token tasks: generators checked against a direct interpreter, and the token network."""

import warnings

import pytest
import torch

from interp.data.cope_tasks import IGNORE, Counting, FlipFlop, SelectiveCopy
from interp.model.positional import UntrainedPositionWarning
from interp.model.token_net import TokenNet, token_model_config
from interp.train.token_training import token_accuracy, train_token_task


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def test_flipflop_targets_are_the_last_written_bit():
    task = FlipFlop(n_instr=12, p_ignore=0.5)
    batch = task.sample(64, _g())
    assert batch.tokens.shape == (64, 24) and batch.tokens.max() < task.d_vocab
    n_reads = 0
    for tokens, targets in zip(batch.tokens.tolist(), batch.targets.tolist()):
        assert tokens[0] == task.W
        memory = None
        for t in range(0, 24, 2):
            instr, bit = tokens[t], tokens[t + 1]
            if instr == task.W:
                memory = bit
            if instr == task.R:
                n_reads += 1
                assert bit == memory and targets[t] == memory
            else:
                assert targets[t] == IGNORE
            assert targets[t + 1] == IGNORE
    assert n_reads > 50
    sets = task.test_sets(16, seed=1)
    assert sets["ood_long"].tokens.shape == (16, 48)
    ignores = (sets["ood_sparse"].tokens[:, 0::2] == task.I).float().mean()
    assert ignores > 0.85


def test_selective_copy_targets_are_the_data_in_order():
    task = SelectiveCopy(n_data=3, n_region=10, n_symbols=5)
    batch = task.sample(32, _g())
    assert batch.tokens.shape == (32, task.seq_len) == (32, 14)
    for tokens, targets in zip(batch.tokens.tolist(), batch.targets.tolist()):
        data = [t for t in tokens[:10] if t != task.BLANK]
        assert len(data) == 3 and tokens[10] == task.SEP and tokens[11:] == data
        assert targets[10:13] == data and set(targets[:10] + targets[13:]) == {IGNORE}
    assert task.test_sets(8, seed=0)["ood_sparse"].tokens.shape == (8, 24)


def test_counting_targets_follow_an_interpreter():
    task = Counting(n_vars=2, n_statements=10, n_values=5, p_filler=0.3)
    batch = task.sample(64, _g(2))
    assert batch.tokens.shape == (64, task.seq_len) and batch.tokens.max() < task.d_vocab
    n_prints = 0
    for tokens, targets in zip(batch.tokens.tolist(), batch.targets.tolist()):
        values = {}
        for s in range(0, len(tokens), 3):
            a, b, c = tokens[s : s + 3]
            if a == b == c == task.FILL:
                continue
            if a == task.PRINT:
                n_prints += 1
                want = 4 + 2 + values[b - 4]
                assert c == want and targets[s + 1] == want
                continue
            var = a - 4
            if b == task.SET:
                values[var] = c - 4 - 2
            else:
                assert b == task.INC
                values[var] = (values[var] + 1) % 5
            assert targets[s + 1] == IGNORE
    assert n_prints > 30


@pytest.mark.parametrize("positional", ["learned", "rope", "cope", "none", "onehot"])
def test_token_net_shapes_hooks_and_determinism(positional):
    task = FlipFlop(n_instr=8)
    cfg = token_model_config(task, positional)
    model = TokenNet(cfg, seed=0)
    batch = task.sample(4, _g())
    logits, cache = model.run_with_cache(batch.tokens)
    assert logits.shape == (4, 16, task.d_vocab)
    assert cache["hook_embed"].shape == (4, 16, 32)
    assert cache["blocks.1.attn.hook_pattern"].shape == (4, 1, 16, 16)
    assert cache["classifier.hook_hidden_0"].shape == (4, 16, 64)
    if positional == "cope":
        assert cache["blocks.0.attn.hook_cope_gates"].shape == (4, 1, 16, 16)
    assert torch.equal(TokenNet(cfg, seed=0)(batch.tokens), logits)
    long = task.sample(2, _g(), n_instr=16).tokens
    if positional in ("learned", "onehot"):
        with pytest.warns(UntrainedPositionWarning):
            model(long)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model(long)


def test_training_on_flipflop_learns_in_distribution():
    task = FlipFlop(n_instr=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrainedPositionWarning)
        model, df = train_token_task(
            task, token_model_config(task, "cope"), steps=150, eval_every=75, n_test=128
        )
    assert list(df.step) == [0, 75, 150]
    assert {"id_acc", "ood_sparse_acc", "ood_long_acc", "id_seq_acc"} <= set(df.columns)
    assert df.id_acc.iloc[-1] > 0.8
    acc = token_accuracy(model, task.sample(64, _g(9)))
    assert 0 <= acc["acc"] <= 1 and 0 <= acc["seq_acc"] <= 1


def test_token_tasks_train_through_the_one_loop():
    """The token tasks use interp.train.training's loop: a NaN loss stops the run with the loop's
    TrainingDiverged instead of training on silently (the old private loop's behaviour)."""
    import warnings

    from interp.data.cope_tasks import FlipFlop
    from interp.model.token_net import token_model_config
    from interp.train.token_training import train_token_task
    from interp.train.training import TrainingDiverged

    task = FlipFlop(n_instr=8)
    with warnings.catch_warnings(), pytest.raises(TrainingDiverged, match="token task"):
        warnings.simplefilter("ignore")
        train_token_task(task, token_model_config(task, "learned"), steps=50, lr=1e12, n_test=32)
