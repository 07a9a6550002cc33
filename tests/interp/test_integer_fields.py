"""Integer fields given a number with a fractional part (``--set K=1.5``, a grid value, a seed) are
refused in one line naming the field, before anything is written; never read as the integer below.
A float that is a whole number (``1.28e2``) is that integer."""

import pytest

from interp.cli import main
from interp.experiments.sweep_spec import SweepSpec
from interp.train.overrides import build_configs


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("key", ["K", "task.K", "N", "steps", "batch_size", "d_mlp"])
def test_a_fraction_for_an_integer_field_is_refused_naming_it(key):
    with pytest.raises(ValueError, match=rf"--set {key}='1\.5' is invalid: expected an integer"):
        build_configs("tiny", {key: "1.5"}, None)


@pytest.mark.parametrize(("key", "expected"), [("steps", "an integer"), ("lr", "a number")])
def test_a_word_for_a_number_field_says_what_the_field_takes(key, expected):
    with pytest.raises(ValueError, match=rf"^--set {key}='abc' is invalid: expected {expected}, "):
        build_configs("tiny", {key: "abc"}, None)


def test_a_whole_float_for_an_integer_field_is_that_integer():
    task, _, train, _ = build_configs("tiny", {"K": "1.28e2", "steps": "30.0"}, None)
    assert task.K == 128 and type(task.K) is int
    assert train.steps == 30 and type(train.steps) is int


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--preset", "tiny", "--set", "K=1.5", "--out"],
        ["sweep", "--preset", "tiny", "--set", "K=1.5", "--no-figures", "--out"],
        ["sweep", "--preset", "tiny", "--grid", "K=16,1.5", "--no-figures", "--out"],
    ],
)
def test_the_command_line_refuses_k_1_5_before_writing(tmp_path, capsys, command):
    out = tmp_path / "out"
    assert main([*command, str(out)]) == 2
    line = _one_error_line(capsys)
    assert "K" in line and "1.5" in line, line
    assert not out.exists()


@pytest.mark.parametrize("seeds", [(0, 1.5), (2.5,)])
def test_a_sweep_refuses_a_seed_with_a_fraction(seeds):
    with pytest.raises(ValueError, match=r"SweepSpec\.seeds=.* is invalid: non-negative integers"):
        SweepSpec(preset="tiny", seeds=seeds)
    assert SweepSpec(preset="tiny", seeds=(0, 2.0)).seeds == (0, 2)
