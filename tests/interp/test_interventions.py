import pytest
import torch

from interp.analysis.probes import PATTERN_HOOKS
from interp.config.train_config import TrainConfig, derive_seed
from interp.data.task import TaskConfig
from interp.experiments.standard import train
from interp.io.rundir import load_run
from interp.model.interventions import ideal_prev_token_pattern, intervention_hooks
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)


@pytest.mark.parametrize(
    "name, layer", [("clamp_prev_token", 0), ("uniform_layer1", 0), ("uniform_layer2", 1)]
)
def test_clamped_pattern_is_what_the_model_uses(tmp_path, name, layer):
    model_cfg = ModelConfig.from_task(TASK, d_mlp=16)
    tc = TrainConfig(
        optimizer="adam", lr=1e-2, batch_size=16, steps=20, eval_every=10, intervention=name
    )
    metrics = train(TASK, model_cfg, tc, tmp_path / "run", progress=False)
    run = load_run(tmp_path / "run")
    assert run.train_config.intervention == name
    model = run.load_model()
    # training left no hooks behind
    assert all(len(hp._forward_hooks) == 0 for hp in model.hook_dict.values())
    batch = run.eval_sets()["ic"]
    with model.hooks(fwd_hooks=intervention_hooks(name, model)):
        _, cache = model.run_with_cache(batch.tokens, batch.positions, names_filter=PATTERN_HOOKS)
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
    n = pattern.shape[-1]
    if name == "clamp_prev_token":
        assert torch.equal(pattern, ideal_prev_token_pattern(pattern))
        assert metrics["prev_token_score"].iloc[-1] == pytest.approx(1.0)
        assert metrics["ila1"].iloc[-1] == pytest.approx(1.0)
    else:
        expected = torch.ones(n, n).tril() / torch.arange(1, n + 1)[:, None]
        assert torch.allclose(pattern[0, 0], expected)
    # the frozen layer's W_Q, W_K got no gradient: after 20 Adam steps they still equal the
    # run's seeded initialisation (Adam skips a parameter without gradient, weight decay
    # included), while its W_V, which still learns, has moved
    init = InductionNet(model_cfg, seed=derive_seed(tc.seed, "init") % 2**63)
    trained, start = model.blocks[layer].attn, init.blocks[layer].attn
    assert torch.equal(trained.W_Q, start.W_Q)
    assert torch.equal(trained.W_K, start.W_K)
    assert (trained.W_V - start.W_V).abs().max() > 1e-3
