"""Weights read back from a checkpoint are refused when any one value is NaN or infinite, not only
when a whole tensor is: one line naming the file and the tensor, and the model left as it was."""

import math

import pytest
import torch

from interp.data.task import TaskConfig
from interp.io.checkpoints import load_weights, save_weights
from interp.io.errors import CheckpointError
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)


def _model(seed: int) -> InductionNet:
    return InductionNet(ModelConfig.from_task(TASK, d_mlp=32), seed=seed)


@pytest.mark.parametrize(
    "bad, words",
    [
        ({(0, 0): math.nan}, "holds NaN"),
        ({(2, 1): math.inf}, "holds infinite values"),
        ({(1, 3): -math.inf}, "holds infinite values"),
        ({(0, 0): math.inf, (4, 4): math.nan}, "holds NaN"),
    ],
)
def test_one_non_finite_value_among_finite_ones_is_refused(tmp_path, bad, words):
    saved = _model(0)
    with torch.no_grad():
        for index, value in bad.items():
            saved.blocks[1].attn.W_Q[(0, *index)] = value
    assert torch.isfinite(saved.blocks[1].attn.W_Q).float().mean() > 0.99  # mostly finite
    path = save_weights(tmp_path, 7, saved)
    target = _model(1)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError) as err:
        load_weights(tmp_path, 7, target)
    assert str(err.value) == f"checkpoint {path}: tensor blocks.1.attn.W_Q {words}"
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_finite_weights_load(tmp_path):
    saved = _model(0)
    save_weights(tmp_path, 7, saved)
    target = _model(1)
    load_weights(tmp_path, 7, target)
    for k, v in target.state_dict().items():
        assert torch.equal(v, saved.state_dict()[k]), k
