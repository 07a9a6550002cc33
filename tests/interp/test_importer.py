"""Weights of this network trained elsewhere become a run directory; weights that do not fit are
refused with one line naming the tensor, before anything is written."""

import pytest
import torch

from interp.cli import main
from interp.experiments.importer import StateDictError, import_weights
from interp.io.rundir import load_run
from interp.model.network import InductionNet, ModelConfig
from interp.train.presets import get_preset

TINY = get_preset("tiny")
MODEL = ModelConfig.from_task(TINY.task, **TINY.model)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A tiny-preset network's state dict, saved as a training script elsewhere would save it."""
    net = InductionNet(MODEL, seed=3)
    path = tmp_path_factory.mktemp("elsewhere") / "trained.pt"
    torch.save({"model_state_dict": net.state_dict(), "epoch": 7}, path)
    return path, net.state_dict()


def test_imported_weights_are_a_run_with_those_weights(weights, tmp_path):
    path, state = weights
    out = import_weights(
        path,
        tmp_path / "run",
        task=TINY.task,
        model=MODEL,
        train=TINY.train,
        step=150,
    )
    run = load_run(out)
    assert run.checkpoint_steps == [150]
    loaded = run.load_model(150).state_dict()
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    assert run.metrics["step"].tolist() == [150]
    assert 0.0 <= run.metrics["ic_acc"].iloc[0] <= 1.0 and "ila1" in run.metrics
    assert (out / "imported.json").is_file()


@pytest.mark.parametrize(
    "change, tensor, words",
    [
        ("shape", "blocks.0.attn.W_Q", "has shape"),
        ("drop", "classifier.readout.weight", "is missing"),
        ("extra", "blocks.2.attn.W_Q", "is not part of this architecture"),
    ],
)
def test_weights_that_do_not_fit_are_refused_naming_the_tensor(
    weights, tmp_path, capsys, change, tensor, words
):
    _, state = weights
    state = dict(state)
    if change == "shape":
        state[tensor] = state[tensor][:, :-1]
    elif change == "drop":
        del state[tensor]
    else:
        state[tensor] = state["blocks.0.attn.W_Q"].clone()
    path = tmp_path / "bad.pt"
    torch.save(state, path)
    with pytest.raises(StateDictError) as err:
        import_weights(path, tmp_path / "run", task=TINY.task, model=MODEL)
    assert repr(tensor) in str(err.value) and words in str(err.value)
    assert not (tmp_path / "run").exists()
    # the command: exit 2, one line on stderr naming the tensor, nothing written
    code = main(["import", str(path), str(tmp_path / "cli-run"), "--preset", "tiny"])
    stderr = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in stderr and repr(tensor) in stderr
    assert not (tmp_path / "cli-run").exists()


def test_the_command_imports_and_summarises(weights, tmp_path, capsys):
    path, _ = weights
    code = main(["import", str(path), str(tmp_path / "run"), "--preset", "tiny", "--step", "200"])
    assert code == 0
    assert "-> " in capsys.readouterr().out
    assert load_run(tmp_path / "run").checkpoint_steps == [200]
    # a second import into the same run is refused unless --overwrite
    assert main(["import", str(path), str(tmp_path / "run"), "--preset", "tiny"]) == 3
    assert (
        main(["import", str(path), str(tmp_path / "run"), "--preset", "tiny", "--overwrite"]) == 0
    )


def test_a_safetensors_checkpoint_of_a_run_imports_to_the_same_network(tmp_path):
    """A run's own checkpoint (safetensors) brought in as weights from elsewhere: the imported
    run's network computes what the original computes."""
    from safetensors.torch import save_file

    net = InductionNet(MODEL, seed=5)
    save_file(net.state_dict(), tmp_path / "w.safetensors")
    run = load_run(
        import_weights(tmp_path / "w.safetensors", tmp_path / "run", task=TINY.task, model=MODEL)
    )
    batch = run.eval_sets()["ic"]
    with torch.no_grad():
        torch.testing.assert_close(
            run.load_model()(batch.tokens, batch.positions), net(batch.tokens, batch.positions)
        )
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(StateDictError, match=r"cannot read state dict file \S*junk\.pt"):
        import_weights(tmp_path / "junk.pt", tmp_path / "run2", task=TINY.task)
