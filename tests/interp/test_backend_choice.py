"""``backend="auto"``: compiled only when the run's steps repay the compile, else fast; a named
backend as it is; the choice said in one line."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.model.compiled import compile_key, record_compile_cost
from interp.model.network import InductionNet, ModelConfig
from interp.train.backend_choice import (
    COLD_COMPILE_S,
    WARM_COMPILE_S,
    break_even_steps,
    choose_backend,
)

TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, n_eval=64)


def _run(steps: int, step: int = 0, backend: str = "auto", **model):
    model = InductionNet(ModelConfig.from_task(TASK, **model), seed=0)
    cfg = TrainConfig(steps=steps, backend=backend, batch_size=128)
    return SimpleNamespace(cfg=cfg, step=step, model=model, task=TASK, hooks=[])


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("INDUCTION_CLIFF_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "inductor").mkdir(parents=True)
    return tmp_path / "cache"


def test_break_even_is_the_compile_cost_over_the_per_step_gain():
    assert break_even_steps(48.0, 128) == 40_000  # 48 s / 1.2 ms
    assert break_even_steps(4.8, 128) == 4_000
    assert break_even_steps(4.8, 256) == 2_000  # twice the batch, twice the gain per step


def test_auto_takes_fast_below_the_break_even_and_compiled_above(cache, caplog):
    even = break_even_steps(COLD_COMPILE_S, 128)
    with caplog.at_level(logging.INFO, logger="interp.train.backend_choice"):
        assert choose_backend(_run(even)) == "fast"
        assert choose_backend(_run(even + 1)) == "compiled"
        assert choose_backend(_run(even + 1000, step=1000)) == "fast"  # a resumed run: steps left
    assert caplog.messages[0] == (
        f"backend: fast (auto: {even} steps <= break-even {even} (48 s compile, cache empty))"
    )


def test_a_warm_cache_lowers_the_break_even(cache):
    run = _run(10_000)
    assert choose_backend(run) == "fast"  # 10000 steps do not repay a cold compile
    key = compile_key(run.model, (128, TASK.seq_len, TASK.D))
    record_compile_cost(key, 50.0)  # a first compile of these shapes: the cache is warm now
    assert choose_backend(run) == "compiled"  # the warm figure, 4.6 s: break-even 3834
    assert break_even_steps(WARM_COMPILE_S, 128) < 10_000
    record_compile_cost(key, 20.0)  # measured warm here: 20 s, break-even 16667
    assert choose_backend(run) == "fast"


def test_a_named_backend_is_kept_and_auto_is_fast_where_compiling_does_not_apply(cache):
    assert choose_backend(_run(10, backend="compiled")) == "compiled"
    assert choose_backend(_run(10**6, backend="fast")) == "fast"
    assert choose_backend(_run(10**6, positional="learned")) == "fast"
    off = _run(10**6)
    off.hooks = [("blocks.0.attn.hook_pattern", lambda x, hook: x)]
    assert choose_backend(off) == "fast"
