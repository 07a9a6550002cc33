"""``backend="auto"``: compiled only when the run's steps repay the compile, else fast, whatever
the compile cache holds; a named backend as it is; the choice said in one line and recorded in
the run's config.json."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.model.compiled import compile_cache_dir
from interp.model.network import InductionNet, ModelConfig
from interp.train.backend_choice import COLD_COMPILE_S, break_even_steps, choose_backend
from tests.interp.tiny_runs import tiny_run

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
        f"backend: fast (auto: {even} steps <= break-even {even} (48 s compile))"
    )


def test_the_choice_is_the_same_with_the_cache_empty_warm_or_off(cache, monkeypatch):
    """The same command on the same machine trains with the same backend, whatever earlier
    processes left in the compile cache: the backends agree only to float rounding."""
    even = break_even_steps(COLD_COMPILE_S, 128)
    runs = [_run(10_000), _run(even + 1)]  # below and above the break-even
    empty = [choose_backend(r) for r in runs]
    assert empty == ["fast", "compiled"]
    warm = compile_cache_dir()  # what earlier compiles leave there: artefacts of every kind
    (warm / "fxgraph" / "ab").mkdir(parents=True, exist_ok=True)
    (warm / "fxgraph" / "ab" / "entry").write_bytes(b"\0" * 64)
    (warm / "compile-costs.json").write_text('{"torch": {"cold": 50.0, "warm": 4.0}}')
    assert [choose_backend(r) for r in runs] == empty
    monkeypatch.setenv("INDUCTION_CLIFF_CACHE", "off")
    assert [choose_backend(r) for r in runs] == empty


def test_a_named_backend_is_kept_and_auto_is_fast_where_compiling_does_not_apply(cache):
    assert choose_backend(_run(10, backend="compiled")) == "compiled"
    assert choose_backend(_run(10**6, backend="fast")) == "fast"
    assert choose_backend(_run(10**6, positional="learned")) == "fast"
    off = _run(10**6)
    off.hooks = [("blocks.0.attn.hook_pattern", lambda x, hook: x)]
    assert choose_backend(off) == "fast"


def _trained(run) -> list:
    return json.loads((run / "config.json").read_text())["trained_backends"]


def test_the_run_records_the_backend_that_trained_it(tmp_path, monkeypatch):
    """config.json says which backend computed the steps: auto's choice, a named backend, and,
    after a resume, the same one (a resumed run keeps its backend)."""
    import interp.train.training as training

    run = tiny_run(tmp_path / "auto")  # auto, 40 steps: fast
    assert _trained(run) == ["fast"]
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["backend"] == "auto"  # the setting as given, beside what it chose

    chosen = iter(["compiled"])  # what auto would choose on a machine with a long run ahead
    monkeypatch.setattr(training, "choose_backend", lambda r: next(chosen))
    monkeypatch.setattr(training, "training_loss", lambda m, b, **kw: _fast_loss(m))
    train_cfg = {"steps": 30}
    run = _tiny(tmp_path / "resumed", stop_after=10, **train_cfg)
    assert _trained(run) == ["compiled"]
    before = (run / "config.json").read_bytes()
    _tiny(tmp_path / "resumed", resume=True, **train_cfg)  # chooses nothing again
    assert (run / "config.json").read_bytes() == before
    _tiny(tmp_path / "resumed", resume=True, steps=40)  # more steps: config.json is rewritten
    assert _trained(run) == ["compiled"]


def _fast_loss(model):
    from interp.model.backends import training_loss

    return training_loss(model, "fast")


def _tiny(out, *, stop_after=None, resume=False, steps=30):
    from interp.config.train_config import TrainConfig
    from interp.experiments.standard import train

    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
    cfg = TrainConfig(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=steps,
        eval_every=10,
        checkpoint_every=10,
        n_log_checkpoints=0,
        num_threads=1,
    )
    train(
        task,
        ModelConfig.from_task(task, d_mlp=32),
        cfg,
        out,
        progress=False,
        resume=resume,
        stop_after=stop_after,
    )
    return out


def test_a_damaged_backend_record_is_named(tmp_path):
    from interp.io.rundir import RunDirectoryError, load_run

    run = tiny_run(tmp_path / "run", steps=10)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "trained_backends": "fast"}))
    with pytest.raises(RunDirectoryError, match="field trained_backends must be a list"):
        load_run(run)
