"""The one registry of figures and report sections: a section is one plugin file, found in both
``figures`` and ``report`` output; the built-in figure set and report come from the same list."""

from pathlib import Path

import pandas as pd
import pytest

from interp.cli import main
from interp.io import plugins
from interp.viz.sections import SECTIONS, register_section, sections
from tests.interp.tiny_runs import tiny_run

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "extra_section.py"


@pytest.fixture
def clean_registry():
    saved, loaded = dict(SECTIONS), dict(plugins._LOADED)
    yield
    SECTIONS.clear()
    SECTIONS.update(saved)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)


def test_the_figure_set_and_the_report_share_one_registered_list():
    import interp.viz.report  # noqa: F401  (registers the report's own sections)

    figures = [s.name for s in sections()]
    report = [s.name for s in sections(report=True)]
    assert figures == ["dynamics", "attention", "fit_overlay", "llc", "quanta"]
    assert report == [
        "config",
        "dynamics",
        "transition",
        "fit_forecast",
        "llc",
        "quanta",
        "explorer",
    ]


def test_a_plugin_section_is_in_the_figures_and_the_report(tmp_path, clean_registry, capsys):
    run = tiny_run(tmp_path / "tiny", steps=10)
    out = tmp_path / "figs"
    argv = ["--plugin", str(FIXTURE), "figures", str(run), "--out", str(out), "--formats", "html"]
    assert main(argv) == 0
    assert (out / "loss_gap.html").exists() and (out / "progress_measures.html").exists()
    drawn = pd.read_csv(out / "loss_gap.csv")  # tidy: a column per curve, named as in the legend
    metrics = pd.read_csv(run / "metrics.csv")
    gap = next(c for c in drawn.columns if c.startswith("IW - IC loss"))
    pd.testing.assert_series_equal(
        drawn[gap].reset_index(drop=True),
        (metrics["iw_loss"] - metrics["ic_loss"]).rename(gap),
        rtol=1e-6,
    )
    page = tmp_path / "r.html"
    argv = ["--plugin", str(FIXTURE), "report", str(run), "--out", str(page), "--no-fit"]
    assert main([*argv, "--sequences", "1"]) == 0
    text = page.read_text()
    assert '<h2 id="section-loss_gap">3. In-weights minus in-context loss</h2>' in text
    assert "IW - IC loss [tiny]" in text and '<h2 id="section-transition">4. Plateau' in text


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(name="Bad"), "Section.name"),
        (dict(name="dynamics"), "already registered"),
        (dict(title=""), "Section.title"),
        (dict(figures=None), "Section.figures"),
        (dict(figures=None, html=lambda ctx: "x"), "in_figures=False"),
    ],
)
def test_a_bad_section_names_the_field(kwargs, field, clean_registry):
    args = dict(name="ok", title="OK", figures=lambda ctx: []) | kwargs
    with pytest.raises(ValueError, match=field):
        register_section(args.pop("name"), **args)
