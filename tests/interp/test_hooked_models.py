"""The probes and measures on models other than this toolkit's network: a TransformerLens
HookedRootModule of another shape, a TransformerLens 4 TransformerBridge (boot_native) on the
token task, and anything else refused with one line naming what is missing."""

import math
import re

import pytest
import torch
from torch import nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from interp.analysis.head_detector import detect_head
from interp.analysis.hooked import ModelContractError, probed
from interp.analysis.measures import compute_measures
from interp.data.task import TaskConfig, TaskGenerator
from interp.data.token_task import TokenTaskConfig, TokenTaskGenerator, bridge_config

VECTOR_TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=2, eps=0.0, p_C=0.5, n_eval=64)
TOKEN_TASK = TokenTaskConfig(K=32, L=8, N=4, B=2, p_C=0.5, n_novel=16, n_eval=64)


class ScriptedAttention(HookedRootModule):
    """3 layers x 2 heads whose patterns are set by rule, TL hook names, fed (tokens, positions).

    Head 0 of layer 0 attends to the previous token; head 0 of layer 1 to the token after an
    earlier copy of the current one (items of a class are equal vectors when eps = 0); every
    other head, and a row with no such token, attends uniformly to the visible keys.
    """

    def __init__(self, d_model: int, n_labels: int) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):  # no test touches the global RNG
            torch.manual_seed(0)
            self.readout = nn.Linear(d_model, n_labels)
        self.blocks = nn.ModuleList(nn.Module() for _ in range(3))
        for block in self.blocks:
            block.attn = nn.Module()
            block.attn.hook_pattern = HookPoint()
        self.setup()

    def forward(self, tokens, positions):
        b, n, _ = tokens.shape
        causal = torch.ones(n, n).tril().bool()
        uniform = causal.float() / causal.sum(-1, keepdim=True)
        prev = torch.zeros(n, n)
        prev[0, 0] = 1.0
        prev[torch.arange(1, n), torch.arange(n - 1)] = 1.0
        same = (tokens[:, :, None] - tokens[:, None, :]).abs().sum(-1) < 1e-6  # [b, q, k]
        earlier = torch.ones(n, n).tril(-1).bool()
        match = same & earlier
        induct = torch.zeros(b, n, n)
        induct[:, :, 1:] = match[:, :, :-1].float()  # the key after an earlier copy
        induct = torch.where(induct.sum(-1, keepdim=True) > 0, induct, uniform)
        induct = induct / induct.sum(-1, keepdim=True)
        rules = [prev.expand(b, n, n), induct, uniform.expand(b, n, n)]
        for block, rule in zip(self.blocks, rules):
            pattern = torch.stack([rule, uniform.expand(b, n, n)], dim=1)
            block.attn.hook_pattern(pattern)
        return self.readout(tokens[:, -1])


@pytest.fixture(scope="module")
def vector_ic():
    return TaskGenerator(VECTOR_TASK, 0).eval_sets(seed=1)["ic"]


@pytest.fixture(scope="module")
def token_sets():
    return TokenTaskGenerator(TOKEN_TASK).eval_sets(seed=1)


@pytest.fixture(scope="module")
def bridge():
    from transformer_lens import TransformerBridge

    return TransformerBridge.boot_native(bridge_config(TOKEN_TASK, d_model=16, seed=0))


def _zero_queries_and_keys(model) -> None:
    """Zero W_Q, W_K and their biases: every head attends uniformly to the visible keys."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if re.search(r"\.(q|k)\._original_component\.(weight|bias)$", name):
                p.zero_()


def _uniform_values(batch) -> dict:
    """The measures of uniform causal attention, from their definitions (row t sees t + 1 keys)."""
    n = batch.n_pairs
    n_pos = 2 * n + 1
    same = batch.query_class_mask().sum(-1).float()  # labels of the query's class per sequence
    return {
        "ila1": sum(1 / (2 * i + 2) for i in range(n)) / n,
        "prev_token_score": sum(1 / (t + 1) for t in range(1, n_pos)) / (n_pos - 1),
        "tila2": float((same / n_pos).mean()),
        "tla2": n / n_pos,
    }


def test_a_hooked_root_module_of_another_shape(vector_ic):
    model = ScriptedAttention(VECTOR_TASK.D, VECTOR_TASK.L)
    pm = probed(model)
    assert pm.n_layers == 3 and pm.feeds == "(batch.tokens, batch.positions)"
    logits, values = compute_measures(model, vector_ic)
    assert logits.shape == (len(vector_ic), VECTOR_TASK.L)
    # the scripted heads are exactly a previous-token head and an induction head
    for name in ("ila1", "prev_token_score", "tila2", "induction_score"):
        assert values[name] == pytest.approx(1.0, abs=1e-6), name
    # TL's head detector, same meaning: row 0 has no previous token, so (n_pos - 1) / n_pos
    n_pos = vector_ic.tokens.shape[1]
    scores = detect_head(model, vector_ic, "previous_token_head")
    assert scores.shape == (3, 2)
    assert scores[0, 0] == pytest.approx((n_pos - 1) / n_pos, abs=1e-6)
    assert scores[1, 0] < 0.5 and scores[2, 0] < 0.5
    only = detect_head(model, vector_ic, "previous_token_head", heads=[(0, 0)])
    assert only[0, 0] == scores[0, 0] and (only.flatten()[1:] == -1).all()


def test_a_boot_native_bridge_on_the_token_task(bridge, token_sets):
    ic = token_sets["ic"]
    pm = probed(bridge)
    assert pm.n_layers == 2 and pm.tokens == "ids"
    logits, values = compute_measures(bridge, ic)
    assert logits.shape == (len(ic), TOKEN_TASK.L)  # the query's logits over the label ids
    full = bridge(ic.tokens)
    torch.testing.assert_close(logits, full[:, -1, : TOKEN_TASK.L])
    assert all(math.isfinite(v) for v in values.values())
    _zero_queries_and_keys(bridge)
    _, values = compute_measures(bridge, ic)
    for name, expected in _uniform_values(ic).items():
        assert values[name] == pytest.approx(expected, abs=1e-5), name


def test_a_bridge_fed_the_vector_task_names_what_is_wrong(bridge, vector_ic):
    with pytest.raises(ModelContractError) as err:
        compute_measures(bridge, vector_ic)
    message = str(err.value)
    assert "\n" not in message and "token ids" in message and "token_task" in message


def test_a_model_without_what_the_probes_need_fails_with_one_line(vector_ic):
    with pytest.raises(ModelContractError, match=r"Identity cannot be probed: it has no hook_dict"):
        compute_measures(nn.Identity(), vector_ic)

    class NoPatterns(HookedRootModule):
        def __init__(self):
            super().__init__()
            self.hook_x = HookPoint()
            self.setup()

    with pytest.raises(ModelContractError, match=r"no attention-pattern hook blocks\.0"):
        compute_measures(NoPatterns(), vector_ic)
    from transformer_lens import TransformerBridge

    one_layer = TransformerBridge.boot_native(bridge_config(TOKEN_TASK, d_model=8, n_layers=1))
    ic = TokenTaskGenerator(TOKEN_TASK).eval_sets(seed=1, n=4)["ic"]
    with pytest.raises(ModelContractError) as err:
        compute_measures(one_layer, ic)
    assert "blocks.1.attn.hook_pattern" in str(err.value) and "\n" not in str(err.value)


def test_a_model_that_cannot_be_fed_the_batch_fails_with_one_line(vector_ic):
    class TokensOnly(ScriptedAttention):
        def forward(self, tokens, positions):
            return super().forward(tokens[..., :3], positions)  # the wrong width

    model = TokensOnly(VECTOR_TASK.D, VECTOR_TASK.L)
    with pytest.raises(ModelContractError) as err:
        compute_measures(model, vector_ic)
    message = str(err.value)
    assert "\n" not in message and "could not be fed (batch.tokens, batch.positions)" in message
    # told how to feed it, it works
    pm = probed(
        ScriptedAttention(VECTOR_TASK.D, VECTOR_TASK.L),
        feed=lambda b: (b.tokens, b.positions),
        readout=lambda out, b: out,
    )
    assert compute_measures(pm, vector_ic)[1]["ila1"] == pytest.approx(1.0)
