import pytest
import torch

from interp.data.task import TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(K=64, L=32, N=8, B=2, n_eval=64)


@pytest.fixture(scope="module")
def batch():
    return TaskGenerator(TASK, 0).sample(16, torch.Generator().manual_seed(0))


def test_hooks_present_with_documented_shapes(batch):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    b, p, D, P, d = 16, 17, 63, 65, 128
    expected = {
        "hook_embed": (b, p, D),
        "hook_pos_embed": (b, p, P),
        "hook_logits": (b, 32),
    }
    for layer in range(2):
        expected |= {
            f"blocks.{layer}.hook_resid_pre": (b, p, d),
            f"blocks.{layer}.attn.hook_q": (b, p, 1, d),
            f"blocks.{layer}.attn.hook_k": (b, p, 1, d),
            f"blocks.{layer}.attn.hook_v": (b, p, 1, d),
            f"blocks.{layer}.attn.hook_attn_scores": (b, 1, p, p),
            f"blocks.{layer}.attn.hook_pattern": (b, 1, p, p),
            f"blocks.{layer}.attn.hook_z": (b, p, 1, d),
            f"blocks.{layer}.hook_attn_out": (b, p, d),
            f"blocks.{layer}.hook_resid_post": (b, p, d),
        }
    for i in range(3):
        expected[f"classifier.hook_hidden_{i}"] = (b, 128)
    for name, shape in expected.items():
        assert tuple(cache[name].shape) == shape, name
    assert set(expected) == set(model.hook_dict)


def test_weight_shapes_and_fixed_identity_W_O():
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    attn = model.blocks[0].attn
    assert attn.W_Q.shape == attn.W_K.shape == attn.W_V.shape == (1, 128, 128)
    assert attn.W_O.shape == (1, 128, 128) and torch.equal(attn.W_O[0], torch.eye(128))
    assert "blocks.0.attn.W_O" not in dict(model.named_parameters())
    # init N(0, 1/D)
    assert abs(attn.W_Q.std().item() - 63**-0.5) < 0.01


def test_zero_attention_weights_give_uniform_causal_patterns(batch):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_()
            block.attn.W_K.zero_()
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    causal = torch.ones(17, 17).tril()
    uniform = causal / causal.sum(-1, keepdim=True)
    for layer in range(2):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][:, 0]
        assert torch.allclose(pattern, uniform.expand_as(pattern), atol=1e-6)


def test_attention_is_causal_and_matches_the_paper_formula(batch):
    model = InductionNet(ModelConfig.from_task(TASK), seed=1)
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    attn = model.blocks[0].attn
    u = cache["blocks.0.hook_resid_pre"]
    scores = (u @ attn.W_Q[0]) @ (u @ attn.W_K[0]).transpose(1, 2)  # no 1/sqrt(d)
    mask = torch.ones(17, 17, dtype=torch.bool).tril()
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ (u @ attn.W_V[0])
    assert torch.allclose(cache["blocks.0.hook_attn_out"], expected, atol=1e-5)
    assert torch.allclose(cache["blocks.0.hook_resid_post"], u + expected, atol=1e-5)


def test_no_hooks_remain_after_run_with_hooks(batch):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    seen = []
    model.run_with_hooks(
        batch.tokens,
        batch.positions,
        fwd_hooks=[("blocks.1.attn.hook_pattern", lambda x, hook: seen.append(1))],
    )
    assert seen == [1]
    assert all(len(hp._forward_hooks) == 0 for hp in model.hook_dict.values())


def test_same_seed_same_weights():
    a = InductionNet(ModelConfig.from_task(TASK), seed=4)
    b = InductionNet(ModelConfig.from_task(TASK), seed=4)
    for (_, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(positional="rope9"), "positional"),
        (dict(attn_scale="cube"), "attn_scale"),
        (dict(n_heads=0), "n_heads"),
    ],
)
def test_invalid_model_config(kwargs, field):
    with pytest.raises(ValueError, match=rf"ModelConfig\.{field}="):
        ModelConfig.from_task(TASK, **kwargs)


def test_wrong_token_width_is_rejected(batch):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    with pytest.raises(ValueError, match="D=63"):
        model(batch.tokens[..., :10], batch.positions)
