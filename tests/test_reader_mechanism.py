"""The one reader of CSV and JSON input files (``interp.io.inputs``): every file of a run, a sweep
or a curve is read through it, and a hostile file (too big, too many columns, nested too deep, a
number too long, a curve of NaN) is refused in one line naming the file, exit code 3, in well
under the time a parse would take."""

from __future__ import annotations

import ast
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp.cli import main
from interp.config.train_config import TrainConfig
from interp.data.task import TaskConfig
from interp.io import inputs
from interp.io.rundir import configs_dict
from interp.model.network import ModelConfig

ROOT = Path(__file__).resolve().parents[1]
TASK = TaskConfig(D=15, K=64, L=8, N=4, N_max=4, B=1, p_C=0.5, n_eval=64)
STEPS = np.arange(0, 2000, 20)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def _cli(capsys, *argv) -> tuple[int, str, float]:
    """Exit code, the one error line and the seconds taken by ``induction-cliff ARGV``."""
    t0 = time.perf_counter()
    rc = main([str(a) for a in argv])
    return rc, _one_line(capsys), time.perf_counter() - t0


def _run(path: Path, metrics: pd.DataFrame | None = None, **train) -> Path:
    """A run directory (config.json and metrics.csv) without training."""
    path.mkdir()
    cfg = TrainConfig(optimizer="adam", lr=3e-3, batch_size=32, steps=2000, eval_every=20, **train)
    config = configs_dict(TASK, ModelConfig.from_task(TASK, d_mlp=32), cfg)
    (path / "config.json").write_text(json.dumps(config))
    if metrics is None:
        acc = 0.1 + 0.85 / (1 + np.exp(-(STEPS - 1000) / 50.0))
        metrics = pd.DataFrame({"step": STEPS, "ic_acc": acc, "ic_loss": 2.5 - 2 * acc})
    metrics.to_csv(path / "metrics.csv", index=False)
    return path


def _wide_header(path: Path, columns: int) -> None:
    path.write_text("step," + ",".join(f"x{i}" for i in range(columns)) + "\n0" + "," * columns)


def _sparse(path: Path, header: str, size: int) -> None:
    """A file of ``size`` bytes (a header, then a hole: no disk is used)."""
    path.write_text(header)
    os.truncate(path, size)


# ---- no bypass ----------------------------------------------------------------------------------

_READERS = {
    ("pd", "read_csv"),
    ("pandas", "read_csv"),
    ("pd", "read_json"),
    ("pd", "read_table"),
    ("json", "load"),
    ("json", "loads"),
    ("csv", "reader"),
    ("csv", "DictReader"),
    ("np", "loadtxt"),
    ("np", "genfromtxt"),
}
# Calls of a parser that read no file, with the reason.
_ALLOWED = {
    ("interp/train/token_runs.py", "json.loads"): "a dict's round trip through JSON text",
    ("interp/analysis/llc_calibration.py", "json.loads"): "a DataFrame's to_json text",
}


def test_every_csv_and_json_file_is_read_through_the_one_reader():
    found = []
    for folder in ("interp", "phenomenology"):
        for file in sorted((ROOT / folder).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel == "interp/io/inputs.py":
                continue
            for node in ast.walk(ast.parse(file.read_text(), rel)):
                if isinstance(node, ast.ImportFrom) and node.module in ("json", "csv"):
                    names = {a.name for a in node.names}
                    if names & {"load", "loads", "reader", "DictReader"}:
                        found.append(f"{rel}:{node.lineno} from {node.module} import {names}")
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                base = node.func.value
                if isinstance(base, ast.Name) and (base.id, node.func.attr) in _READERS:
                    call = f"{base.id}.{node.func.attr}"
                    if (rel, call) not in _ALLOWED:
                        found.append(f"{rel}:{node.lineno} {call}")
    assert not found, "read these through interp.io.inputs: " + "; ".join(found)


# ---- limits, before parsing ---------------------------------------------------------------------


def test_a_metrics_csv_of_a_million_columns_is_refused_at_once(tmp_path, capsys):
    run = _run(tmp_path / "run")
    _wide_header(run / "metrics.csv", 10**6)
    rc, line, took = _cli(capsys, "transition", run)
    assert rc == 3 and took < 5
    assert f"{run / 'metrics.csv'}: the header line is longer than 1 MiB; not read" in line


def test_a_header_of_more_columns_than_the_limit_is_refused(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(",".join("c" * (inputs.MAX_CSV_COLUMNS + 1)) + "\n")
    with pytest.raises(inputs.DamagedFileError, match="the header names 65537 columns, over the"):
        inputs.read_csv(path)


def test_a_metrics_csv_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    run = _run(tmp_path / "run")
    _sparse(run / "metrics.csv", "step,ic_acc\n", inputs.MAX_CSV_BYTES + 1)
    rc, line, took = _cli(capsys, "transition", run)
    assert rc == 3 and took < 5
    assert f"{run / 'metrics.csv'} is 256 MiB, over the limit of 256 MiB" in line


def test_fit_refuses_a_curve_csv_too_wide_or_too_big(tmp_path, capsys):
    wide = tmp_path / "wide.csv"
    _wide_header(wide, 10**6)
    rc, line, took = _cli(capsys, "fit", wide)
    assert rc == 3 and took < 5 and f"{wide}: the header line is longer than 1 MiB" in line
    big = tmp_path / "big.csv"
    _sparse(big, "step,ic_loss\n", 2**30)
    rc, line, took = _cli(capsys, "fit", big)
    assert rc == 3 and took < 5 and f"{big} is 1 GiB, over the limit of 256 MiB" in line
    assert not list(tmp_path.glob("*.fit.json"))


def test_a_config_json_nested_ten_thousand_deep_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "run")
    (run / "config.json").write_text('{"task": ' + "[" * 10_000 + "]" * 10_000 + "}")
    rc, line, took = _cli(capsys, "transition", run)
    assert rc == 3 and took < 5
    assert f"{run / 'config.json'} nests deeper than 64 levels of brackets" in line


def test_a_sweep_json_nested_ten_thousand_deep_is_refused(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"points": ' + "{" * 1 + '"a": [' * 9_999 + "]" * 9_999)
    rc, line, _ = _cli(capsys, "sweep-summary", sweep)
    assert rc == 3 and f"{sweep / 'sweep.json'} nests deeper than 64 levels" in line


def test_a_number_of_five_thousand_digits_is_refused_naming_the_file(tmp_path, capsys):
    run = _run(tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    text = json.dumps(config).replace('"K": 64', '"K": ' + "6" * 5000)
    (run / "config.json").write_text(text)
    rc, line, _ = _cli(capsys, "transition", run)
    assert rc == 3
    assert f"{run / 'config.json'} holds a number of more than 100 digits" in line


def test_the_reader_passes_a_real_metrics_csv_of_a_hundred_thousand_rows(tmp_path):
    n, row = 100_000, ",".join(["0.123456789012345"] * 24)  # a real row is about 400 bytes
    header = "step," + ",".join(f"m{i}" for i in range(24))
    (tmp_path / "metrics.csv").write_text(
        header + "\n" + "".join(f"{i * 10},{row}\n" for i in range(n))
    )
    assert inputs.read_csv(tmp_path / "metrics.csv").shape == (n, 25)


def test_json_limits_are_counted_outside_strings(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"note": "[" * 500 + "9" * 500, "x": [[1.5]]}))
    assert inputs.read_json(path)["x"] == [[1.5]]


# ---- curves of NaN, damaged outputs -------------------------------------------------------------


def test_a_metrics_csv_of_nan_is_a_damaged_file_for_transition(tmp_path, capsys):
    nan = pd.DataFrame({"step": STEPS, "ic_acc": math.nan, "ic_loss": math.nan})
    run = _run(tmp_path / "run", nan)
    rc, line, _ = _cli(capsys, "transition", run)
    assert rc == 3
    assert f"{run / 'metrics.csv'}: column 'ic_acc' is empty (NaN) on every one" in line


def test_a_per_class_iw_csv_of_nan_writes_no_quanta_json(tmp_path, capsys):
    run = _run(tmp_path / "run", per_class_iw=8)
    frame = pd.DataFrame({"step": STEPS, **{f"c{k}": math.nan for k in range(TASK.K)}})
    frame.to_csv(run / "per_class_iw.csv", index=False)
    rc, line, _ = _cli(capsys, "quanta", run)
    assert rc == 3 and f"{run / 'per_class_iw.csv'}: column 'c0' is empty (NaN)" in line
    assert not (run / "quanta.json").exists()


@pytest.mark.parametrize(
    "saved, words",
    [
        ({"model": "\u202e", "column": "\u202e?"}, "not a column of the run's metrics.csv"),
        ({"target": "\x00zz", "column": "ic_loss"}, "target must be one of"),
        ({"column": "ic_loss", "options": {"\u202e": "?"}}, "bad options"),
    ],
    ids=["column", "target", "options"],
)
def test_a_fit_json_of_strange_strings_is_one_line_from_figures(tmp_path, capsys, saved, words):
    run = _run(tmp_path / "run")
    (run / "fit.json").write_text(json.dumps(saved))
    rc, line, _ = _cli(capsys, "figures", run, "--out", tmp_path / "figs", "--formats", "html")
    assert rc == 3 and f"error: {run / 'fit.json'}: field" in line and words in line
    assert not (tmp_path / "figs").exists()


def test_fit_of_a_curve_flat_to_a_billionth_is_refused_before_fitting(tmp_path, capsys):
    csv = tmp_path / "c.csv"
    noise = np.random.default_rng(0).standard_normal(STEPS.size)
    pd.DataFrame({"step": STEPS, "ic_loss": 1.5 + 1e-9 * noise}).to_csv(csv, index=False)
    rc, line, took = _cli(capsys, "fit", csv)
    assert rc == 2 and took < 5
    assert f"{csv}: column 'ic_loss' does not change (it moves by 4.33e-09 around 1.5" in line
    assert not (tmp_path / "c.fit.json").exists()
