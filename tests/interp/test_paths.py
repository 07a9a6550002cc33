"""Paths below a run or sweep directory (interp.io.paths): a ``..`` anywhere among the components
below the root is refused, and a run nested inside another run does not become the root, so a link
between the two is refused rather than followed."""

import json

import pytest

from interp.io import atomic
from interp.io.errors import UnsafePathError
from interp.io.paths import check_no_links, enclosing_root, enclosing_roots


def _make_run(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"task": {}, "model": {}, "train": {}}))
    return path


def _files(folder):
    return sorted(
        (str(p.relative_to(folder)), p.read_bytes()) for p in folder.rglob("*") if p.is_file()
    )


@pytest.mark.parametrize(
    "relative",
    [
        "..",
        "../victim",
        "figures/../../victim",  # figures/ exists: the walk goes on past it
        "missing/../../victim",  # missing/ does not: the walk would stop there
        "checkpoints/..",
    ],
)
def test_a_dot_component_anywhere_below_the_root_is_refused(tmp_path, relative):
    run = _make_run(tmp_path / "run")
    (run / "figures").mkdir()
    with pytest.raises(UnsafePathError, match="leaves"):
        check_no_links(run, relative)


def test_a_plain_relative_path_below_the_root_is_accepted(tmp_path):
    run = _make_run(tmp_path / "run")
    (run / "figures").mkdir()
    assert check_no_links(run, "figures/new/x.png") == run / "figures/new/x.png"


def test_a_run_inside_a_run_leaves_the_outer_one_the_root(tmp_path):
    outer = _make_run(tmp_path / "outer")
    inner = _make_run(outer / "points" / "inner")
    assert enclosing_roots(inner / "fit.json") == [outer, inner]
    assert enclosing_root(inner / "fit.json") == outer
    assert enclosing_root(inner) == outer
    assert enclosing_root(tmp_path) is None


def test_a_link_between_a_run_and_a_run_inside_it_is_refused(tmp_path):
    """``outer/points`` links to another folder holding a run: writing through the inner run's
    path must refuse the link (the outer run is the root), never write into the other folder."""
    outer = _make_run(tmp_path / "outer")
    elsewhere = tmp_path / "elsewhere"
    _make_run(elsewhere / "inner")
    (outer / "points").symlink_to(elsewhere)
    before = _files(elsewhere)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        atomic.write_text_atomic(outer / "points" / "inner" / "fit.json", "{}")
    assert _files(elsewhere) == before
