"""Known answers of the positional part of layer-1 scores (``interp.analysis.score_terms``)."""

import math

import pytest
import torch

from interp.analysis.score_terms import score_terms
from interp.cli import main
from interp.data.task import TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(K=64, L=32, N=8, B=2, p_C=0.5)
D = TASK.D


@pytest.fixture(scope="module")
def batch():
    b = TaskGenerator(TASK, 0).sample(32, torch.Generator().manual_seed(1))
    b.tokens = b.tokens.double()
    return b


def _model(**overrides):
    return InductionNet(ModelConfig.from_task(TASK, **overrides), seed=0).double()


def _margin(score, n_pairs=TASK.N):
    """Mean over label rows t = 1, 3, .. of score(t, t-1) - mean of score(t, j), j <= t,
    j != t-1."""
    total = 0.0
    for i in range(n_pairs):
        t = 2 * i + 1
        others = [score(t, j) for j in range(t + 1) if j != t - 1]
        total += score(t, t - 1) - sum(others) / len(others)
    return total / n_pairs


def test_rope_with_biases_only_scores_cos_of_the_distance(batch):
    # W_Q = W_K = 0 and b_Q = b_K = e_0: the rotated biases score cos((i - j) theta_0), theta_0 = 1.
    model = _model(positional="rope", d_head=64, qk_bias=True)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.W_Q.zero_()
        attn.W_K.zero_()
        attn.b_Q.zero_()
        attn.b_K.zero_()
        attn.b_Q[0, 0] = attn.b_K[0, 0] = 1.0
    terms = score_terms(model, batch)
    expected = _margin(lambda t, j: math.cos(t - j))
    assert terms["pos_margin_content_free"] == pytest.approx(expected, abs=1e-6)
    assert terms["pos_margin"] == pytest.approx(expected, abs=1e-6)  # no content term at all
    assert terms["pos_share"] == pytest.approx(1.0, abs=1e-9)


def test_rope_without_biases_has_no_content_free_term(batch):
    terms = score_terms(_model(positional="rope", d_head=64), batch)
    assert terms["pos_margin_content_free"] == 0.0
    # what remains positional comes from correlated contents only: a small share
    assert 0.0 <= terms["pos_share"] < 0.2


def test_one_hot_content_free_scores_are_the_position_position_term(batch):
    model = _model()
    W_Q = model.blocks[0].attn.W_Q[0].detach()  # [d_model, d_head]; positions at D + p
    W_K = model.blocks[0].attn.W_K[0].detach()
    pos = batch.positions.double()

    def score(t, j):  # p_t^T W_Q W_K^T p_j, averaged over the batch's offsets
        values = [float(W_Q[D + int(p[t])] @ W_K[D + int(p[j])]) for p in batch.positions]
        return sum(values) / len(values)

    assert pos.shape[1] == 2 * TASK.N + 1
    terms = score_terms(model, batch)
    assert terms["pos_margin_content_free"] == pytest.approx(_margin(score), rel=1e-9)


def test_a_key_bias_without_rope_changes_no_term(batch):
    plain = _model(qk_bias=True)
    biased = _model(qk_bias=True)
    with torch.no_grad():
        biased.blocks[0].attn.b_K.normal_(generator=torch.Generator().manual_seed(3))
    a, b = score_terms(plain, batch), score_terms(biased, batch)
    for name in a:
        assert b[name] == pytest.approx(a[name], abs=1e-9), name
    # under RoPE the same key bias is a positional term
    rope = _model(positional="rope", d_head=64, qk_bias=True)
    with torch.no_grad():
        rope.blocks[0].attn.b_Q.normal_(generator=torch.Generator().manual_seed(4))
        before = score_terms(rope, batch)["pos_margin_content_free"]
        rope.blocks[0].attn.b_K.normal_(generator=torch.Generator().manual_seed(3))
    assert abs(score_terms(rope, batch)["pos_margin_content_free"] - before) > 0.1


def test_measures_command_adds_the_score_terms(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    assert main(["measures", str(out), "--n", "64", "--score-terms"]) == 0
    import pandas as pd

    df = pd.read_csv(out / "checkpoint_measures.csv")
    got = set(df["measure"])
    assert {"l1_pos_margin", "l1_pos_margin_content_free", "l1_pos_share"} <= got
    assert {"ic_acc", "ila1"} <= got


def test_rope_constant_dimension_is_a_bias_learned_through_the_weights(batch):
    from interp.train.overrides import build_configs

    _, cfg, _, _ = build_configs(
        "tiny", {"positional": "rope", "d_head": "64", "rope_constant_dim": "true"}, seed=0
    )
    assert cfg.positional_config.constant_dim is True
    model = _model(positional="rope", d_head=64, positional_config={"constant_dim": True})
    assert model.cfg.d_model == D + 1
    _, cache = model.run_with_cache(
        batch.tokens, batch.positions, names_filter=["blocks.0.hook_resid_pre"]
    )
    resid = cache["blocks.0.hook_resid_pre"]
    assert torch.equal(resid[..., :D], batch.tokens) and bool((resid[..., D] == 1).all())
    # W_Q, W_K reading only the constant: q = k = e_0 at every token, scores cos(i - j)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.W_Q.zero_()
        attn.W_K.zero_()
        attn.W_Q[0, D, 0] = attn.W_K[0, D, 0] = 1.0
    terms = score_terms(model, batch)
    assert terms["pos_margin_content_free"] == pytest.approx(
        _margin(lambda t, j: math.cos(t - j)), abs=1e-6
    )
    assert terms["pos_share"] == pytest.approx(1.0, abs=1e-9)
