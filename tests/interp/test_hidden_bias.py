"""The classifier's hidden biases: the author's one scalar per layer (the default) and per-unit
ones.

The reference is a plain-torch implementation of the author's network written here from the
paper's equations (docs/science.md section 2), sharing no code with the toolkit: the toolkit's
first SGD step must equal it for every parameter.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import pytest
import torch
import torch.nn.functional as F

from interp.data.task import TaskGenerator
from interp.io.rundir import load_run
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.model.stacked import ModelStack, stacked_logits
from interp.train.presets import get_preset
from interp.train.training import derive_seed, train

PRESET = get_preset("paper-fig3")
TASK = dataclasses.replace(PRESET.task, n_eval=64)  # the paper-fig3 task, small evaluation sets
ONE_STEP = dataclasses.replace(
    PRESET.train,
    steps=1,
    eval_every=1,
    checkpoint_every=1,
    n_log_checkpoints=0,
    live_forecast=False,
    num_threads=1,
    sample_on="host",  # _first_batch draws the host stream
)


def _train(tmp_path, name: str, **model) -> object:
    train(TASK, ModelConfig.from_task(TASK, **model), ONE_STEP, tmp_path / name, progress=False)
    return load_run(tmp_path / name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One-step paper-fig3 runs of seed 0, in both forms (trained once for the module)."""
    tmp = tmp_path_factory.mktemp("hidden_bias")
    return {form: _train(tmp, form, hidden_bias=form) for form in ("scalar", "per_unit")}


def _author_loss(p: dict, tokens, positions, target, n_positions: int) -> torch.Tensor:
    """The author's network: u = [x ; onehot(pos)]; per layer u <- u + softmax_causal((u W_Q)
    (u W_K)^T) u W_V (no scale); three ReLU layers h <- relu(h W^T + b) with b ONE scalar per layer;
    a readout without bias; softmax cross-entropy on the query token."""
    u = torch.cat([tokens, F.one_hot(positions, n_positions).float()], dim=-1)
    n = u.shape[1]
    causal = torch.ones(n, n).tril().bool()
    for layer in range(2):
        q, k, v = (u @ p[f"W{w}{layer}"] for w in "QKV")
        scores = (q @ k.transpose(1, 2)).masked_fill(~causal, float("-inf"))
        u = u + scores.softmax(-1) @ v
    h = u[:, -1]
    for i in range(3):
        h = torch.relu(h @ p[f"W{i}"].T + p[f"b{i}"])  # p[f"b{i}"] is a 0-d tensor
    return F.cross_entropy(h @ p["R"].T, target)


def _author_params(model: InductionNet) -> dict:
    """The toolkit model's weights under the author's names (copies, as leaf tensors)."""
    p = {}
    for layer in range(2):
        attn = model.blocks[layer].attn
        for w in "QKV":
            p[f"W{w}{layer}"] = getattr(attn, f"W_{w}")[0].detach().clone()
    for i, hidden in enumerate(model.classifier.hidden):
        assert hidden.bias.numel() == 1
        p[f"W{i}"] = hidden.weight.detach().clone()
        p[f"b{i}"] = hidden.bias.detach().clone().reshape(())
    p["R"] = model.classifier.readout.weight.detach().clone()
    return {k: v.requires_grad_(True) for k, v in p.items()}


def _first_batch(seed: int):
    """The batch the trainer draws at its first step (its generator, after its evaluation sets)."""
    gen = TaskGenerator(TASK, seed=derive_seed(seed, "task"))
    gen.eval_sets(derive_seed(seed, "eval"))
    stream = torch.Generator().manual_seed(derive_seed(seed, "stream"))
    return gen.sample(ONE_STEP.batch_size, stream)


def test_a_paper_fig3_checkpoint_holds_one_bias_per_hidden_layer(runs):
    run = runs["scalar"]
    assert ModelConfig().hidden_bias == "scalar"  # the default
    assert json.loads((run.path / "config.json").read_text())["format_version"] == 5
    for step in (0, 1):
        model = run.load_model(step)
        for i, layer in enumerate(model.classifier.hidden):
            assert layer.bias.shape == (1,), f"classifier.hidden.{i}.bias"
            # Broadcast: every unit gets the scalar.
            x = torch.randn(4, layer.in_features, generator=torch.Generator().manual_seed(i))
            torch.testing.assert_close(layer(x), x @ layer.weight.T + layer.bias.item())
    assert sum(p.numel() for n, p in model.named_parameters() if n.endswith("bias")) == 3


def test_one_sgd_step_equals_the_authors_network(runs):
    seed = 0
    run = runs["scalar"]
    before, after = _author_params(run.load_model(0)), _author_params(run.load_model(1))
    batch = _first_batch(seed)
    loss = _author_loss(before, batch.tokens, batch.positions, batch.target, TASK.P)
    # The training loss of metrics.csv is the loss of that one batch.
    assert loss.item() == pytest.approx(run.metrics["train_loss"].iloc[-1], rel=1e-5)
    grads = dict(zip(before, torch.autograd.grad(loss, list(before.values())), strict=True))
    lr, wd = ONE_STEP.lr, ONE_STEP.weight_decay
    for name, theta in before.items():
        expected = (1 - wd) * theta.detach() - lr * grads[name]  # the multiplicative decay
        torch.testing.assert_close(after[name].detach(), expected, rtol=1e-5, atol=3e-8, msg=name)
    for i in range(3):  # the biases did move, so the comparison above has teeth
        assert abs(after[f"b{i}"] - before[f"b{i}"]).item() > 1e-5


def test_the_scalar_moves_d_mlp_times_the_per_unit_common_mode(runs):
    scalar, per_unit = runs["scalar"], runs["per_unit"]
    assert per_unit.model_config.hidden_bias == "per_unit"
    s0, s1 = scalar.load_model(0), scalar.load_model(1)
    u0, u1 = per_unit.load_model(0), per_unit.load_model(1)
    wd = ONE_STEP.weight_decay
    for i in range(3):
        b_s0, b_s1 = s0.classifier.hidden[i].bias, s1.classifier.hidden[i].bias
        b_u0, b_u1 = u0.classifier.hidden[i].bias, u1.classifier.hidden[i].bias
        assert b_u0.shape == (128,) and torch.all(b_u0 == b_s0)  # the same initial network
        step_s = b_s1 - (1 - wd) * b_s0
        step_u = b_u1 - (1 - wd) * b_u0
        # The scalar's gradient is the sum of the units' gradients (same weights, same batch).
        torch.testing.assert_close(step_s, step_u.sum(0, keepdim=True), rtol=1e-4, atol=1e-9)
        assert not torch.allclose(b_u1, b_u1[0])  # the units moved apart
    for name, w in s0.named_parameters():  # everything else starts equal
        if not name.endswith("bias"):
            torch.testing.assert_close(w, dict(u0.named_parameters())[name], rtol=0, atol=0)


def test_every_forward_path_broadcasts_the_scalar():
    cfg = ModelConfig.from_task(TASK)
    models = [InductionNet(cfg, seed=s) for s in (1, 2)]
    batch = TaskGenerator(TASK, seed=0).sample(16, torch.Generator().manual_seed(0))
    ref = [m(batch.tokens, batch.positions) for m in models]
    for m, r in zip(models, ref, strict=True):
        torch.testing.assert_close(fast_logits(m, batch.tokens, batch.positions), r)
        p = _author_params(m)  # and the author's network, from the same weights
        torch.testing.assert_close(
            _author_loss(p, batch.tokens, batch.positions, batch.target, TASK.P),
            F.cross_entropy(r, batch.target),
        )
    stacked = stacked_logits(
        ModelStack(models), torch.stack([batch.tokens] * 2), torch.stack([batch.positions] * 2)
    )
    for s in range(2):
        torch.testing.assert_close(stacked[s], ref[s])
    with pytest.raises(ValueError, match="hidden_bias='x' is invalid"):
        ModelConfig.from_task(TASK, hidden_bias="x")


def test_a_format_3_run_opens_per_unit_and_says_so(runs, tmp_path, caplog):
    run = runs["per_unit"]
    shutil.copytree(run.path, tmp_path / "old")
    path = tmp_path / "old" / "config.json"
    config = json.loads(path.read_text())
    config["format_version"] = 3
    del config["model"]["hidden_bias"]  # what a format-3 run wrote
    path.write_text(json.dumps(config))
    with caplog.at_level(logging.INFO, logger="interp"):
        old = load_run(tmp_path / "old")
    assert old.model_config.hidden_bias == "per_unit"
    said = [r.getMessage() for r in caplog.records if "hidden_bias" in r.getMessage()]
    assert len(said) == 1 and "per_unit" in said[0] and "format 4" in said[0]
    assert any("format version 3" in n for n in old.notes)
    model = old.load_model()  # the per-unit checkpoint loads into a per-unit network
    assert model.classifier.hidden[0].bias.shape == (128,)
    torch.testing.assert_close(
        model.classifier.hidden[0].bias, run.load_model().classifier.hidden[0].bias
    )
    # A run of today's format, per-unit or scalar, says nothing about its form.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="interp"):
        load_run(run.path)
        load_run(runs["scalar"].path)
    assert not any("hidden_bias" in r.getMessage() for r in caplog.records)


def test_a_scalar_run_mislabelled_format_3_is_refused_in_one_line_before_anything(
    runs, tmp_path, capsys
):
    """A config that says format 3 (hence per-unit hidden biases) beside checkpoints of the
    author's scalar ones: its resume, or any reading of it, is refused naming the config and the
    checkpoint (exit 3, nothing written), not a crash on the weights' shapes."""
    from interp.cli import main
    from interp.io.errors import RunDirectoryError

    shutil.copytree(runs["scalar"].path, tmp_path / "mislabelled")
    path = tmp_path / "mislabelled" / "config.json"
    config = json.loads(path.read_text())
    config["format_version"] = 3
    del config["model"]["hidden_bias"]
    path.write_text(json.dumps(config))
    before = {p: p.read_bytes() for p in path.parent.rglob("*") if p.is_file()}
    out = str(path.parent)
    assert main(["train", "--resume", "--out", out, "--set", "steps=2", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: {path}: format_version 3 without model.hidden_bias reads as 'per_unit', but "
        f"{path.parent / 'checkpoints' / 'step_00000000.safetensors'} holds one bias per hidden "
        'layer: a mislabelled config (add "hidden_bias": "scalar" to its model to open the run)'
    ]
    assert {p: p.read_bytes() for p in path.parent.rglob("*") if p.is_file()} == before
    assert main(["evaluate", out]) == 3
    with pytest.raises(RunDirectoryError, match="mislabelled config"):
        load_run(out)
    # as the refusal says: with the field written, the run opens in its own form and resumes
    config["model"]["hidden_bias"] = "scalar"
    path.write_text(json.dumps(config))
    assert load_run(out).load_model().classifier.hidden[0].bias.shape == (1,)
    assert main(["train", "--resume", "--out", out, "--set", "steps=2", "--quiet"]) == 0
    assert load_run(out).metrics["step"].max() == 2
