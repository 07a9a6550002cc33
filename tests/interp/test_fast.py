import pytest
import torch
import torch.nn.functional as F

from interp.data.task import TaskConfig, TaskGenerator
from interp.model.fast import fast_logits, supports_fast_path
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(K=64, L=32, N=8, B=2, p_C=0.5)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(attn_scale="sqrt"),
        dict(attn_scale="log_n"),
        dict(positional="learned"),
        dict(positional="none"),
        dict(n_heads=2, d_head=32),
        dict(n_heads=2, d_head=128),  # W_Q W_K^T per head; W_V W_O not the identity
        dict(n_heads=1, d_head=48),  # q and k projected (W_Q W_K^T would cost more)
        dict(positional="learned", attn_scale="log_n", n_heads=3, d_head=16),
        dict(n_layers=3),
        dict(n_layers=1),
    ],
)
def test_fast_path_equals_hooked_model_logits_and_gradients(overrides):
    batch = TaskGenerator(TASK, 0).sample(32, torch.Generator().manual_seed(1))
    model = InductionNet(ModelConfig.from_task(TASK, **overrides), seed=0).double()
    assert supports_fast_path(model)
    tokens = batch.tokens.double()

    def grads(fn):
        model.zero_grad()
        logits = fn()
        F.cross_entropy(logits, batch.target).backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    ref_logits, ref_grads = grads(lambda: model(tokens, batch.positions))
    fast, fast_grads = grads(lambda: fast_logits(model, tokens, batch.positions))
    torch.testing.assert_close(fast, ref_logits, rtol=1e-10, atol=1e-10)
    assert ref_grads.keys() == fast_grads.keys()
    for name in ref_grads:
        torch.testing.assert_close(
            fast_grads[name], ref_grads[name], rtol=1e-9, atol=1e-11, msg=name
        )


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(attn_scale="log_n"),
        dict(n_heads=2, d_head=32),
        dict(n_heads=2, d_head=128, attn_scale="sqrt"),
        dict(positional="learned"),
        dict(n_layers=3),
    ],
)
def test_fast_patterns_equal_hooked_patterns(overrides):
    from interp.analysis.probes import PATTERN_HOOKS
    from interp.model.fast import fast_patterns

    batch = TaskGenerator(TASK, 0).sample(16, torch.Generator().manual_seed(2))
    model = InductionNet(ModelConfig.from_task(TASK, **overrides), seed=0).double()
    tokens = batch.tokens.double()
    logits, cache = model.run_with_cache(tokens, batch.positions, names_filter=PATTERN_HOOKS)
    fast, patterns = fast_patterns(model, tokens, batch.positions)
    torch.testing.assert_close(fast, logits, rtol=1e-10, atol=1e-10)
    for layer, pattern in enumerate(patterns):
        torch.testing.assert_close(
            pattern, cache[f"blocks.{layer}.attn.hook_pattern"], rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("overrides", [{}, dict(n_heads=2, d_head=32), dict(n_layers=3)])
def test_fast_patterns_on_some_last_layer_rows(overrides):
    from interp.model.fast import fast_patterns

    batch = TaskGenerator(TASK, 0).sample(16, torch.Generator().manual_seed(4))
    model = InductionNet(ModelConfig.from_task(TASK, **overrides), seed=0).double()
    tokens = batch.tokens.double()
    full_logits, full = fast_patterns(model, tokens, batch.positions)
    rows = torch.tensor([2, 4, 6])  # the query row is always computed as well
    logits, part = fast_patterns(model, tokens, batch.positions, last_layer_rows=rows)
    torch.testing.assert_close(logits, full_logits, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(part[0], full[0], rtol=1e-10, atol=1e-12)
    n = tokens.shape[1]
    kept = torch.tensor([2, 4, 6, n - 1])
    torch.testing.assert_close(part[-1][:, :, kept], full[-1][:, :, kept], rtol=1e-10, atol=1e-12)
    others = torch.ones(n, dtype=torch.bool)
    others[kept] = False
    assert torch.all(part[-1][:, :, others] == 0)


def test_cache_patterns_honours_active_hooks():
    from interp.analysis.probes import cache_patterns
    from interp.model.interventions import intervention_hooks, uniform_pattern

    batch = TaskGenerator(TASK, 0).sample(16, torch.Generator().manual_seed(3))
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    _, free = cache_patterns(model, batch)
    with model.hooks(fwd_hooks=intervention_hooks("uniform_layer2", model)):
        _, hooked = cache_patterns(model, batch)
    assert torch.allclose(hooked[1], uniform_pattern(hooked[1]))
    assert not torch.allclose(free[1], hooked[1])


def test_output_identity_check_is_cached_per_buffer_version(monkeypatch):
    from interp.model.fast import output_is_identity

    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    W_O = model.blocks[1].attn.W_O
    comparisons = []
    equal = torch.equal
    monkeypatch.setattr(torch, "equal", lambda a, b: comparisons.append(1) or equal(a, b))
    assert output_is_identity(W_O) and len(comparisons) == 1
    assert output_is_identity(W_O) and output_is_identity(W_O)
    assert len(comparisons) == 1  # the later calls: from the cache, no comparison
    with torch.no_grad():
        W_O[0, 0, 1] = 0.5  # an in-place change bumps the version: checked again
    assert not output_is_identity(W_O) and len(comparisons) == 2
    assert not output_is_identity(W_O) and len(comparisons) == 2
    monkeypatch.undo()
    assert not output_is_identity(
        InductionNet(ModelConfig.from_task(TASK, n_heads=2, d_head=32), seed=0).blocks[0].attn.W_O
    )


@pytest.mark.parametrize("n_layers", [2, 3])
def test_fast_path_at_several_lengths_in_turn_equals_hooked_model(n_layers):
    """The causal mask and key counts are built once per length: sequences of 2, 4, 8 and again
    2 pairs (5, 9, 17 and 5 tokens), one after another, each equal the hooked model (a mask of the
    wrong length would fail to broadcast or let a query see later tokens)."""
    gen = TaskGenerator(TASK, 0)
    model = InductionNet(ModelConfig.from_task(TASK, n_layers=n_layers), seed=0).double()
    for n_pairs in (2, 4, 8, 2):
        batch = gen.ic(16, torch.Generator().manual_seed(n_pairs), n_pairs=n_pairs)
        tokens = batch.tokens.double()
        assert tokens.shape[1] == 2 * n_pairs + 1
        torch.testing.assert_close(
            fast_logits(model, tokens, batch.positions),
            model(tokens, batch.positions),
            rtol=1e-10,
            atol=1e-10,
        )
