import math

import pytest
import torch

from interp.analysis.measures import MEASURES, progress_measures
from interp.analysis.probes import (
    attention_sparsity,
    cache_patterns,
    copied_item_probe,
    induction_mask,
)
from interp.data.task import TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(K=256, L=32, N=8, B=2, n_eval=512)


def hand_built_induction_net(
    task: TaskConfig, c: float = 30.0, alpha: float = 25.0
) -> InductionNet:
    """An untrained network whose attention weights implement the induction circuit analytically.

    Residual = [content (D) | one-hot position (P)].
    Layer 1: query coordinate p carries ``c * [pos = p]``, key coordinate p + 1 carries
    ``[pos = p]``, so each token attends to the token one position earlier (the previous-token
    head); W_V copies the content into the position block, so a label token now holds its item
    there.
    Layer 2: the query's content is matched against (copied-item block - own content): the query
    attends to the labels whose item has its class (the induction head); W_V copies label content.
    """
    model = InductionNet(ModelConfig.from_task(task), seed=0)
    D, P = task.D, task.P
    with torch.no_grad():
        a0, a1 = model.blocks[0].attn, model.blocks[1].attn
        for w in (a0.W_Q, a0.W_K, a0.W_V, a1.W_Q, a1.W_K, a1.W_V):
            w.zero_()
        for p in range(P):
            a0.W_Q[0, D + p, p] = c
            if p + 1 < P:
                a0.W_K[0, D + p, p + 1] = 1.0
        for d in range(D):
            a0.W_V[0, d, D + d] = 1.0  # content -> position block (the "copied item" subspace)
            a1.W_Q[0, d, d] = alpha  # query content
            a1.W_K[0, D + d, d] = 1.0  # key reads the copied-item subspace ...
            a1.W_K[
                0, d, d
            ] = -1.0  # ... minus its own content: token 0 (which can only copy itself)
            # and later items (which hold a copy of the previous label) stop matching the query
            a1.W_V[0, d, d] = 1.0  # copy the label vector
    return model


@pytest.fixture(scope="module")
def ic():
    return TaskGenerator(TASK, 0).eval_sets(seed=1)["ic"]


def test_hand_built_induction_head_scores_as_one(ic):
    logits, patterns = cache_patterns(hand_built_induction_net(TASK), ic)
    m = progress_measures(patterns, logits, ic)
    assert m["ila1"] > 0.95
    assert m["tila2"] > 0.95
    assert m["prev_token_score"] > 0.95
    assert m["induction_score"] > 0.9
    assert m["tla2"] >= m["tila2"]


def test_zero_attention_gives_hand_computed_uniform_values(ic):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    with torch.no_grad():
        for b in model.blocks:
            b.attn.W_Q.zero_()
            b.attn.W_K.zero_()
    logits, patterns = cache_patterns(model, ic)
    m = progress_measures(patterns, logits, ic)
    N, B = 8, 2
    # label i (0-based) sits at 2i+1 and sees 2i+2 keys, one of which is its item
    assert m["ila1"] == pytest.approx(sum(1 / (2 * i + 2) for i in range(N)) / N, abs=1e-5)
    # the query sees 2N+1 keys, B of which are labels of its class, N labels in all
    assert m["tila2"] == pytest.approx(B / (2 * N + 1), abs=1e-5)
    assert m["tla2"] == pytest.approx(N / (2 * N + 1), abs=1e-5)
    # previous-token score: row t sees t+1 keys, t = 1..2N
    assert m["prev_token_score"] == pytest.approx(
        sum(1 / (t + 1) for t in range(1, 2 * N + 1)) / (2 * N), abs=1e-5
    )
    assert m["l2_neff_query"] == pytest.approx(1.0, abs=1e-5)


def test_sparsity_known_rows():
    n = 6
    one_hot = torch.zeros(1, 1, n, n)
    one_hot[0, 0, :, 0] = 1.0
    uniform = torch.ones(n, n).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None]
    rows = torch.tensor([n - 1])
    s1 = attention_sparsity(one_hot, rows)
    assert s1["n_eff"].item() * n == pytest.approx(1.0)  # N_eff = 1
    assert s1["entropy"].item() == pytest.approx(0.0, abs=1e-6)
    assert s1["l1_l2"].item() == pytest.approx(1 / math.sqrt(n))
    su = attention_sparsity(uniform, rows)
    assert su["n_eff"].item() * n == pytest.approx(n / 1.0 * 1.0)  # N_eff = n
    assert su["n_eff"].item() == pytest.approx(1.0)
    assert su["entropy"].item() == pytest.approx(1.0)
    assert su["l1_l2"].item() == pytest.approx(1.0)


def test_induction_mask_from_metadata():
    cfg = TaskConfig(K=64, L=32, N=4, N_max=4, B=2)
    b = TaskGenerator(cfg, 0).ic(8, torch.Generator().manual_seed(0))
    m = induction_mask(b)
    for s in range(8):
        cls = b.item_classes[s].tolist()
        # the query row targets exactly the labels of its class
        expected = {2 * i + 1 for i in range(4) if cls[i] == b.query_class[s].item()}
        assert set(torch.nonzero(m[s, -1]).flatten().tolist()) == expected
        # item j's row targets labels of earlier items of the same class
        for j in range(4):
            exp = {2 * i + 1 for i in range(j) if cls[i] == cls[j]}
            assert set(torch.nonzero(m[s, 2 * j]).flatten().tolist()) == exp


def test_copied_item_probe_decodes_item_class_in_hand_built_net():
    gen = TaskGenerator(TaskConfig(K=64, L=32, N=8, B=2), 0)
    batch = gen.iw(600, torch.Generator().manual_seed(0))
    good = copied_item_probe(hand_built_induction_net(gen.config), batch)
    assert good["test_acc"] > 0.9 > good["chance"]


@pytest.mark.parametrize("B", [1, 2, 4])
def test_evaluation_reads_only_the_rows_it_needs_and_gets_the_same_measures(B):
    """The training loop's evaluation computes layer 2's pattern on the query row and the item
    rows with an induction target only; its measures equal those of the full patterns."""
    from interp.analysis.evaluation import logits_and_measures
    from interp.analysis.measures import last_layer_rows_read

    task = TaskConfig(K=64, L=32, N=8, B=B, n_eval=256)
    ic = TaskGenerator(task, 0).eval_sets(seed=1)["ic"]
    rows = last_layer_rows_read(ic)
    with_target = torch.nonzero(induction_mask(ic).any(dim=(0, 2))).flatten().tolist()
    assert rows.tolist() == sorted(set(with_target) | {16})  # and the query row, always
    if B == 1:  # no class repeats in the context: only the query row
        assert rows.tolist() == [16]
    model = InductionNet(ModelConfig.from_task(task), seed=0).double()
    ic = ic.__class__(**{**ic.__dict__, "tokens": ic.tokens.double()})
    logits, full = cache_patterns(model, ic)
    reference = progress_measures(full, logits, ic)
    fast_logits_, measures = logits_and_measures(model, ic)
    torch.testing.assert_close(fast_logits_, logits)
    # the reference reads attention patterns only: the measures of other hooks come on top
    others = {n for n, m in MEASURES.items() if any("hook_pattern" not in r for r in m.reads)}
    assert set(measures) - set(reference) == others and set(reference) <= set(measures)
    for name in reference:
        assert measures[name] == pytest.approx(reference[name], rel=1e-9, abs=1e-12), name
