"""The dead-unit measure (share of the classifier's ReLU units firing, per hidden layer) on networks
whose pre-activations are set by hand, and the tied hidden-bias form's initialisation."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from interp.analysis.dead_units import ACTIVE_COLUMNS
from interp.analysis.measures import compute_measures
from interp.cli import main
from interp.data.task import TaskConfig, TaskGenerator
from interp.model.network import InductionNet, ModelConfig

TASK = TaskConfig(D=15, K=16, L=8, N=4, N_max=4, B=2, p_C=0.5, n_eval=64)


def _net_with_biases(*biases: torch.Tensor) -> InductionNet:
    """A network whose hidden layers' pre-activations are exactly ``biases`` (zero weights)."""
    net = InductionNet(ModelConfig.from_task(TASK, d_mlp=8, hidden_bias="per_unit"), seed=0)
    with torch.no_grad():
        for layer, bias in zip(net.classifier.hidden, biases):
            layer.weight.zero_()
            layer.bias.copy_(bias)
    return net


def _active(net) -> dict[str, float]:
    ic = TaskGenerator(TASK, 0).eval_sets(seed=1)["ic"]
    _, values = compute_measures(net, ic, list(ACTIVE_COLUMNS))
    return values


def test_all_negative_pre_activations_read_zero_all_positive_one_half_half():
    neg, pos = torch.full((8,), -1.0), torch.full((8,), 2.0)
    half = torch.tensor([1.0, -1.0] * 4)
    assert _active(_net_with_biases(neg, neg, neg)) == {c: 0.0 for c in ACTIVE_COLUMNS}
    assert _active(_net_with_biases(pos, pos, pos)) == {c: 1.0 for c in ACTIVE_COLUMNS}
    assert _active(_net_with_biases(pos, half, neg)) == {
        "active_h1": 1.0,
        "active_h2": 0.5,
        "active_h3": 0.0,
    }


def test_a_network_with_fewer_hidden_layers_has_fewer_columns():
    net = InductionNet(ModelConfig.from_task(TASK, d_mlp=8, n_mlp_layers=1), seed=0)
    values = _active(net)
    assert list(values) == ["active_h1"] and 0.0 < values["active_h1"] < 1.0


def test_tied_form_starts_with_the_last_two_hidden_biases_equal_and_the_rest_as_scalar():
    scalar = InductionNet(ModelConfig.from_task(TASK, hidden_bias="scalar"), seed=3)
    tied = InductionNet(ModelConfig.from_task(TASK, hidden_bias="tied"), seed=3)
    b_s = [float(layer.bias.detach()) for layer in scalar.classifier.hidden]
    b_t = [float(layer.bias.detach()) for layer in tied.classifier.hidden]
    assert tied.classifier.hidden[2].bias.shape == (1,)  # a scalar bias, as the author's code
    assert b_t[2] == b_t[1] == b_s[1] and b_t[0] == b_s[0]
    assert b_s[2] != b_s[1]  # the scalar form draws them apart
    state_s, state_t = scalar.state_dict(), tied.state_dict()
    for name, value in state_s.items():
        if name != "classifier.hidden.2.bias":
            assert torch.equal(value, state_t[name]), name


def test_train_records_the_active_units_at_every_evaluation(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--out", str(out), "--quiet"]) == 0
    m = pd.read_csv(out / "metrics.csv")
    assert list(m["step"]) == [0, 50, 100, 150, 200]
    for column in ACTIVE_COLUMNS:
        assert m[column].between(0, 1).all() and m[column].notna().all()
    # At initialisation about half the units of a He-initialised layer fire.
    assert m.loc[0, "active_h1"] == pytest.approx(0.5, abs=0.15)
