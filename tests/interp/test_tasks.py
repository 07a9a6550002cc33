"""The task registry (interp.data.tasks): a task is one plugin file, selected with --set task=NAME,
trained by the one training loop, recorded in config.json, listed by ``list tasks``; every
command that opens a run trained with it stops, in one line naming the plugin, without it."""

import json
from pathlib import Path

import pandas as pd
import pytest

from interp.cli import main
from interp.data import tasks
from interp.data.task import TaskConfig, TaskGenerator
from interp.data.tasks import TASKS, get_task, make_generator, register_task
from interp.io import plugins

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "extra_task.py"
TINY = ["--preset", "tiny", "--set", "steps=20", "--set", "eval_every=10", "--quiet"]


@pytest.fixture
def clean_registry():
    """The plugin loaded by a test is forgotten afterwards (registry and loaded list)."""
    saved, loaded = dict(TASKS), dict(plugins._LOADED)
    yield
    TASKS.clear()
    TASKS.update(saved)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


def _forget_plugin():
    plugins._LOADED.pop(str(FIXTURE.resolve()), None)
    TASKS.pop("iw-only", None)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run of the plugin task and the same run of the standard task, both through the CLI."""
    base = tmp_path_factory.mktemp("tasks")
    saved, loaded = dict(TASKS), dict(plugins._LOADED)
    plugins._LOADED.clear()  # what other tests loaded is not this run's
    try:
        argv = ["--plugin", str(FIXTURE), "train", *TINY, "--set", "task=iw-only"]
        assert main([*argv, "--out", str(base / "iw")]) == 0
        assert main(["train", *TINY, "--out", str(base / "standard")]) == 0
    finally:
        TASKS.clear()
        TASKS.update(saved)
        plugins._LOADED.clear()
        plugins._LOADED.update(loaded)
    return base / "iw", base / "standard"


def test_the_standard_task_and_the_token_tasks_are_registered():
    assert list(TASKS)[:4] == ["standard", "flipflop", "selective_copy", "counting"]
    assert get_task("standard").generator is TaskGenerator and get_task("standard").measures is None
    assert type(make_generator(TaskConfig(), 0)) is TaskGenerator
    flipflop = get_task("flipflop")
    assert flipflop.layout == "tokens" and flipflop.measures == ()
    assert make_generator(flipflop.config(), 0).test_sets(4, 0).keys() == {
        "id",
        "ood_sparse",
        "ood_long",
    }
    assert "task" not in TaskConfig().to_dict()  # the standard task's config.json is unchanged


def test_list_tasks_shows_the_plugin_task(clean_registry, capsys):
    assert main(["--plugin", str(FIXTURE), "list", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "iw-only" in out and "IW sequences only" in out and str(FIXTURE.resolve()) in out
    assert "standard" in out and "flipflop" in out


def test_a_plugin_task_is_trained_recorded_and_reopened(trained, clean_registry):
    iw, standard = trained
    config = json.loads((iw / "config.json").read_text())
    assert config["task"]["task"] == "iw-only"
    assert config["plugins"] == [str(FIXTURE.resolve())]
    standard_config = json.loads((standard / "config.json").read_text())
    assert "task" not in standard_config["task"]
    # its generator has a sampler of its own: drawn on the host, and recorded so
    assert config["train"]["sample_on"] == "host"
    assert standard_config["train"]["sample_on"] == "device"
    m_iw, m_std = pd.read_csv(iw / "metrics.csv"), pd.read_csv(standard / "metrics.csv")
    assert list(m_iw["step"]) == [0, 10, 20] and {"ic_acc", "iw_acc", "ila1"} <= set(m_iw)
    # the same seeds, another generator: the training batches differ (step 0 is the same model)
    assert m_iw["ic_loss"].iloc[0] == m_std["ic_loss"].iloc[0]
    assert m_iw["train_loss"].iloc[1] != m_std["train_loss"].iloc[1]
    plugins.load_plugin(str(FIXTURE))
    from interp.io.rundir import load_run

    run = load_run(iw)
    assert run.task.task == "iw-only" and type(run.generator()).__name__ == "InWeightsOnly"


COMMANDS = [
    ["measures", "{run}"],
    ["transition", "{run}"],
    ["fit", "{run}"],
    ["figures", "{run}", "--out", "{tmp}/fig"],
    ["quanta", "{run}"],
    ["report", "{run}", "--out", "{tmp}/r.html"],
    ["evaluate", "{run}"],
    ["llc", "{run}"],
    ["train", "--resume", "--out", "{run}"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_opening_the_run_without_its_plugin_stops_naming_it(
    command, trained, tmp_path, clean_registry, capsys
):
    iw, _ = trained
    _forget_plugin()
    before = sorted(p.name for p in iw.iterdir())
    argv = [a.format(run=iw, tmp=tmp_path) for a in command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(FIXTURE.resolve()) in err[0] and "config.json" in err[0], err
    assert sorted(p.name for p in iw.iterdir()) == before  # nothing written
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_task_is_one_line_before_any_write(tmp_path, capsys):
    assert main(["train", *TINY, "--set", "task=nope", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TaskConfig.task='nope'" in err[0] and "'standard'" in err[0]
    assert main(["train", *TINY, "--set", "task=flipflop", "--out", str(tmp_path / "r")]) == 2
    assert "config is FlipFlop" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(name="Bad Name"), "Task.name"),
        (dict(name="standard"), "already registered"),
        (dict(generator=3), "Task.generator"),
        (dict(layout="grid"), "Task.layout"),
        (dict(eval_sets=()), "Task.eval_sets"),
    ],
)
def test_a_bad_registration_names_the_field(kwargs, field, clean_registry):
    args = dict(name="ok", generator=TaskGenerator) | kwargs
    with pytest.raises(ValueError, match=field):
        register_task(args.pop("name"), args.pop("generator"), **args)
    assert tasks.TASKS.keys() >= {"standard"}
