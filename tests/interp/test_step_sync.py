"""A training step makes no host synchronisation: between evaluations no tensor is read into
Python (``.item()``, ``.tolist()``, ``bool``/``int``/``float`` of a tensor, ``.numpy()``), so a
GPU is never made to wait for the host; the summed loss is read once, before each evaluation."""

from __future__ import annotations

import math

import pytest
import torch

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.model.network import ModelConfig
from interp.train.training import _make_optimizer, _RunState, _single_step, _stacked_step

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=8, B=1, p_C=0.5, n_eval=64)
READS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__")


@pytest.fixture
def host_reads(monkeypatch):
    """Counts every read of a tensor's value into Python while ``counting[0]`` is true."""
    counts = {name: 0 for name in READS}
    counting = [False]
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _name=name, _original=original, **k):
            if counting[0]:
                counts[_name] += 1
            return _original(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return counts, counting


def _run(seed: int, **train) -> _RunState:
    cfg = TrainConfig(**{"steps": 1000, "eval_every": 500, "batch_size": 16, "seed": seed, **train})
    return _RunState(TASK, ModelConfig.from_task(TASK, d_mlp=16), cfg, None, False, False)


def test_a_hundred_steps_read_nothing_on_the_host(host_reads):
    """With the default device sampler (the host sampler draws on the CPU by design)."""
    counts, counting = host_reads
    run = _run(0)
    step = _single_step(run)
    counting[0] = True
    for _ in range(100):
        step()
        run.step += 1
    counting[0] = False
    assert counts == dict.fromkeys(READS, 0)
    assert run.loss_count == 100 and torch.is_tensor(run.loss_sum)
    # the read before an evaluation: one .tolist() of the sum, which is the steps' losses
    run.cfg = TrainConfig(steps=101, eval_every=500, batch_size=16, seed=0)
    counting[0] = True
    step()
    counting[0] = False
    assert counts["tolist"] == 1 and sum(counts.values()) == 1
    assert isinstance(run.loss_sum, float) and math.isfinite(run.loss_sum)
    assert 101 * 0.5 < run.loss_sum < 101 * 5  # a cross-entropy over 8 labels starts near log 8


def test_stacked_steps_read_nothing_on_the_host(host_reads):
    from interp.model.stacked import ModelStack

    counts, counting = host_reads
    runs = [_run(seed) for seed in (0, 1, 2)]
    stack = ModelStack([r.model for r in runs])
    step = _stacked_step(runs, stack, _make_optimizer(stack.parameters(), runs[0].cfg))
    counting[0] = True
    for _ in range(100):
        step()
        for run in runs:
            run.step += 1
    counting[0] = False
    assert counts == dict.fromkeys(READS, 0)
    sums = [float(r.loss_sum) for r in runs]
    assert all(100 * 0.5 < s < 100 * 5 for s in sums) and len(set(sums)) == 3


def test_a_non_finite_loss_stops_the_run_at_the_read_before_the_evaluation():
    from interp.train.training import TrainingDiverged

    run = _run(0, lr=1e6, steps=300, eval_every=100)
    step = _single_step(run)
    with pytest.raises(TrainingDiverged, match=r"became (nan|inf) at step (\d+)") as err:
        for _ in range(300):
            step()
            run.step += 1
    assert int(err.value.args[0].split("at step ")[1].split()[0]) % 100 == 0
