"""Known-answer tests of the positional encodings (RoPE, CoPE) and the attention scales."""

import math

import pytest
import torch

from interp.data.task import TaskConfig, TaskGenerator
from interp.model.attention import attention_scale
from interp.model.network import InductionNet, ModelConfig
from interp.model.positional import (
    apply_rotary,
    cope_bias,
    cope_positions,
    rope_frequencies,
    rotary_frequency_report,
)

TASK = TaskConfig(K=64, L=32, N=8, B=2, n_eval=64)


@pytest.fixture(scope="module")
def batch():
    return TaskGenerator(TASK, 0).sample(8, torch.Generator().manual_seed(0))


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- RoPE


def test_rope_scores_depend_only_on_relative_position():
    d = 16
    q, k = _randn(1, 1, 1, d, seed=1), _randn(1, 1, 1, d, seed=2)
    freqs = rope_frequencies(d)

    def score(i, j):
        qi = apply_rotary(q, torch.tensor([[i]]), freqs)
        kj = apply_rotary(k, torch.tensor([[j]]), freqs)
        return float((qi * kj).sum())

    for i, j in [(5, 2), (9, 9), (12, 0)]:
        for shift in (1, 7, 40):
            assert score(i + shift, j + shift) == pytest.approx(score(i, j), abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)
    # rotation preserves norms
    x = _randn(2, 5, 1, d)
    rotated = apply_rotary(x, torch.arange(5).expand(2, 5), freqs)
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)


def test_interpolation_divides_every_frequency_by_s():
    d, s = 32, 4.0
    plain, pi = rope_frequencies(d), rope_frequencies(d, scaling="pi", scale=s)
    assert torch.allclose(pi, plain / s)
    # ... which is the same as evaluating plain RoPE at positions / s
    x, pos = _randn(1, 6, 1, d), torch.arange(6)[None]
    assert torch.allclose(apply_rotary(x, pos, pi), apply_rotary(x, pos / s, plain), atol=1e-6)


def test_ntk_keeps_the_highest_frequency_and_divides_the_lowest_by_s():
    d, s, base = 64, 4.0, 10000.0
    plain = rope_frequencies(d, base).double()
    ntk = rope_frequencies(d, base, "ntk", s).double()
    assert ntk[0] == plain[0] == 1.0
    assert float(plain[-1] / ntk[-1]) == pytest.approx(s, rel=1e-5)
    assert torch.all(ntk[1:] < plain[1:])  # every other frequency slowed, less than by s
    assert torch.all(ntk[1:-1] > plain[1:-1] / s)


def test_mixed_base_reduces_to_interpolation_and_ntk_at_its_limits():
    d, s = 64, 3.0
    pi = rope_frequencies(d, scaling="pi", scale=s)
    ntk = rope_frequencies(d, scaling="ntk", scale=s)
    assert torch.allclose(rope_frequencies(d, scaling="mixed", scale=s, mix_b=0.0), pi)
    assert torch.allclose(rope_frequencies(d, scaling="mixed", scale=s, mix_b=1.0), ntk, rtol=1e-5)
    mid = rope_frequencies(d, scaling="mixed", scale=s, mix_b=0.5)
    assert mid[0] == 1.0 and float(rope_frequencies(d)[-1] / mid[-1]) == pytest.approx(s, rel=1e-5)


def test_scale_one_is_plain_rope_and_bad_arguments_raise():
    for scaling in ("pi", "ntk", "mixed"):
        assert torch.allclose(
            rope_frequencies(32, scaling=scaling, scale=1.0), rope_frequencies(32)
        )
    with pytest.raises(ValueError, match="even"):
        rope_frequencies(63)
    with pytest.raises(ValueError, match="rope_scaling"):
        rope_frequencies(64, scaling="yarn")


def test_frequency_report_flags_frequencies_between_train_and_test_lengths():
    report = rotary_frequency_report(64, n_train=17, n_test=65)
    assert len(report) == 32
    between = report[report.in_between]
    assert len(between) > 0
    assert (between.wavelength > 16).all() and (between.wavelength <= 64).all()
    # test no longer than training: nothing in between, scaling cannot matter
    assert not rotary_frequency_report(64, n_train=17, n_test=17).in_between.any()
    scaled = rotary_frequency_report(64, 17, 65, scaling="pi", scale=4.0)
    assert scaled.wavelength_scaled.to_numpy() == pytest.approx(4 * scaled.wavelength.to_numpy())


def test_rope_model_hooks_and_config_rule(batch):
    with pytest.raises(ValueError, match="d_head"):
        ModelConfig.from_task(TASK, positional="rope")  # d_head = d_model = 63 is odd
    model = InductionNet(ModelConfig.from_task(TASK, positional="rope", d_head=64), seed=0)
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    assert cache["hook_embed"].shape == (8, 17, 63)
    assert cache["blocks.0.hook_resid_pre"].shape == (8, 17, 63)
    q, rot_q = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_rot_q"]
    assert q.shape == rot_q.shape == (8, 17, 1, 64)
    expected = apply_rotary(q, batch.positions, model.positional.freqs)
    assert torch.allclose(rot_q, expected, atol=1e-6)
    # the random offsets of the task do not change a RoPE model's output
    shifted = model(batch.tokens, batch.positions + 3)
    assert torch.allclose(shifted, model(batch.tokens, batch.positions), atol=1e-4)


def test_rope_rescaling_on_a_trained_model_equals_plain_rope_at_scaled_positions(batch):
    from interp.analysis.length import rescale_rope

    model = InductionNet(ModelConfig.from_task(TASK, positional="rope", d_head=64), seed=0)
    plain_at_half = model(batch.tokens, batch.positions.float() / 2)
    rescale_rope(model, "pi", 2.0)
    assert model.cfg.rope_scaling == "pi" and model.cfg.rope_scale == 2.0
    assert torch.allclose(model(batch.tokens, batch.positions), plain_at_half, atol=1e-5)
    rescale_rope(model, "none")
    with pytest.raises(ValueError, match="rope"):
        rescale_rope(InductionNet(ModelConfig.from_task(TASK), seed=0), "pi", 2.0)


# ---------------------------------------------------------------- CoPE


def test_cope_positions_with_all_gates_one_are_relative_and_clip():
    n = 6
    gates = torch.ones(n, n).tril()[None, None]
    pos = cope_positions(gates, p_max=100)[0, 0]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    assert torch.equal(pos.tril(), (i - j + 1).float().tril())
    clipped = cope_positions(gates, p_max=3)[0, 0]
    assert clipped.max() == 3 and torch.equal(clipped, pos.clamp(max=3))


def test_cope_interpolation_is_exact_at_integers_and_linear_between():
    q, W_pos = _randn(1, 4, 1, 8, seed=3), _randn(6, 8, seed=4)
    ints = torch.randint(0, 6, (1, 1, 4, 4), generator=torch.Generator().manual_seed(5)).float()
    direct = torch.einsum("bqhd,bhqkd->bhqk", q, W_pos[ints.long()])
    assert torch.allclose(cope_bias(q, W_pos, ints), direct, atol=1e-5)
    frac = torch.full((1, 1, 4, 4), 2.25)
    mixed = 0.75 * (q[0, :, 0] @ W_pos[2]) + 0.25 * (q[0, :, 0] @ W_pos[3])
    assert torch.allclose(cope_bias(q, W_pos, frac)[0, 0], mixed[:, None].expand(4, 4), atol=1e-5)


def _cope_model(seed=0, **kw):
    return InductionNet(ModelConfig.from_task(TASK, positional="cope", **kw), seed=seed)


def test_cope_with_gates_forced_to_one_is_a_relative_position_lookup(batch):
    p_max = 5
    model = _cope_model(cope_p_max=p_max)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.W_cope.copy_(_randn(p_max + 1, 63, seed=6))
    seen = {}

    def keep(name):
        def hook(x, hook):
            seen[name] = x.detach()

        return hook

    model.run_with_hooks(
        batch.tokens,
        batch.positions,
        fwd_hooks=[
            ("blocks.0.attn.hook_cope_gates", lambda g, hook: torch.ones_like(g)),
            ("blocks.0.hook_resid_pre", keep("resid")),
            ("blocks.0.attn.hook_cope_positions", keep("positions")),
            ("blocks.0.attn.hook_attn_scores", keep("scores")),
        ],
    )
    n = 17
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    rel = (i - j + 1).clamp(min=0, max=p_max)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    assert torch.equal(seen["positions"][0, 0][causal], rel[causal].float())
    u = seen["resid"]
    q, k = u @ attn.W_Q[0], u @ attn.W_K[0]
    lookup = torch.einsum("bqd,qkd->bqk", q, attn.W_cope[rel])  # q_i . e[i - j + 1]
    expected = (q @ k.transpose(1, 2) + lookup).masked_fill(~causal, float("-inf"))
    assert torch.allclose(seen["scores"][:, 0], expected, atol=1e-4)
    assert all(len(hp._forward_hooks) == 0 for hp in model.hook_dict.values())


def test_cope_gates_and_positions_against_a_hand_computed_position(batch):
    """Golovneva eq. 3 by hand at one (query, key): ``g_it = sigmoid(s_it)`` of the scaled scores,
    ``p_ij = g_ij + ... + g_ii``. A gate of the wrong sign (``sigmoid(-s)``, masking kept) gives
    ``1 - g``, which this position tells apart."""
    model = _cope_model(seed=3, cope_p_max=16)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.W_Q.mul_(4.0)  # scores well away from 0, so that sigmoid(s) and sigmoid(-s) differ
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    u = cache["blocks.0.hook_resid_pre"][0]  # [pos, d_model] of the first sequence
    i, j = 6, 2
    scale = attention_scale(attn.attn_scale, torch.arange(1, 18), attn.d_head, attn.n_train)
    q, k = (u @ attn.W_Q[0]).detach(), (u @ attn.W_K[0]).detach()
    c = float(scale[i, 0]) if isinstance(scale, torch.Tensor) else float(scale)
    s = [float(q[i] @ k[t]) * c for t in range(j, i + 1)]
    gates = [1.0 / (1.0 + math.exp(-x)) for x in s]
    p_ij = sum(gates)
    flipped = sum(1.0 - g for g in gates)
    assert abs(p_ij - flipped) > 0.5  # the input tells the two signs apart
    got = cache["blocks.0.attn.hook_cope_positions"][0, 0, i, j].item()
    assert got == pytest.approx(p_ij, abs=1e-4)
    got_gates = cache["blocks.0.attn.hook_cope_gates"][0, 0, i, j : i + 1].tolist()
    assert got_gates == pytest.approx(gates, abs=1e-5)


def test_zero_cope_table_leaves_attention_unchanged(batch):
    cope, plain = (
        _cope_model(seed=2),
        InductionNet(ModelConfig.from_task(TASK, positional="none"), 2),
    )
    assert all(torch.count_nonzero(b.attn.W_cope) == 0 for b in cope.blocks)
    plain.load_state_dict({k: v for k, v in cope.state_dict().items() if "W_cope" not in k})
    _, c1 = cope.run_with_cache(batch.tokens, batch.positions)
    _, c2 = plain.run_with_cache(batch.tokens, batch.positions)
    for layer in range(2):
        name = f"blocks.{layer}.attn.hook_pattern"
        assert torch.allclose(c1[name], c2[name], atol=1e-6)
    gates = c1["blocks.0.attn.hook_cope_gates"]
    assert gates.shape == (8, 1, 17, 17) and torch.all(gates.triu(1) == 0)
    assert c1["blocks.1.attn.hook_cope_positions"].max() <= 64


def test_gradients_reach_the_cope_gates(batch):
    model = _cope_model(cope_p_max=8)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_cope.copy_(_randn(9, 63, seed=7))
    kept = {}

    def keep(gates, hook):
        gates.retain_grad()
        kept[hook.name] = gates
        return gates

    logits = model.run_with_hooks(
        batch.tokens, batch.positions, fwd_hooks=[(lambda name: "cope_gates" in name, keep)]
    )
    logits.logsumexp(-1).sum().backward()
    for gates in kept.values():
        assert gates.grad is not None and gates.grad.abs().sum() > 0
    assert model.blocks[0].attn.W_cope.grad.abs().sum() > 0


# ---------------------------------------------------------------- attention scale


def test_log_n_scale_equals_sqrt_scale_at_the_training_length():
    d, n_train = 64, 17
    n_keys = torch.arange(1, 70)
    log_n = attention_scale("log_n", n_keys, d, n_train)[:, 0]
    assert float(log_n[n_train - 1]) == pytest.approx(attention_scale("sqrt", n_keys, d, n_train))
    assert float(log_n[0]) == 0.0
    assert float(log_n[4 * n_train - 1]) == pytest.approx(math.log(4 * n_train) / math.log(17) / 8)
    assert attention_scale("none", n_keys, d, n_train) == 1.0
    with pytest.raises(ValueError, match="attn_scale"):
        attention_scale("cosine", n_keys, d, n_train)


def test_scaled_models_run_and_unscaled_default_has_the_original_hooks(batch):
    for scale in ("sqrt", "log_n"):
        for pe, kw in [("onehot", {}), ("rope", {"d_head": 64}), ("cope", {})]:
            cfg = ModelConfig.from_task(TASK, positional=pe, attn_scale=scale, **kw)
            logits = InductionNet(cfg, seed=0)(batch.tokens, batch.positions)
            assert logits.shape == (8, 32) and torch.isfinite(logits).all()
    names = set(InductionNet(ModelConfig.from_task(TASK), seed=0).hook_dict)
    assert not any("rot_" in n or "cope" in n for n in names)
