"""Declared experiments: every committed page is its CSV rendered, the quick tiers keep their key
numbers, and the pages say where their data come from."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from interp.experiments import (
    EXPERIMENTS,
    META,
    Check,
    check_rows,
    get_experiment,
    load_catalogue,
    page_text,
    read_rows,
    render_page,
    reproduce,
)
from interp.experiments.core import RESULTS_DIR, current_format_version

ROOT = Path(__file__).resolve().parents[2]
# Data produced elsewhere, whose CSV may arrive later; their renderer is tested below.
FOREIGN = {"hidden-bias"}
# Declared, but their full tier has not been run yet: the page arrives with its CSV (its
# renderer is tested with its module).
PENDING = {"early-warning"}
assert load_catalogue()  # the checkout's experiments/ (the declared experiments)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_page_is_its_csv_rendered_byte_for_byte(name):
    e = get_experiment(name)
    csv, page = RESULTS_DIR / f"{name}.csv", RESULTS_DIR / f"{name}.md"
    if name in FOREIGN | PENDING and not csv.exists():
        pytest.skip(f"{csv.name} is produced by its own runs")
    assert csv.exists(), f"{csv} is missing: run `induction-cliff reproduce {name}`"
    rendered = page_text(e, RESULTS_DIR)  # as `--render-only` does
    assert page.read_text() == rendered, (
        f"{page} differs from its CSV rendered: `induction-cliff reproduce {name} --render-only`"
    )


def test_every_experiment_declares_both_tiers_a_question_and_its_deviations():
    assert len(EXPERIMENTS) >= 15
    for e in EXPERIMENTS.values():
        assert set(e.tiers) == {"quick", "full"} and e.question.endswith("?"), e.name
        assert e.deviations, e.name
        assert all(t.cost for t in e.tiers.values()), e.name


def _rows(**overrides) -> pd.DataFrame:
    row = {
        "x": 1.5,
        "source": "run",
        "tier": "quick",
        "commit": "abc1234",
        "date": "2026-12-01",
        "format_version": current_format_version(),
        "wall_s": 12.0,
        "machine": "m",
        "command": "induction-cliff reproduce demo",
    }
    return pd.DataFrame([{**row, **overrides}])


def test_a_page_from_older_defaults_says_so_in_its_first_line():
    e = get_experiment("demo")
    fresh = render_page(e, _rows())
    assert fresh.splitlines()[0] == f"# {e.title}"
    old = render_page(e, _rows(format_version=current_format_version() - 1))
    first = old.splitlines()[0]
    assert first.startswith("> **Older defaults:** 1 of 1 rows")
    assert f"the current defaults are version {current_format_version()}" in first


def test_the_current_version_is_read_from_the_code(monkeypatch):
    import interp.io.rundir as rundir

    monkeypatch.setattr(rundir, "FORMAT_VERSION", current_format_version() + 5)
    page = render_page(get_experiment("demo"), _rows(format_version=3))
    assert page.startswith("> **Older defaults:**") and "version 3;" in page.splitlines()[0]


def test_transcribed_rows_are_marked_on_the_page():
    page = render_page(get_experiment("demo"), _rows(source="transcribed"))
    assert "**Transcribed:** 1 of 1 rows" in page and "`abc1234`" in page
    assert "**Wall time:** 12 s" in page


def test_a_transcribed_row_measured_on_a_gpu_says_it_was_not_regenerated_in_its_row():
    """The speed page's table: a row measured on a GPU and copied says so in its own row, a copied
    CPU row says it was not regenerated, a row the page's command produced says ``run``."""
    rows = pd.read_csv(RESULTS_DIR / "speed.csv").head(3).reset_index(drop=True)
    rows.loc[0, ["source", "machine"]] = ["transcribed", "NVIDIA H200, 16 CPU cores"]
    rows.loc[1, ["source", "machine"]] = ["transcribed", "2-core CPU machine (shared)"]
    rows.loc[2, ["source", "machine"]] = ["run", "2-core CPU machine (shared)"]
    table = [ln for ln in render_page(get_experiment("speed"), rows).splitlines() if ln[:2] == "| "]
    cells = [ln.rstrip(" |").rsplit("| ", 1)[-1] for ln in table[1:]]
    assert cells[1:] == [
        "transcribed, not regenerated: needs a GPU",
        "transcribed, not regenerated",
        "run",
    ]


def test_the_llc_page_is_regenerated_and_names_its_network():
    """The LLC page's rows come from its declared tier under today's run format, none copied, and
    the page names the hidden-bias form of the network they were measured on."""
    rows = read_rows(RESULTS_DIR / "llc.csv")
    assert (rows["source"] == "run").all() and len(rows) >= 5
    assert (pd.to_numeric(rows["format_version"]) == current_format_version()).all()
    assert "`hidden_bias=scalar`" in (RESULTS_DIR / "llc.md").read_text()


def test_a_run_that_gives_several_rows_counts_once_in_the_wall_time():
    """A RoPE run reported once per rescaling is one run of 30 s, not four; a second run adds its
    own time."""
    rows = pd.concat(
        [_rows(sweep="rope", point="seed=0", wall_s=30.0, rescaling=r) for r in "abcd"]
        + [_rows(sweep="rope", point="seed=1", wall_s=90.0)],
        ignore_index=True,
    )
    page = render_page(get_experiment("demo"), rows)
    assert "**Wall time:** 2.0 min in all (2 of 2 runs timed)." in page


def test_a_csv_without_provenance_is_refused_naming_the_column(tmp_path):
    path = tmp_path / "demo.csv"
    _rows().drop(columns=["commit"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"demo.csv: columns \['commit'\] are missing"):
        read_rows(path)
    _rows(source="typed").to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"row 2 field source='typed' is invalid"):
        read_rows(path)


def test_a_check_selects_reduces_and_bounds():
    rows = pd.DataFrame(
        {"L": ["N", "8", "N"], "t": [math.nan, 300.0, math.nan], "jumped": [False, True, False]}
    )
    assert Check(what="", column="jumped", where={"L": "N"}, reduce="any", high=0).holds(rows)[0]
    assert Check(what="", column="jumped", where={"L": 8}, reduce="all", low=1).holds(rows)[0]
    assert not Check(what="", column="t", low=400).holds(rows)[0]
    ok, line = Check(what="no value", column="t", where={"L": "N"}).holds(rows)
    assert not ok and "nan" in line  # nothing to check is a failure, not a pass


# The quick tiers in the default run: five experiments, about 110 s on one idle core together
# (positional about 30 s, log-n-scale about 20 s).
@pytest.mark.parametrize(
    "name", ["demo", "fig-a5-ln", "forecast-validation", "positional", "log-n-scale"]
)
def test_the_quick_tier_keeps_its_key_numbers(name, tmp_path):
    e = get_experiment(name)
    rows, written = reproduce(
        e,
        tier="quick",
        out=tmp_path / "results",
        runs=tmp_path / "runs",
        backend="serial",
        figures=False,
        log=lambda _: None,
    )
    results = check_rows(e, rows)
    assert results and all(ok for ok, _ in results), [line for ok, line in results if not ok]
    assert set(META) <= set(rows.columns) and (rows["source"] == "run").all()
    page = (tmp_path / "results" / f"{name}.md").read_text()
    assert page == render_page(e, read_rows(tmp_path / "results" / f"{name}.csv"))
    # a second call reuses the runs: nothing trains, the same numbers come back
    again, _ = reproduce(
        e,
        tier="quick",
        out=tmp_path / "results",
        runs=tmp_path / "runs",
        backend="serial",
        figures=False,
        log=lambda _: None,
    )
    cols = [c for c in rows.columns if c not in META]
    pd.testing.assert_frame_equal(rows[cols], again[cols])


def test_render_only_rebuilds_a_page_from_the_csv_alone(tmp_path):
    shutil.copy(RESULTS_DIR / "fig2-eps.csv", tmp_path / "fig2-eps.csv")
    cmd = [
        sys.executable,
        "-m",
        "interp.cli",
        "reproduce",
        "fig2-eps",
        "--render-only",
        "--no-figures",
        "--out",
        str(tmp_path),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "fig2-eps.md").read_text() == (RESULTS_DIR / "fig2-eps.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig2-eps.csv", "fig2-eps.md"]


def test_the_command_line_lists_and_refuses_in_one_line(tmp_path):
    run = [sys.executable, "-m", "interp.cli"]
    out = subprocess.run([*run, "list", "experiments"], capture_output=True, text=True)
    assert out.returncode == 0 and all(n in out.stdout for n in EXPERIMENTS)
    assert "quick about" in out.stdout
    bad = subprocess.run(
        [*run, "reproduce", "nope", "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert (
        bad.returncode == 2
        and bad.stderr.count("\n") == 1
        and "experiment='nope' is invalid" in bad.stderr
    )
    missing = subprocess.run(
        [*run, "reproduce", "demo", "--render-only", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "demo.csv is missing" in missing.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_the_checkouts_experiments_the_commands_say_what_they_need(
    tmp_path, monkeypatch, capsys
):
    """The package with no ``experiments/`` beside it (as a wheel installs it): ``reproduce`` and
    ``list experiments`` stop before any work with one line saying what they need and how to
    get it (the wheel itself: tests/test_installed_package.py)."""
    import interp.experiments as registry
    from interp import cli

    monkeypatch.setattr(registry, "CATALOGUE", tmp_path / "experiments")
    monkeypatch.setattr(registry, "EXPERIMENTS", {})
    assert registry.load_catalogue() is False
    for argv in (
        ["list", "experiments"],
        ["reproduce", "demo"],
        ["reproduce", "all", "--render-only", "--out", str(tmp_path)],
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert "needs a checkout of the repository" in err and "pip install -e ." in err, err
    assert sorted(tmp_path.iterdir()) == []


def test_the_project_speaks_of_itself_only():
    paths = ["README.md", "docs", "interp", "phenomenology", "notebooks", "benchmarks", "scripts"]
    out = subprocess.run(
        ["grep", "-rniE", "session|issue [0-9]|this session", *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.stdout == "", out.stdout[:2000]


def test_every_declared_figure_is_drawn_from_the_committed_csv():
    import plotly.graph_objects as go

    drawn = 0
    for name, e in EXPERIMENTS.items():
        csv = RESULTS_DIR / f"{name}.csv"
        if e.figure is None or not csv.exists():
            continue
        fig = e.figure(read_rows(csv, e.meta))
        assert isinstance(fig, go.Figure) and len(fig.data) >= 1, name
        assert f"![{e.title}]({name}.png)" in (RESULTS_DIR / f"{name}.md").read_text()
        drawn += 1
    assert drawn >= 5


def test_a_folder_in_the_way_is_refused_before_anything_trains(tmp_path):
    (tmp_path / "runs" / "demo" / "quick-main").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "quick-main" / "notes.txt").write_text("mine")
    cmd = [
        sys.executable,
        "-m",
        "interp.cli",
        "reproduce",
        "demo",
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(tmp_path / "out"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 3 and "is not a sweep folder" in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in (tmp_path / "runs" / "demo" / "quick-main").iterdir()) == [
        "notes.txt"
    ]


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_tiers_sweeps_are_valid_points(name):
    """Every field, value and preset of every tier's sweeps checks out, as `reproduce` checks it
    before anything trains (a typo in an experiment fails here, not after an hour)."""
    e = get_experiment(name)
    for tier in e.tiers.values():
        for sweep in tier.sweeps:
            try:
                points = sweep.spec().points()
            except ValueError as err:
                if name in FOREIGN and "is unknown" in str(err):
                    pytest.skip(f"{name}: a field its own runs add ({err})")
                raise
            assert points and {p.seed for p in points} == set(sweep.seeds)
