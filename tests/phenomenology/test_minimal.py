"""The minimal induction head on the network's task: same measures, same picture, same format."""

import contextlib
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from interp.analysis.measures import progress_measures
from interp.analysis.probes import cache_patterns
from interp.data.task import TaskConfig, TaskGenerator
from phenomenology.fit import observed_transition
from phenomenology.minimal import MinimalConfig, MinimalInductionHead, train_minimal

TASK = TaskConfig(n_eval=256)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("minimal")
    with _one_thread():
        metrics = train_minimal(TASK, steps=800, lr=1.0, eval_every=25, seed=0, out_dir=out)
    return out, metrics


@contextlib.contextmanager
def _one_thread():
    """Tiny tensors: one thread is fastest, above all on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def batch():
    return TaskGenerator(TASK, seed=0).ic(64, torch.Generator().manual_seed(1))


def test_shapes_and_measures_match_the_definitions(batch):
    cfg = MinimalConfig.from_task(TASK, beta1_init=-1.0, alpha_init=2.0, W_init_std=0.1)
    model = MinimalInductionHead(cfg, seed=0)
    logits, patterns = cache_patterns(model, batch)
    assert logits.shape == (64, TASK.L)
    assert [p.shape for p in patterns] == [(64, 1, 17, 17)] * 2
    torch.testing.assert_close(patterns[1].sum(-1), torch.ones(64, 1, 17))
    m = progress_measures(patterns, logits, batch)
    assert m["ila1"] == pytest.approx(1 / (1 + math.exp(1.0)), rel=1e-5)  # sigmoid(beta1)
    assert 0 < m["tila2"] < m["tla2"] <= 1
    assert len(model.hook_dict) > 0 and not any(h.fwd_hooks for h in model.hook_dict.values())


def test_hooks_act_on_the_circuit(batch):
    cfg = MinimalConfig.from_task(TASK, beta1_init=2.0, alpha_init=5.0, W_init_std=0.1)
    model = MinimalInductionHead(cfg, seed=0)
    clean = model(batch.tokens, batch.positions)

    def no_prev_token(pattern, hook):
        return torch.eye(pattern.shape[-1]).expand_as(pattern).clone()

    patched = model.run_with_hooks(
        batch.tokens, batch.positions, fwd_hooks=[("blocks.0.attn.hook_pattern", no_prev_token)]
    )
    assert not torch.allclose(clean, patched)
    assert not any(h.fwd_hooks for h in model.hook_dict.values())


def test_two_parameter_variant_has_no_beta2():
    model = MinimalInductionHead(MinimalConfig.from_task(TASK, variant="two"))
    assert {n for n, _ in model.named_parameters()} == {"beta1", "alpha", "W"}
    assert float(model.beta2) == 0.0
    with pytest.raises(ValueError, match="variant"):
        MinimalConfig.from_task(TASK, variant="four")


def test_run_directory_format(run):
    out, metrics = run
    config = json.loads((out / "config.json").read_text())
    assert config["task"]["L"] == TASK.L and config["kind"] == "minimal_induction_head"
    saved = pd.read_csv(out / "metrics.csv")
    network_columns = "step train_loss ic_acc ic_loss ic2_acc ic2_loss iw_acc iw_loss".split()
    measures = "ila1 tila2 tla2 cla prev_token_score induction_score".split()
    assert set(network_columns + measures + ["beta1", "alpha", "beta2", "xi"]) <= set(saved)
    assert saved["step"].tolist() == list(range(0, 801, 25))
    np.testing.assert_allclose(saved["ila1"], 1 / (1 + np.exp(-saved["beta1"])), rtol=1e-5)


def test_plateau_then_jump_like_the_network(run):
    """The picture of docs/science.md section 3: CLA climbs and IC accuracy sits near 1/n on a
    plateau; then ILA1, TILA2 and IC accuracy jump together."""
    _, m = run
    n = TASK.n_distinct
    jump = observed_transition(m, column="ic_loss")["transition_step"]
    assert 300 <= jump <= 750
    plateau = m[(m["step"] >= 100) & (m["step"] <= jump - 100)]
    assert len(plateau) >= 5
    assert plateau["ic_acc"].between(0.5 / n, 1.5 / n).all()
    assert (plateau["cla"] > 0.9).all()  # the context labels are learnt first
    assert (plateau["ila1"] < 0.1).all() and (plateau["tila2"] < 0.4).all()
    after = m[m["step"] >= jump + 100]
    assert (after["ic_acc"] > 0.9).all()
    assert (after["ila1"] > 0.8).all() and (after["tila2"] > 0.8).all()
    # The three jump within one evaluation interval of each other.
    first = {
        c: m["step"][np.argmax(m[c].to_numpy() > thr)]
        for c, thr in (("ic_acc", 0.6), ("ila1", 0.5), ("tila2", 0.6))
    }
    assert max(first.values()) - min(first.values()) <= 25
    # xi (the readout) grows first, then alpha, then beta1.
    p = m[m["step"] <= jump]
    assert p["xi"].iloc[4] > 0.1 and abs(p["beta1"].iloc[4] - p["beta1"].iloc[0]) < 0.05


def test_same_seed_same_run():
    small = TaskConfig(n_eval=32)
    with _one_thread():
        a = train_minimal(small, steps=20, lr=1.0, eval_every=10, seed=3)
        b = train_minimal(small, steps=20, lr=1.0, eval_every=10, seed=3)
    pd.testing.assert_frame_equal(a, b)


def test_bad_arguments():
    with pytest.raises(ValueError, match="lr"):
        train_minimal(TASK, steps=10, lr=0.0)
    with pytest.raises(ValueError, match="eval_every"):
        train_minimal(TASK, steps=10, eval_every=0)
