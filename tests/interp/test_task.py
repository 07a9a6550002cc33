import math

import numpy as np
import pytest
import torch
from scipy import stats

from interp.data.task import TaskConfig, TaskGenerator


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_labels_are_class_mod_L():
    cfg = TaskConfig(K=128, L=32, B=0, p_B=0.0)
    b = TaskGenerator(cfg, 0).sample(256, gen())
    assert torch.equal(b.item_labels, b.item_classes % 32)
    assert torch.equal(b.target, b.query_class % 32)


def test_label_tokens_are_label_vectors_and_items_near_class_means():
    cfg = TaskConfig(K=64, L=32, eps=0.1)
    g = TaskGenerator(cfg, 0)
    b = g.iw(64, gen())
    assert torch.equal(b.tokens[:, 1:-1:2], g.label_vectors[b.item_labels])
    # item = (mu + eps*eta)/sqrt(1+eps^2): its distance to the class mean is small
    mu = g.class_means[b.item_classes]
    resid = b.tokens[:, 0:-1:2] - mu / math.sqrt(1.01)
    assert resid.norm(dim=-1).mean() < 0.15


def test_item_norms_close_to_one():
    cfg = TaskConfig(D=63, K=512, eps=0.1)
    b = TaskGenerator(cfg, 1).sample(512, gen())
    norms = b.tokens[:, 0:-1:2].norm(dim=-1)
    assert abs(norms.mean().item() - 1.0) < 0.05
    assert abs(b.tokens[:, -1].norm(dim=-1).mean().item() - 1.0) < 0.05


@pytest.mark.parametrize("B", [1, 2, 4])
def test_bursty_structure(B):
    cfg = TaskConfig(K=256, L=32, N=8, B=B, p_B=1.0)
    b = TaskGenerator(cfg, 0).sample(300, gen(B))
    n = 8 // B
    for i in range(len(b)):
        classes, counts = torch.unique(b.item_classes[i], return_counts=True)
        assert len(classes) == n and torch.all(counts == B)
        labels = torch.unique(b.item_labels[i])
        assert len(labels) == n  # pairwise different labels
        assert b.query_class[i] in classes
        assert b.target[i] == b.query_class[i] % 32


def test_zipf_frequencies_match_chi_square():
    cfg = TaskConfig(K=64, L=32, N=8, alpha=1.0, B=0, p_B=0.0)
    g = TaskGenerator(cfg, 0)
    b = g.sample(4000, gen(1))
    counts = np.bincount(b.item_classes.flatten().numpy(), minlength=64)
    p = 1.0 / np.arange(1, 65)
    expected = counts.sum() * p / p.sum()
    _, pvalue = stats.chisquare(counts, expected)
    assert pvalue > 1e-3


def test_zipf_acts_in_bursty_sequences():
    cfg = TaskConfig(K=64, L=32, N=8, alpha=1.0, B=2)
    b = TaskGenerator(cfg, 0).sample(2000, gen())
    counts = np.bincount(b.query_class.numpy(), minlength=64)
    # class 0 (rank 1) is far more frequent than class 63 (rank 64)
    assert counts[0] > 5 * max(counts[63], 1)


def test_zipf_weights_in_bursty_sequences_match_the_exact_marginal():
    """Bursty contexts draw n = N/B classes from p(k) ∝ (k+1)^-alpha with pairwise different
    labels: the chance that class k is in a context is exact in closed form (labels drawn one by
    one by their total weight, without replacement; a class within its label by p(k))."""
    cfg = TaskConfig(K=64, L=8, N=8, alpha=1.0, B=4, p_B=1.0)  # n = 2 classes per context
    n_seq = 20_000
    b = TaskGenerator(cfg, 0).sample(n_seq, gen(3))
    in_context = np.zeros(cfg.K)
    for row in b.item_classes.numpy():
        in_context[np.unique(row)] += 1
    observed = in_context / n_seq
    p = np.arange(1, cfg.K + 1, dtype=float) ** -cfg.alpha
    p /= p.sum()
    w = p.reshape(cfg.K // cfg.L, cfg.L).sum(axis=0)  # label m's weight: classes m, m+L, ...
    # P(label m among 2 draws without replacement) = w_m + sum_{j != m} w_j w_m / (1 - w_j)
    label_in = w + np.array(
        [sum(w[j] * w[m] / (1 - w[j]) for j in range(cfg.L) if j != m) for m in range(cfg.L)]
    )
    exact = label_in[np.arange(cfg.K) % cfg.L] * p / w[np.arange(cfg.K) % cfg.L]
    se = np.sqrt(exact * (1 - exact) / n_seq)
    assert np.all(np.abs(observed - exact) < 4.5 * se)
    # the weights really act: class 0 is in ~30x as many contexts as class 63, and within a label
    # the classes keep their Zipf ratio (classes 0 and 8 share label 0: p(0)/p(8) = 9)
    assert observed[0] > 20 * observed[63]
    assert observed[0] / observed[8] == pytest.approx(9, rel=0.1)


def test_novel_classes_never_repeat_across_batches():
    cfg = TaskConfig(K=64, L=32, N=8, B=2, p_C=1.0)
    g = TaskGenerator(cfg, 0)
    stream = gen()
    b1, b2 = g.sample(64, stream), g.sample(64, stream)
    assert (b1.item_classes >= 64).all()
    assert not set(b1.item_classes.flatten().tolist()) & set(b2.item_classes.flatten().tolist())
    # fresh means: the first items of two batches are not copies of one another
    x1, x2 = b1.tokens[:, 0], b2.tokens[:, 0]
    assert (x1 @ x2.T).abs().max() < 0.9


def test_ic2_labels_and_target_shifted():
    cfg = TaskConfig(K=256, L=32, N=8, B=2)
    g = TaskGenerator(cfg, 0)
    b = g.ic2(128, gen())
    assert torch.equal(b.item_labels, (b.item_classes + 1) % 32)
    assert torch.equal(b.target, (b.query_class + 1) % 32)
    assert torch.equal(b.tokens[:, 1:-1:2], g.label_vectors[b.item_labels])


def test_eval_sets_kinds():
    cfg = TaskConfig(K=256, L=32, N=8, B=2, n_eval=100)
    sets = TaskGenerator(cfg, 0).eval_sets(seed=7)
    assert (sets["ic"].item_classes >= 256).all()
    assert (sets["iw"].item_classes < 256).all() and (sets["ic2"].item_classes < 256).all()
    assert {len(v) for v in sets.values()} == {100}


def test_positions_offset_within_table():
    cfg = TaskConfig(N=8, N_max=32)
    b = TaskGenerator(cfg, 0).sample(512, gen())
    assert b.positions.min() >= 0 and b.positions.max() <= cfg.P - 1
    assert torch.equal(b.positions - b.positions[:, :1], torch.arange(17).expand(512, 17))
    assert len(torch.unique(b.positions[:, 0])) > 20  # random offsets


def test_determinism():
    cfg = TaskConfig(K=128, B=2, p_C=0.5, p_B=0.7)
    a = TaskGenerator(cfg, 3).sample(64, gen(5))
    b = TaskGenerator(cfg, 3).sample(64, gen(5))
    for name in ("tokens", "positions", "item_classes", "item_labels", "query_class", "target"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    c = TaskGenerator(cfg, 3).sample(64, gen(6))
    assert not torch.equal(a.tokens, c.tokens)


def test_mixture_fractions():
    cfg = TaskConfig(K=128, L=32, N=8, B=2, p_B=0.5, p_C=0.25)
    b = TaskGenerator(cfg, 0).sample(4000, gen())
    novel = (b.item_classes >= 128).all(1).float().mean().item()
    assert abs(novel - 0.25) < 0.03


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(N=8, B=3), "B"),
        (dict(N=8, B=8), "B"),
        (dict(K=100, L=32), "K"),
        (dict(K=16, L=32), "L"),
        (dict(N=40, N_max=32), "N"),
        (dict(eps=-0.1), "eps"),
        (dict(alpha=-1.0), "alpha"),
        (dict(p_B=1.5), "p_B"),
        (dict(p_C=-0.1), "p_C"),
        (dict(D=0), "D"),
        (dict(B=0, p_B=1.0), "p_B"),
        (dict(n_eval=0), "n_eval"),
    ],
)
def test_invalid_configs_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"TaskConfig\.{field}="):
        TaskConfig(**kwargs)
