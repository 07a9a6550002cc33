import pytest
import torch
import torch.nn.functional as F

from interp.fast import fast_logits, supports_fast_path
from interp.model import InductionNet, ModelConfig
from interp.task import TaskConfig, TaskGenerator

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
