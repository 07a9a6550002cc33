"""The positional-encoding registry: built-ins, configs, old config.json files, a plugin (ALiBi)."""

import dataclasses
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from interp.analysis.length import rescale_rope
from interp.cli import build_configs, main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train
from interp.io import plugins
from interp.io.plugins import load_plugin, loaded_plugins
from interp.io.rundir import load_run, read_config
from interp.model.fast import supports_fast_path
from interp.model.network import InductionNet, ModelConfig, canonical_model_dict
from interp.model.positional import (
    POSITIONAL_ENCODINGS,
    CopeConfig,
    PositionalEncoding,
    RopeConfig,
    positional_parameters,
    register_positional,
)

ROOT = Path(__file__).resolve().parents[2]
ALIBI = ROOT / "tests" / "fixtures" / "alibi.py"
TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)


@pytest.fixture
def alibi():
    """The ALiBi plugin, registered for one test and removed afterwards."""
    module = load_plugin(str(ALIBI))
    yield module
    POSITIONAL_ENCODINGS.pop("alibi", None)
    sys.modules.pop(module.__name__, None)
    plugins._LOADED.pop(str(ALIBI.resolve()), None)


def test_builtin_encodings_are_registered_with_their_configs():
    assert list(POSITIONAL_ENCODINGS)[:5] == ["onehot", "learned", "none", "rope", "cope"]
    assert POSITIONAL_ENCODINGS["rope"].config_class is RopeConfig
    assert POSITIONAL_ENCODINGS["onehot"].config_class is None
    flat = positional_parameters()
    assert flat["rope_base"] == ("rope", "base", 10000.0)
    assert flat["cope_p_max"] == ("cope", "p_max", 64)
    # d_model comes from the encoding class: only the one-hot concatenation widens the residual
    assert ModelConfig.from_task(TASK).d_model == 15 + 9
    for name in ("learned", "none", "cope"):
        assert ModelConfig.from_task(TASK, positional=name).d_model == 15
    assert ModelConfig.from_task(TASK, positional="rope", d_head=16).d_model == 15
    assert POSITIONAL_ENCODINGS["rope"].supports_rescaling
    assert not POSITIONAL_ENCODINGS["cope"].supports_rescaling


def test_encoding_parameters_live_in_their_own_config():
    cfg = ModelConfig.from_task(TASK, positional="rope", d_head=16, rope_base=500, rope_scale=2)
    assert cfg.positional_config == RopeConfig(base=500, scale=2)
    assert cfg.rope_base == 500 and cfg.cope_p_max is None  # old names still read
    assert cfg.to_dict()["positional_config"] == {
        "base": 500,
        "scaling": "none",
        "scale": 2,
        "mix_b": 0.5,
        "constant_dim": False,
    }
    assert not any(k.startswith(("rope_", "cope_")) for k in cfg.to_dict())
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.from_task(TASK, positional="cope").positional_config == CopeConfig()
    with pytest.raises(ValueError, match=r"RopeConfig\.scaling='yarn' \(rope_scaling\)"):
        ModelConfig.from_task(TASK, positional="rope", d_head=16, rope_scaling="yarn")
    with pytest.raises(ValueError, match=r"CopeConfig\.p_max=0"):
        ModelConfig.from_task(TASK, positional="cope", positional_config={"p_max": 0})
    with pytest.raises(ValueError, match=r"unknown for positional='cope'.*\['p_max'\]"):
        ModelConfig.from_task(TASK, positional="cope", positional_config={"base": 3})
    with pytest.raises(ValueError, match=r"positional='onehot' has no parameters"):
        ModelConfig.from_task(TASK, positional_config={"base": 3})
    with pytest.raises(ValueError, match=r"ModelConfig field 'rope_bass' is unknown"):
        ModelConfig.from_dict({"rope_bass": 3})


def test_old_set_spelling_still_works():
    _, cfg, _, _ = build_configs(
        "tiny", {"positional": "rope", "d_head": "16", "model.rope_base": "500"}, seed=0
    )
    assert cfg.positional_config == RopeConfig(base=500.0)
    _, cfg, _, _ = build_configs("tiny", {"positional": "none", "attn_scale": "none"}, seed=0)
    assert (cfg.positional, cfg.attn_scale) == ("none", "none")  # "none" is a name here
    # a parameter of an encoding that is not selected does not act, as before
    _, cfg, _, _ = build_configs("tiny", {"cope_p_max": "9"}, seed=0)
    assert cfg.positional_config is None


def _old_format_model_dict(**fields) -> dict:
    """A ``config.json`` "model" entry as the code before the registry wrote it."""
    old = dict(
        D=TASK.D,
        L=TASK.L,
        n_positions=TASK.P,
        n_ctx_train=TASK.seq_len,
        n_layers=2,
        n_heads=1,
        d_head=None,
        d_mlp=16,
        n_mlp_layers=3,
        positional="onehot",
        attn_scale="none",
        attn_init_std=None,
        rope_base=10000.0,
        rope_scaling="none",
        rope_scale=1.0,
        rope_mix_b=0.5,
        cope_p_max=64,
    )
    old.update(fields)
    return old


@pytest.mark.parametrize(
    "fields, check",
    [
        (
            dict(positional="rope", d_head=16, rope_base=500.0, rope_scaling="ntk", rope_scale=2.0),
            lambda m: (
                (m.positional.base, m.positional.scaling, m.positional.scale) == (500.0, "ntk", 2.0)
            ),
        ),
        (
            dict(positional="cope", cope_p_max=5),
            lambda m: m.blocks[1].attn.W_cope.shape == (6, 15),
        ),
        (dict(positional="learned"), lambda m: m.positional.W_pos.shape == (9, 15)),
    ],
)
def test_old_config_json_migrates_and_its_checkpoints_load(tmp_path, fields, check):
    old = _old_format_model_dict(**fields)
    # A format-1 run's classifier was He-initialised with a readout bias and per-unit hidden
    # biases: load_run migrates the missing readout_init field to "he" (format 3), hidden_bias to
    # "per_unit" (format 4), and the flat encoding fields as below.
    migrated = ModelConfig.from_dict({**old, "readout_init": "he", "hidden_bias": "per_unit"})
    original = InductionNet(migrated, seed=3)
    with torch.no_grad():
        for block in original.blocks:
            if hasattr(block.attn, "W_cope"):
                block.attn.W_cope.normal_(generator=torch.Generator().manual_seed(4))
    (tmp_path / "checkpoints").mkdir()
    save_file(original.state_dict(), tmp_path / "checkpoints" / "step_00000010.safetensors")
    config = {
        "format_version": 1,
        "task": TASK.to_dict(),
        "model": old,
        "train": dataclasses.asdict(TrainConfig(steps=10)),
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = load_run(tmp_path)
    assert run.model_config == migrated and run.model_config.positional == fields["positional"]
    model = run.load_model(10)
    assert check(model)
    assert model.state_dict().keys() == original.state_dict().keys()
    batch = TaskGenerator(TASK, 0).sample(8, torch.Generator().manual_seed(5))
    torch.testing.assert_close(
        model(batch.tokens, batch.positions), original(batch.tokens, batch.positions)
    )
    # an old run, as read_config migrates it, compares equal to the same config written today
    # (resume, sweeps)
    assert canonical_model_dict(read_config(tmp_path / "config.json")[0]["model"]) == (
        migrated.to_dict()
    )


def test_old_format_run_directory_resumes(tmp_path):
    model_cfg = ModelConfig.from_task(TASK, d_mlp=16, positional="rope", d_head=16, rope_base=99)
    train_cfg = TrainConfig(optimizer="adam", lr=3e-3, batch_size=16, steps=4, eval_every=2)
    train(TASK, model_cfg, train_cfg, tmp_path, progress=False)
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    config["model"] = _old_format_model_dict(positional="rope", d_head=16, rope_base=99.0)
    path.write_text(json.dumps(config))  # as the old code wrote it
    metrics = train(
        TASK,
        model_cfg,
        dataclasses.replace(train_cfg, steps=6),
        tmp_path,
        resume=True,
        progress=False,
    )
    assert list(metrics["step"]) == [0, 2, 4, 6]


def test_registry_refuses_bad_registrations():
    @dataclasses.dataclass(kw_only=True)
    class Mutable:
        x: float = 1.0

    class Dummy(PositionalEncoding):
        """A dummy."""

    with pytest.raises(ValueError, match="frozen dataclass"):
        register_positional("dummy", Dummy, config=Mutable)
    with pytest.raises(ValueError, match="already registered"):
        register_positional("rope", Dummy)
    with pytest.raises(ValueError, match="lowercase"):
        register_positional("Dummy-1", Dummy)
    with pytest.raises(ValueError, match="not a PositionalEncoding"):
        register_positional("dummy", int)
    assert "dummy" not in POSITIONAL_ENCODINGS


def test_alibi_plugin_trains_through_the_cli_and_is_used(alibi, tmp_path, capsys):
    out = tmp_path / "alibi"
    args = ["train", "--preset", "tiny", "--plugin", str(ALIBI), "--set", "positional=alibi"]
    args += ["--set", "alibi_slope=0.7", "--set", "steps=10", "--set", "eval_every=5"]
    assert main([*args, "--set", "num_threads=1", "--out", str(out), "--quiet"]) == 0
    config = json.loads((out / "config.json").read_text())["model"]
    assert config["positional"] == "alibi" and config["positional_config"] == {"slope": 0.7}
    assert list(pd.read_csv(out / "metrics.csv")["step"]) == [0, 5, 10]

    run = load_run(out)
    model = run.load_model()
    assert type(model.positional).__name__ == "Alibi" and not supports_fast_path(model)
    batch = run.eval_sets(n=8)["ic"]
    _, cache = model.run_with_cache(batch.tokens, batch.positions)
    n = batch.tokens.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for layer in range(2):
        q = cache[f"blocks.{layer}.attn.hook_q"][:, :, 0]
        k = cache[f"blocks.{layer}.attn.hook_k"][:, :, 0]
        content = q @ k.transpose(1, 2)
        distance = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        # known answer: the scores are the content scores minus 0.7 |i - j|
        expected = (content - 0.7 * distance).masked_fill(~causal, float("-inf"))
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][:, 0]
        torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-4)
        assert cache[f"blocks.{layer}.attn.hook_alibi_bias"].shape == (8, 1, n, n)
    # another slope, the same weights: other logits
    flat = InductionNet(dataclasses.replace(model.cfg, positional_config={"slope": 0.0}), None)
    flat.load_state_dict(model.state_dict())
    assert (
        flat(batch.tokens, batch.positions) - model(batch.tokens, batch.positions)
    ).abs().max() > 1e-3
    with pytest.raises(ValueError, match="supports rescaling"):
        rescale_rope(model, "pi", 2.0)


def test_plugin_and_registry_errors_are_one_line(alibi, capsys):
    # loading the same file again is the same module: one registration; spawned sweep workers
    # load what loaded_plugins() lists
    assert load_plugin(str(ALIBI)) is alibi and loaded_plugins().count(str(ALIBI.resolve())) == 1
    assert main(["train", "--plugin", "no/such/plugin.py", "--preset", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --plugin 'no/such/plugin.py' is invalid: no such file"
    assert main(["train", "--plugin", "no_such_module_xyz", "--preset", "tiny"]) == 2
    assert (
        "no_such_module_xyz' is invalid: no such file or importable module"
        in capsys.readouterr().err
    )
    # the allowed values of positional= come from the registry, the plugin's included
    assert main(["train", "--preset", "tiny", "--set", "positional=alibi2", "--out", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(r"ModelConfig\.positional='alibi2' is invalid", err)
    assert "'rope', 'cope', 'alibi'" in err
    assert (
        main(
            [
                "train",
                "--preset",
                "tiny",
                "--set",
                "positional=alibi",
                "--set",
                "alibi_slope=-1",
                "--out",
                "x",
            ]
        )
        == 2
    )
    assert "AlibiConfig.slope=-1.0 (alibi_slope) is invalid" in capsys.readouterr().err
    assert not Path("x").exists()


def test_contributing_page_shows_the_alibi_plugin_the_tests_run():
    page = (ROOT / "docs" / "contributing.md").read_text()
    section = page.split("## Add a positional encoding", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert code == ALIBI.read_text()
    assert "--plugin tests/fixtures/alibi.py --set positional=alibi" in section
