"""Length generalisation: evaluation at more pairs than training, and the ``evaluate`` command."""

import warnings

import pandas as pd
import pytest

from interp.analysis.length import evaluate_lengths, length_table, parse_n_pairs
from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig, TaskGenerator
from interp.experiments.standard import train
from interp.model.network import InductionNet, ModelConfig
from interp.model.positional import UntrainedPositionWarning

# N_max = 4: positions run to P - 1 = 8, so 8 pairs (17 tokens) need untrained positions.
TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)


def test_length_table_reports_untrained_positions_instead_of_crashing():
    model = InductionNet(ModelConfig.from_task(TASK, d_mlp=16), seed=0)
    with pytest.warns(UntrainedPositionWarning):
        df = length_table(model, TaskGenerator(TASK, 0), 1, n_pairs=(4, 8), n=32)
    assert list(df.n_pairs) == [4, 8] and list(df.seq_len) == [9, 17]
    assert df.untrained_positions.iloc[0] == 0
    assert df.untrained_positions.iloc[1] == 32 * (17 - TASK.P)  # tokens at positions 9..16
    for col in ("ic_acc", "ila1", "tila2", "tla2", "cla", "ic2_acc", "iw_acc"):
        assert df[col].between(0, 1).all(), col


@pytest.mark.parametrize("attn_scale", ["none", "log_n"])
def test_query_row_entropy_and_neff_of_a_uniform_last_layer(attn_scale):
    import math

    import torch

    cfg = ModelConfig.from_task(TASK, d_mlp=16, positional="rope", d_head=16, attn_scale=attn_scale)
    model = InductionNet(cfg, seed=0)
    with torch.no_grad():  # layer 2 scores all zero: the query attends uniformly to 2N + 1 keys
        model.blocks[1].attn.W_Q.zero_()
    df = length_table(model, TaskGenerator(TASK, 0), 1, n_pairs=(2, 4, 8), n=16, sets=("ic",))
    for n_pairs, entropy, n_eff in zip(df.n_pairs, df.l2_query_entropy, df.l2_query_neff):
        assert entropy == pytest.approx(math.log(2 * n_pairs + 1), rel=1e-6)
        assert n_eff == pytest.approx(2 * n_pairs + 1, rel=1e-6)


def test_relative_encodings_have_no_untrained_positions_and_rope_scale_follows_length():
    cfg = ModelConfig.from_task(TASK, d_mlp=16, positional="rope", d_head=16)
    model = InductionNet(cfg, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UntrainedPositionWarning for RoPE
        df = length_table(
            model, TaskGenerator(TASK, 0), 1, n_pairs=(4, 8), n=32, rope_scaling="ntk"
        )
    assert (df.untrained_positions == 0).all()
    assert list(df.rope_scale) == [1.0, 2.0] and (df.rope_scaling == "ntk").all()
    # the model is handed back with its own scaling
    assert model.positional.scaling == "none" and model.cfg.rope_scaling == "none"
    with pytest.raises(ValueError, match="rope_scaling"):
        length_table(model, TaskGenerator(TASK, 0), 1, n_pairs=(4,), rope_scaling="yarn")


def test_task_constraints_on_n_pairs_are_clear_errors():
    model = InductionNet(ModelConfig.from_task(TASK, d_mlp=16), seed=0)
    with pytest.raises(ValueError, match="distinct labels"):
        length_table(model, TaskGenerator(TASK, 0), 1, n_pairs=(16,), n=8)
    assert parse_n_pairs("8, 16,32") == (8, 16, 32)
    with pytest.raises(ValueError, match="n-pairs"):
        parse_n_pairs("8,x")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("length") / "run"
    train_cfg = TrainConfig(
        optimizer="adam",
        lr=3e-3,
        batch_size=32,
        steps=20,
        eval_every=10,
        checkpoint_every=20,
        n_log_checkpoints=0,
        seed=0,
        num_threads=1,
    )
    train(TASK, ModelConfig.from_task(TASK, d_mlp=16), train_cfg, out, progress=False)
    return out


def test_evaluate_lengths_of_a_run_matches_its_training_evaluation(run_dir):
    df = evaluate_lengths(run_dir, n_pairs=(4,))
    last = pd.read_csv(run_dir / "metrics.csv").iloc[-1]
    assert df.step.iloc[0] == 20
    assert df.ic_acc.iloc[0] == pytest.approx(last.ic_acc)
    assert df.tila2.iloc[0] == pytest.approx(last.tila2)


def test_evaluate_command_writes_length_eval_csv(run_dir, capsys):
    with pytest.warns(UntrainedPositionWarning):
        assert main(["evaluate", str(run_dir), "--n-pairs", "4,8", "--n", "16"]) == 0
    df = pd.read_csv(run_dir / "length_eval.csv")
    assert list(df.n_pairs) == [4, 8]
    assert {"n_pairs", "ic_acc", "ila1", "tila2", "untrained_positions"} <= set(df.columns)
    assert "wrote" in capsys.readouterr().out
    assert main(["evaluate", str(run_dir), "--n-pairs", "16"]) == 2  # 16 labels > L = 8
    assert "distinct labels" in capsys.readouterr().err


def test_encodings_and_scales_are_chosen_with_set():
    from interp.cli import build_configs

    overrides = {"positional": "rope", "d_head": "64", "rope_base": "500", "attn_scale": "log_n"}
    _, model_cfg, _, _ = build_configs("demo", overrides, seed=0)
    assert (model_cfg.positional, model_cfg.d_head, model_cfg.rope_base) == ("rope", 64, 500.0)
    assert model_cfg.attn_scale == "log_n" and model_cfg.d_model == 63
    _, model_cfg, _, _ = build_configs("demo", {"positional": "cope", "cope_p_max": "9"}, seed=0)
    assert model_cfg.cope_p_max == 9
    assert main(["train", "--preset", "tiny", "--set", "positional=rope", "--out", "x"]) == 2


def test_encoding_table_has_one_row_per_run_and_the_lengths(run_dir):
    from interp.analysis.length import encoding_table

    table = encoding_table([run_dir], n_pairs=(4,), n=16, step=25, sets=("ic",))
    assert len(table) == 1 and table.positional.iloc[0] == "onehot"
    assert table.eval_step.iloc[0] == 20 and table.steps.iloc[0] == 20
    assert {"head_formed", "tila2_step", "ic_acc_N4", "tila2_N4"} <= set(table.columns)
    with pytest.raises(ValueError, match="no checkpoint"):
        encoding_table([run_dir], n_pairs=(4,), n=16, step=-1)
