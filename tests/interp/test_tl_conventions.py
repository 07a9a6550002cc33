"""TransformerLens conventions on the network: run_with_cache returns an ActivationCache, and
detect_head scores its heads as TransformerLens's head detector does."""

import pytest
import torch
from transformer_lens import ActivationCache
from transformer_lens.head_detector import compute_head_attention_similarity_score

from interp.analysis.head_detector import detect_head, detection_patterns
from interp.data.task import TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig
from tests.interp.test_probes import hand_built_induction_net

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=2, p_C=0.5, n_eval=32)


@pytest.fixture(scope="module")
def ic():
    return TaskGenerator(TASK, 0).eval_sets(seed=1)["ic"]


def test_run_with_cache_returns_a_dict_compatible_activation_cache(ic):
    model = InductionNet(ModelConfig.from_task(TASK), seed=0)
    logits, cache = model.run_with_cache(ic.tokens, ic.positions)
    assert isinstance(cache, ActivationCache)
    _, plain = model.run_with_cache(ic.tokens, ic.positions, return_cache_object=False)
    assert type(plain) is dict and plain.keys() == set(cache.keys())
    assert "blocks.0.attn.hook_pattern" in cache and len(cache) == len(list(cache.keys()))
    assert dict(cache.items()).keys() == set(cache.keys())
    torch.testing.assert_close(cache["pattern", 1], cache["blocks.1.attn.hook_pattern"])
    # TL's helpers: the residual stream after each block, and each head's write into it
    torch.testing.assert_close(cache.accumulated_resid()[-1], cache["blocks.1.hook_resid_post"])
    heads = cache.stack_head_results()
    assert heads.shape[0] == 2  # layers x heads
    written = cache["blocks.0.hook_attn_out"] + cache["blocks.1.hook_attn_out"]
    torch.testing.assert_close(heads.sum(0), written, atol=1e-5, rtol=1e-5)


def test_detect_head_finds_the_hand_built_circuit(ic):
    task = TaskConfig(K=256, L=32, N=8, B=2, n_eval=64)
    batch = TaskGenerator(task, 0).eval_sets(seed=1)["ic"]
    model = hand_built_induction_net(task)
    n_pos = batch.tokens.shape[1]
    prev = detect_head(model, batch, "previous_token_head")
    assert prev.shape == (2, 1)
    # every row but the first can attend to its previous token: (n_pos - 1) / n_pos at most
    assert prev[0, 0] == pytest.approx((n_pos - 1) / n_pos, abs=0.01)
    assert prev[1, 0] < 0.3
    induction = detect_head(model, batch, "induction_head")
    assert induction[1, 0] > induction[0, 0]


def test_detect_head_is_transformer_lens_score_averaged_over_sequences(ic):
    model = InductionNet(ModelConfig.from_task(TASK), seed=1)
    _, cache = model.run_with_cache(ic.tokens, ic.positions)
    scores = detect_head(model, ic, "duplicate_token_head", cache=cache, error_measure="abs")
    per_seq = detection_patterns(ic, "duplicate_token_head")
    expected = sum(
        compute_head_attention_similarity_score(
            cache["blocks.1.attn.hook_pattern"][i, 0],
            detection_pattern=per_seq[i],
            exclude_bos=False,
            exclude_current_token=False,
            error_measure="abs",
        )
        for i in range(len(ic))
    ) / len(ic)
    assert scores[1, 0] == pytest.approx(expected)
    # an item's duplicate is an earlier item of its class: B = 2 gives one per class pair
    first = per_seq[0]
    classes = ic.item_classes[0]
    for i in range(TASK.N):
        for j in range(i):
            assert first[2 * i, 2 * j] == float(classes[i] == classes[j])
    with pytest.raises(ValueError, match="detection_pattern='nonsense' is invalid"):
        detect_head(model, ic, "nonsense")
