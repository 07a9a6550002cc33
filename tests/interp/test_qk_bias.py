"""Known answers of ``qk_bias``: trainable biases on W_Q and W_K, hooked model, fast path, stack."""

import pytest
import torch
import torch.nn.functional as F

from interp.cli import build_configs, main
from interp.data.task import TaskConfig, TaskGenerator
from interp.model.fast import fast_logits, fast_patterns, supports_fast_path
from interp.model.network import InductionNet, ModelConfig
from interp.model.stacked import ModelStack, stacked_logits, supports_stacking

TASK = TaskConfig(K=64, L=32, N=8, B=2, p_C=0.5)


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.fixture(scope="module")
def batch():
    return TaskGenerator(TASK, 0).sample(16, torch.Generator().manual_seed(1))


def _model(seed=0, **overrides):
    """A float64 model with nonzero query and key biases in every layer."""
    model = InductionNet(ModelConfig.from_task(TASK, qk_bias=True, **overrides), seed=seed)
    model = model.double()
    with torch.no_grad():
        for layer, block in enumerate(model.blocks):
            block.attn.b_Q.copy_(_randn(*block.attn.b_Q.shape, seed=100 + layer))
            block.attn.b_K.copy_(_randn(*block.attn.b_K.shape, seed=200 + layer))
    return model


def _layer1(model, batch):
    names = ("hook_q", "hook_attn_scores", "hook_pattern")
    _, cache = model.run_with_cache(
        batch.tokens.double(),
        batch.positions,
        names_filter=[f"blocks.0.attn.{n}" for n in names],
    )
    return (cache[f"blocks.0.attn.{n}"] for n in names)


def test_default_is_the_paper_without_biases():
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    assert not any(n.endswith(("b_Q", "b_K")) for n, _ in model.named_parameters())
    biased = InductionNet(ModelConfig.from_task(TASK, qk_bias=True), seed=0)
    attn = biased.blocks[0].attn
    assert attn.b_Q.shape == attn.b_K.shape == (1, 128) and attn.b_Q.requires_grad
    assert torch.count_nonzero(attn.b_Q) == 0 and torch.count_nonzero(attn.b_K) == 0
    # zero-initialised biases: the same function as the paper's network with the same seed
    batch = TaskGenerator(TASK, 0).sample(4, torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        biased(batch.tokens, batch.positions), model(batch.tokens, batch.positions)
    )


@pytest.mark.parametrize("positional", ["onehot", "none"])
def test_key_bias_adds_a_per_query_constant_that_the_softmax_cancels(batch, positional):
    model = _model(positional=positional)
    with torch.no_grad():
        model.blocks[0].attn.b_Q.zero_()  # queries without bias: q_i = u_i W_Q
    q, scores, pattern = _layer1(model, batch)
    b_K = model.blocks[0].attn.b_K.detach().clone()
    with torch.no_grad():
        model.blocks[0].attn.b_K.zero_()
    _, scores0, pattern0 = _layer1(model, batch)
    causal = torch.ones(17, 17, dtype=torch.bool).tril()
    # known answer: scores change by q_i . b_K, the same for every key j of query i
    shift = torch.einsum("bqhe,he->bhq", q, b_K)[..., None].expand_as(scores)
    torch.testing.assert_close((scores - scores0)[..., causal], shift[..., causal])
    assert shift.abs().max() > 1.0  # a large shift, and yet:
    torch.testing.assert_close(pattern, pattern0, rtol=0, atol=1e-12)


def test_key_bias_changes_attention_under_rope(batch):
    model = _model(positional="rope", d_head=64)
    with torch.no_grad():
        model.blocks[0].attn.b_Q.zero_()
    _, _, pattern = _layer1(model, batch)
    with torch.no_grad():
        model.blocks[0].attn.b_K.zero_()
    _, _, pattern0 = _layer1(model, batch)
    # the rotated key bias R_j b_K scores q_i . R_j b_K, which depends on the key's position
    assert (pattern - pattern0).abs().max() > 0.05


def test_query_bias_adds_b_Q_dot_k_j(batch):
    model = _model()
    with torch.no_grad():
        model.blocks[0].attn.b_K.zero_()
    _, cache = model.run_with_cache(batch.tokens.double(), batch.positions)
    k, scores = cache["blocks.0.attn.hook_k"], cache["blocks.0.attn.hook_attn_scores"]
    b_Q = model.blocks[0].attn.b_Q.detach().clone()
    with torch.no_grad():
        model.blocks[0].attn.b_Q.zero_()
    _, cache0 = model.run_with_cache(batch.tokens.double(), batch.positions)
    causal = torch.ones(17, 17, dtype=torch.bool).tril()
    expected = torch.einsum("he,bkhe->bhk", b_Q, k)[:, :, None].expand_as(scores)
    diff = scores - cache0["blocks.0.attn.hook_attn_scores"]
    torch.testing.assert_close(diff[..., causal], expected[..., causal])
    assert (
        cache["blocks.0.attn.hook_pattern"] - cache0["blocks.0.attn.hook_pattern"]
    ).abs().max() > 0.01


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # W_Q W_K^T formed: b_Q enters as b_Q W_K^T, b_K left out
        dict(d_head=48),  # q and k projected: both biases added
        dict(n_heads=2, d_head=32, attn_scale="log_n"),
        dict(positional="learned", attn_scale="sqrt"),
        dict(n_layers=3),
        dict(n_layers=1),
    ],
)
def test_fast_path_with_qk_bias_equals_hooked_model(batch, overrides):
    model = _model(**overrides)
    assert supports_fast_path(model)
    tokens = batch.tokens.double()

    def run(fn):
        model.zero_grad(set_to_none=True)
        logits = fn()
        F.cross_entropy(logits, batch.target).backward()
        grads = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
        return logits.detach(), grads

    ref, ref_grads = run(lambda: model(tokens, batch.positions))
    fast, fast_grads = run(lambda: fast_logits(model, tokens, batch.positions))
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    for name, grad in ref_grads.items():
        if fast_grads[name] is None:
            # only a key bias the fast path leaves out; the softmax cancels it, so its exact
            # gradient is zero and the hooked model's is rounding
            assert name.endswith("b_K") and grad.abs().max() < 1e-12, name
        else:
            torch.testing.assert_close(fast_grads[name], grad, rtol=1e-9, atol=1e-11, msg=name)
    assert any(
        n.endswith("b_Q") and g.abs().max() > 1e-6 for n, g in fast_grads.items() if g is not None
    )
    _, patterns = fast_patterns(model, tokens, batch.positions)
    _, cache = model.run_with_cache(tokens, batch.positions)
    for layer, pattern in enumerate(patterns):
        torch.testing.assert_close(
            pattern, cache[f"blocks.{layer}.attn.hook_pattern"], rtol=1e-10, atol=1e-10
        )


def test_encodings_inside_attention_take_the_hooked_forward_with_qk_bias_too():
    assert not supports_fast_path(_model(positional="rope", d_head=64))
    assert not supports_fast_path(_model(positional="cope"))
    assert supports_stacking(_model()) and not supports_stacking(_model(positional="cope"))


@pytest.mark.parametrize("overrides", [{}, dict(d_head=48), dict(positional="learned")])
def test_stacked_models_with_qk_bias_equal_separate_models(overrides):
    gen = TaskGenerator(TASK, 0)
    batches = [gen.sample(16, torch.Generator().manual_seed(10 + i)) for i in range(2)]
    separate = [_model(seed=s, **overrides) for s in range(2)]
    stack = ModelStack([_model(seed=s, **overrides) for s in range(2)])
    tokens = torch.stack([b.tokens.double() for b in batches])
    positions = torch.stack([b.positions for b in batches])
    logits = stacked_logits(stack, tokens, positions)
    targets = torch.stack([b.target for b in batches])
    F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(2, -1).mean(
        1
    ).sum().backward()
    for i, (model, batch) in enumerate(zip(separate, batches)):
        ref = model(batch.tokens.double(), batch.positions)
        torch.testing.assert_close(logits[i], ref, rtol=1e-10, atol=1e-10)
        F.cross_entropy(ref, batch.target).backward()
        for name, param in model.named_parameters():
            grad = stack.params[name].grad
            if grad is None:
                assert name.endswith("b_K") and param.grad.abs().max() < 1e-12, name
            else:
                torch.testing.assert_close(grad[i], param.grad, rtol=1e-9, atol=1e-11, msg=name)


def test_qk_bias_is_set_from_the_command_line(capsys):
    _, cfg, _, _ = build_configs("tiny", {"qk_bias": "true"}, seed=0)
    assert cfg.qk_bias is True
    assert main(["train", "--preset", "tiny", "--set", "qk_bias=maybe", "--out", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --set qk_bias='maybe' is invalid") and "\n" not in err
    with pytest.raises(ValueError, match=r"ModelConfig\.qk_bias=1"):
        ModelConfig.from_task(TASK, qk_bias=1)


def test_figures_label_qk_bias_as_a_deviation():
    from types import SimpleNamespace

    from interp.viz.figures import run_note

    def run(**model):
        return SimpleNamespace(
            deviation_note=lambda: "",
            model_config=ModelConfig.from_task(TASK, **model),
            train_config=SimpleNamespace(intervention=None),
        )

    assert run_note(run(qk_bias=True)) == "query/key biases (paper: none)"
    assert run_note(run()) is None
