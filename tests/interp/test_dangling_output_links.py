"""Every command that writes, given an output path that is a dangling symbolic link: refused
before any work with exit 3 and one ``error:`` line that names the path and says it is a symbolic
link; no traceback, the command's work never reached, nothing written anywhere and nothing created
where the link points (a link that dangles is the way to make a command create a file where the
user did not say)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from interp.cli import main
from interp.io.errors import EXIT_UNUSABLE
from tests.interp.tiny_runs import tiny_run
from tests.phenomenology.test_progress import _plateau_curve

TINY = ["--set", "steps=20", "--set", "eval_every=10", "--set", "n_eval=32", "--quiet"]


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A tiny run with 9 evaluations (a fit needs 8 points)."""
    return tiny_run(tmp_path_factory.mktemp("runs") / "run", steps=80)


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    return Path(shutil.copytree(base_run, tmp_path / "run"))


def _dangling(link: Path, tmp_path: Path) -> Path:
    """Make ``link`` point at a path that does not exist; return that path."""
    target = tmp_path / "elsewhere" / f"target-{link.name}"
    target.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    return target


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry below ``folder`` (links not followed): its kind, size and modification time."""
    entries = {}
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            st = os.lstat(Path(parent) / name)
            entries[os.path.relpath(Path(parent) / name, folder)] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
            )
    return entries


def _refused(capsys, monkeypatch, argv, link, target, work: str) -> None:
    """Run ``argv``; assert that it is refused up front (``work``, the function doing the
    command's work as ``module:name``, is never called) and that nothing changed on disk."""
    reached = []

    def never(*args, **kwargs):
        reached.append(work)
        raise RuntimeError(f"{work} was reached before the refusal")

    module, name = work.split(":")
    monkeypatch.setattr(f"{module}.{name}", never)
    before = _snapshot(target.parent.parent)
    code = main(argv)
    err = capsys.readouterr().err
    assert not reached, f"{work} ran before the refusal: {err}"
    assert code == EXIT_UNUSABLE, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and err.startswith("error: "), err
    assert "symbolic link" in err and str(link) in err, err
    assert not os.path.lexists(target), f"{target} was created through the link"
    assert link.is_symlink()  # the link itself is left as it was
    assert _snapshot(target.parent.parent) == before  # nothing written anywhere


def test_train_out(tmp_path, capsys, monkeypatch):
    link = tmp_path / "run"
    target = _dangling(link, tmp_path)
    argv = ["train", "--preset", "tiny", *TINY, "--out", str(link)]
    _refused(capsys, monkeypatch, argv, link, target, "interp.experiments.standard:train")


def test_sweep_out(tmp_path, capsys, monkeypatch):
    link = tmp_path / "sweep"
    target = _dangling(link, tmp_path)
    argv = ["sweep", "--preset", "tiny", "--grid", "K=16", "--backend", "serial", "--no-figures"]
    argv += [*TINY[:-1], "--out", str(link)]
    _refused(capsys, monkeypatch, argv, link, target, "interp.experiments.sweep:run_sweep")


def test_figures_out(run, tmp_path, capsys, monkeypatch):
    link = tmp_path / "figures"
    target = _dangling(link, tmp_path)
    argv = ["figures", str(run), "--out", str(link), "--formats", "html"]
    work = "interp.viz.figures:write_standard_figures"
    _refused(capsys, monkeypatch, argv, link, target, work)


@pytest.mark.parametrize("inside", [False, True], ids=["out", "run-report-html"])
def test_report(run, tmp_path, capsys, monkeypatch, inside):
    link = run / "report.html" if inside else tmp_path / "page.html"
    target = _dangling(link, tmp_path)
    argv = ["report", str(run), "--no-fit", "--sequences", "1"]
    argv += [] if inside else ["--out", str(link)]
    _refused(capsys, monkeypatch, argv, link, target, "interp.viz.report:write_report")


FIT = "phenomenology.fit:fit_curve"


@pytest.mark.parametrize(
    ("name", "extra"),
    [("fit.json", []), ("forecast.json", ["--until", "70"])],
)
def test_fit_into_a_run(run, tmp_path, capsys, monkeypatch, name, extra):
    link = run / name
    target = _dangling(link, tmp_path)
    argv = ["fit", str(run), "--n-boot", "0", *extra]
    _refused(capsys, monkeypatch, argv, link, target, FIT)


def test_fit_json(run, tmp_path, capsys, monkeypatch):
    link = tmp_path / "mine.json"
    target = _dangling(link, tmp_path)
    argv = ["fit", str(run), "--n-boot", "0", "--json", str(link)]
    _refused(capsys, monkeypatch, argv, link, target, FIT)


def test_fit_of_a_csv_curve(run, tmp_path, capsys, monkeypatch):
    curve = tmp_path / "curve.csv"
    shutil.copy(run / "metrics.csv", curve)
    link = tmp_path / "curve.fit.json"
    target = _dangling(link, tmp_path)
    argv = ["fit", str(curve), "--set", "L=8", "--set", "N=4", "--set", "B=1", "--n-boot", "0"]
    _refused(capsys, monkeypatch, argv, link, target, FIT)


def test_fit_figure(tmp_path, capsys, monkeypatch):
    csv = _plateau_curve(tmp_path / "c")
    link = tmp_path / "forecast.html"
    target = _dangling(link, tmp_path)
    argv = ["fit", str(csv), "--set", "B=2", "--n-boot", "0", "--until", "18000"]
    _refused(capsys, monkeypatch, [*argv, "--figure", str(link)], link, target, FIT)
    assert not (tmp_path / "c" / "c.forecast.json").exists()


def test_fit_figure_whose_link_points_into_a_missing_folder(tmp_path, capsys, monkeypatch):
    csv = _plateau_curve(tmp_path / "c")
    link = tmp_path / "forecast.html"
    target = tmp_path / "elsewhere" / "gone" / "forecast.html"
    (tmp_path / "elsewhere").mkdir()
    link.symlink_to(target)
    argv = ["fit", str(csv), "--set", "B=2", "--n-boot", "0", "--until", "18000"]
    _refused(capsys, monkeypatch, [*argv, "--figure", str(link)], link, target, FIT)


def test_transition_out(run, tmp_path, capsys, monkeypatch):
    link = tmp_path / "transition.csv"
    target = _dangling(link, tmp_path)
    argv = ["transition", str(run), "--out", str(link)]
    work = "interp.analysis.transition:transition_report"
    _refused(capsys, monkeypatch, argv, link, target, work)


def test_import_run_dir(run, tmp_path, capsys, monkeypatch):
    link = tmp_path / "imported"
    target = _dangling(link, tmp_path)
    weights = run / "checkpoints" / "step_00000080.safetensors"
    argv = ["import", str(weights), str(link), "--preset", "tiny"]
    work = "interp.experiments.importer:import_weights"
    _refused(capsys, monkeypatch, argv, link, target, work)


def test_notebooks_path(tmp_path, capsys, monkeypatch):
    link = tmp_path / "nb"
    target = _dangling(link, tmp_path)
    argv = ["notebooks", str(link)]
    _refused(capsys, monkeypatch, argv, link, target, "interp.io.atomic:write_bytes_atomic")


@pytest.mark.parametrize("command", ["figures", "train"])
def test_a_link_to_a_real_folder_is_refused_too(run, tmp_path, capsys, monkeypatch, command):
    real = tmp_path / "elsewhere" / "real"
    real.mkdir(parents=True)
    link = tmp_path / "out"
    link.symlink_to(real)
    if command == "figures":
        argv = ["figures", str(run), "--out", str(link), "--formats", "html"]
        work = "interp.viz.figures:write_standard_figures"
    else:
        argv = ["train", "--preset", "tiny", *TINY, "--out", str(link)]
        work = "interp.experiments.standard:train"
    _refused(capsys, monkeypatch, argv, link, real / "never", work)
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("option", ["--out", "--runs"])
def test_reproduce_out_and_runs(tmp_path, capsys, monkeypatch, option):
    link = tmp_path / "results"
    target = _dangling(link, tmp_path)
    argv = ["reproduce", "demo", option, str(link)]
    _refused(capsys, monkeypatch, argv, link, target, "interp.experiments:reproduce")
