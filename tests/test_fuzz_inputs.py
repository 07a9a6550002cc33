"""Random and mutated inputs through every command that reads them (Hypothesis).

A hostile or damaged file, or a strange ``--set`` value, must end in a documented exit code (0, or
2 to 5 of :mod:`interp.io.errors`) with exactly one ``error:`` line, never a traceback and never
the unexpected-failure code 1, and the command must create or change nothing outside the output it
was asked for. Each property starts from a valid input (a tiny trained run, a valid sweep, a clean
curve) and mutates it: bytes replaced, lines cut or repeated, values swapped for NaN, huge
integers, deep nesting, control characters or other JSON.

The examples are derived from the test's name (``derandomize``), so a failure replays the same way
in every run, and no example database is written into the checkout. The whole file takes about a
minute on one core.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from interp.cli import main  # noqa: E402

SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DOCUMENTED = {0, 2, 3, 4, 5}

# Tokens a hostile or damaged file is made of: numbers no run writes, nesting, separators,
# quotes, terminal escapes and bytes that are not UTF-8.
TOKENS = [
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"-1",
    b"0",
    b"1e999",
    b"9" * 5000,
    b"[" * 3000,
    b"{" * 3000,
    b",,,,",
    b'"',
    b"\n",
    b"\x1b]0;title\x07\x1b[2J",
    b"\xff\xfe",
    b"\x00",
    b"null",
    b"true",
    b'{"a": [1, 2]}',
    b"step",
]


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` with a digest of its bytes (links by their target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p)] = "link:" + str(p.readlink())
        elif p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p)] = "dir"
    return out


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _judge(code: int, output: str, argv: list[str]) -> None:
    event(f"exit {code}")  # the spread of outcomes (pytest --hypothesis-show-statistics)
    assert "Traceback" not in output, (argv, output[-2000:])
    assert code in DOCUMENTED, (argv, code, output[-2000:])
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    if code:
        assert len(errors) == 1, (argv, code, output[-2000:])
        assert "\x1b" not in errors[0] and "\x07" not in errors[0], errors[0]
    else:
        assert not errors, (argv, output[-2000:])


def _changes(before: dict, after: dict, allowed: tuple[str, ...]) -> list[str]:
    changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)]
    return sorted(p for p in changed if not any(p.startswith(a) for a in allowed))


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` after one to four edits: a token put in place of a slice, a slice cut, a line
    repeated many times, or the bytes cut short."""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["replace", "cut", "repeat", "truncate", "insert"]))
        n = len(data)
        i = draw(st.integers(0, max(n - 1, 0)))
        j = draw(st.integers(i, min(n, i + 40)))
        if kind == "replace":
            data = data[:i] + draw(st.sampled_from(TOKENS)) + data[j:]
        elif kind == "insert":
            data = data[:i] + draw(st.binary(min_size=1, max_size=12)) + data[i:]
        elif kind == "cut":
            data = data[:i] + data[j:]
        elif kind == "repeat":
            lines = data.split(b"\n")
            k = draw(st.integers(0, max(len(lines) - 1, 0)))
            lines[k:k] = [lines[k]] * draw(st.integers(2, 50))
            data = b"\n".join(lines)
        else:
            data = data[:i]
    return data


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def json_edited(draw, data: bytes) -> bytes:
    """A JSON document with one value somewhere replaced by another of any type (the file stays
    JSON, so the checks past parsing are reached)."""
    doc = json.loads(data)
    node, path = doc, []
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    value = draw(JSON_VALUES)
    if not path:
        doc = value
    else:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny trained run with its fit (the files the run commands read)."""
    from tests.interp.tiny_runs import tiny_run

    run = tiny_run(tmp_path_factory.mktemp("fuzz") / "run", steps=60)
    return run


def _fresh_run(tiny: Path, tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    shutil.copytree(tiny, work / "run", symlinks=True)
    return work


def _reader_of_a_run(data, run: Path, work: Path) -> tuple[list[str], tuple[str, ...]]:
    """One of the commands that read a run's files, and the outputs it may write."""
    command = data.draw(st.sampled_from(["transition", "fit", "figures", "measures"]))
    argv = {
        "transition": ["transition", str(run)],
        "fit": ["fit", str(run), "--n-boot", "0"],
        "figures": ["figures", str(run), "--out", str(work / "figs"), "--formats", "html"],
        "measures": ["measures", str(run)],
    }[command]
    allowed = {
        "transition": (),
        "fit": (str(run / "fit.json"),),
        "figures": (str(work / "figs"),),
        "measures": (str(run / "checkpoint_measures.csv"),),
    }[command]
    return argv, allowed


@settings(max_examples=100, **SETTINGS)
@given(data=st.data())
def test_config_json_mutated_through_the_run_commands(tiny, tmp_path, capsys, data):
    work = _fresh_run(tiny, tmp_path, "config")
    config = work / "run" / "config.json"
    original = config.read_bytes()
    edit = data.draw(st.one_of(mutated(original), json_edited(original)))
    config.write_bytes(edit)
    before = _snapshot(work)
    argv, allowed = _reader_of_a_run(data, work / "run", work)
    _judge(*_run(capsys, argv), argv)
    assert _changes(before, _snapshot(work), allowed) == []


@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_metrics_csv_mutated_through_the_run_commands(tiny, tmp_path, capsys, data):
    work = _fresh_run(tiny, tmp_path, "metrics")
    metrics = work / "run" / "metrics.csv"
    metrics.write_bytes(data.draw(mutated(metrics.read_bytes())))
    before = _snapshot(work)
    argv, allowed = _reader_of_a_run(data, work / "run", work)
    _judge(*_run(capsys, argv), argv)
    assert _changes(before, _snapshot(work), allowed) == []


def _curve_csv() -> bytes:
    import numpy as np

    steps = np.arange(0, 3001, 50)
    loss = 2.0 - 1.5 / (1 + np.exp(-(steps - 1500) / 80.0))
    rows = "\n".join(f"{s},{v:.6f}" for s, v in zip(steps, loss))
    return f"step,ic_loss\n{rows}\n".encode()


@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_csv_curve_mutated_through_fit(tmp_path, capsys, data):
    work = tmp_path / "curve"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    curve = work / "c.csv"
    curve.write_bytes(data.draw(mutated(_curve_csv())))
    before = _snapshot(work)
    argv = ["fit", str(curve), "--n-boot", "0"]
    _judge(*_run(capsys, argv), argv)
    assert _changes(before, _snapshot(work), (str(work / "c.fit.json"),)) == []


SET_KEYS = [
    "lr",
    "steps",
    "K",
    "N",
    "L",
    "B",
    "p_C",
    "eps",
    "hidden_bias",
    "batch_size",
    "momentum",
    "device",
    "N_max",
    "alpha",
    "weight_decay",
    "optimizer",
    "nope",
]
SET_VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "-1",
            "0",
            "1e999",
            "9" * 5000,
            "",
            "true",
            "cuda:99",
            "meta",
            "\x1b[2J",
            "1.5",
            "3",
            "per_unit",
            "adam",
            "0x10",
            "1_000",
        ]
    ),
    st.text(max_size=12),
)


@settings(max_examples=150, **SETTINGS)
@given(sets=st.lists(st.tuples(st.sampled_from(SET_KEYS), SET_VALUES), min_size=1, max_size=3))
def test_set_values_through_forecast(tmp_path, capsys, sets):
    before = _snapshot(tmp_path)
    argv = ["forecast", "--preset", "paper-fig3"]
    for key, value in sets:
        argv += ["--set", f"{key}={value}"]
    _judge(*_run(capsys, argv), argv)
    assert _changes(before, _snapshot(tmp_path), ()) == []


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A run directory (config.json, a logistic metrics.csv, per_class_iw.csv) with its fit.json,
    written without training."""
    import numpy as np
    import pandas as pd

    from interp.config.train_config import TrainConfig
    from interp.data.task import TaskConfig
    from interp.io.rundir import configs_dict
    from interp.model.network import ModelConfig

    task = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
    train = TrainConfig(
        optimizer="adam", lr=3e-3, batch_size=32, steps=2000, eval_every=20, per_class_iw=8
    )
    run = tmp_path_factory.mktemp("fitted") / "run"
    run.mkdir()
    config = configs_dict(task, ModelConfig.from_task(task, d_mlp=32), train)
    (run / "config.json").write_text(json.dumps(config))
    steps = np.arange(0, 2000, 20)
    acc = 0.1 + 0.85 / (1 + np.exp(-(steps - 1000) / 50.0))
    pd.DataFrame({"step": steps, "ic_acc": acc, "ic_loss": 2.5 - 2 * acc}).to_csv(
        run / "metrics.csv", index=False
    )
    rng = np.random.default_rng(0)
    iw = {
        f"c{k}": np.clip(0.02 * steps / 2000 + rng.normal(0, 0.01, len(steps)), 0, 1)
        for k in range(task.K)
    }
    pd.DataFrame({"step": steps, **iw}).to_csv(run / "per_class_iw.csv", index=False)
    assert main(["fit", str(run), "--n-boot", "0"]) == 0
    return run


@settings(max_examples=15, **SETTINGS)
@given(data=st.data())
def test_fit_json_mutated_through_figures(fitted, tmp_path, capsys, data):
    work = _fresh_run(fitted, tmp_path, "figures")
    fit = work / "run" / "fit.json"
    original = fit.read_bytes()
    fit.write_bytes(data.draw(st.one_of(mutated(original), json_edited(original))))
    before = _snapshot(work)
    argv = ["figures", str(work / "run"), "--out", str(work / "figs"), "--formats", "html"]
    _judge(*_run(capsys, argv), argv)
    assert _changes(before, _snapshot(work), (str(work / "figs"),)) == []


@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_per_class_iw_csv_mutated_through_quanta(fitted, tmp_path, capsys, data):
    work = _fresh_run(fitted, tmp_path, "quanta")
    iw = work / "run" / "per_class_iw.csv"
    iw.write_bytes(data.draw(mutated(iw.read_bytes())))
    before = _snapshot(work)
    argv = ["quanta", str(work / "run")]
    code, output = _run(capsys, argv)
    _judge(code, output, argv)
    allowed = (str(work / "run" / "quanta"),)  # quanta.json and its figures, on success only
    changes = _changes(before, _snapshot(work), allowed)
    assert changes == [], changes
    if code:
        assert not (work / "run" / "quanta.json").exists()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A finished sweep of two tiny points (its sweep.json and the points' runs)."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    argv = [
        "sweep",
        "--preset",
        "tiny",
        "--grid",
        "K=32,64",
        "--set",
        "steps=20",
        "--set",
        "eval_every=10",
        "--seeds",
        "0",
        "--backend",
        "serial",
        "--no-figures",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    return out


@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_sweep_json_mutated_through_sweep_summary(sweep, tmp_path, capsys, data):
    work = tmp_path / "s"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(sweep, work, symlinks=True)
    manifest = work / "sweep.json"
    original = manifest.read_bytes()
    manifest.write_bytes(data.draw(st.one_of(mutated(original), json_edited(original))))
    before = _snapshot(work)
    argv = ["sweep-summary", str(work), "--no-figures"]
    _judge(*_run(capsys, argv), argv)
    allowed = tuple(str(work / name) for name in ("summary", ".lock"))
    assert _changes(before, _snapshot(work), allowed) == []


def test_the_unmutated_inputs_are_accepted(tiny, fitted, sweep, tmp_path, capsys):
    """The properties start from inputs every command takes (else they would test refusals
    of a broken fixture only)."""
    for argv in (
        ["transition", str(tiny)],
        ["figures", str(fitted), "--out", str(tmp_path / "figs"), "--formats", "html"],
        ["quanta", str(_fresh_run(fitted, tmp_path, "q") / "run")],
        ["sweep-summary", str(sweep), "--no-figures"],
        ["forecast", "--preset", "paper-fig3", "--set", "lr=0.03"],
    ):
        assert _run(capsys, argv)[0] == 0, argv
