"""`induction-cliff figures` without a browser: one line, a non-zero exit, nothing written."""

from pathlib import Path

from interp import cli


def _no_run_needed(tmp_path: Path) -> tuple[Path, Path]:
    # The check comes before any run is read, so an empty folder stands in for a run.
    run = tmp_path / "run"
    run.mkdir()
    return run, tmp_path / "figs"


def test_static_formats_without_chromium_fail_before_any_work(tmp_path, monkeypatch, capsys):
    import interp.viz.export

    monkeypatch.setattr(interp.viz.export, "find_chromium", lambda: None)
    run, out = _no_run_needed(tmp_path)
    rc = cli.main(["figures", str(run), "--out", str(out), "--formats", "html,png"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3
    assert len(err) == 1 and err[0].startswith("error: --formats png needs chromium")
    assert "--formats html works without it" in err[0]
    assert not out.exists()


def test_bad_browser_path_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-browser"))
    run, out = _no_run_needed(tmp_path)
    rc = cli.main(["figures", str(run), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3 and len(err) == 1
    assert "BROWSER_PATH" in err[0] and "no-such-browser" in err[0]
    assert not out.exists()
