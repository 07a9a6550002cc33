"""Every standard figure at single and double width, read back from its SVG: within a page's text
block, axis titles outside other panels' plot areas, a drawn trace for every legend entry, one-line
subtitles, the attention snapshots' label tokens named without overlap; and the jump's observed
transition under one name, with one value, in the CLI, the report and the figures."""

from __future__ import annotations

import contextlib
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import tests.fixtures.extra_model  # noqa: F401  (registers the fast logistic-step model)
from interp.cli import main
from interp.viz.export import find_chromium
from tests.interp.tiny_runs import tiny_run

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="SVG export needs chromium")

SVG = "{http://www.w3.org/2000/svg}"
STANDARD = ("training_dynamics", "progress_measures", "attention_snapshots", "fit_overlay_run")
MID = 2000.0  # the IC-accuracy midpoint of the synthetic curves


def jump_metrics() -> pd.DataFrame:
    """A run's curves with a clean jump: IC accuracy a logistic with its midpoint at 2000, the IC
    loss falling with it, CLA up early, the induction score equal to TILA2 (B = 1), the active
    units of the three hidden layers (the progress figure's fourth panel)."""
    steps = np.arange(0, 3001, 50)
    s = 1 / (1 + np.exp(-(steps - MID) / 120))
    loss = np.log(8) * (1 - s) + 0.05
    tila2 = 0.1 + 0.8 * s
    return pd.DataFrame(
        {
            "step": steps,
            "train_loss": loss,
            "ic_loss": loss,
            "ic_acc": 0.125 + 0.85 * s,
            "ic2_acc": 0.125 + 0.8 * s,
            "iw_acc": np.full(len(steps), 0.1),
            "ila1": 0.2 + 0.6 * s,
            "tila2": tila2,
            "tla2": 0.5 + 0.4 * s,
            "cla": 0.95 - 0.6 * np.exp(-steps / 300),
            "prev_token_score": 0.15 + 0.6 * s,
            "induction_score": tila2,
            "active_h1": 0.9 - 0.1 * s,
            "active_h2": 0.8 - 0.2 * s,
            "active_h3": 0.7 - 0.3 * s,
        }
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tiny_run(tmp_path_factory.mktemp("geometry") / "run", steps=10)
    jump_metrics().to_csv(d / "metrics.csv", index=False)
    # fit.json as `induction-cliff fit` writes it, by a fast model (the nested-logit fit takes
    # tens of seconds); what it prints is kept for the vocabulary test
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["fit", str(d), "--model", "logistic-step"]) == 0
    (d / "fit.out").write_text(out.getvalue())
    return d


@pytest.fixture(scope="module")
def svgs(run_dir, tmp_path_factory):
    from interp.viz.figures import write_standard_figures

    out = {}
    for width in ("single", "double"):
        folder = tmp_path_factory.mktemp(width)
        write_standard_figures([run_dir], folder, ("svg",), width=width, n_average=8)
        out[width] = folder
    return out


def _plot_areas(root) -> dict[str, tuple[float, float, float, float]]:
    """Subplot name (``xy``, ``x2y2``) -> its plot area (x0, y0, x1, y1) in the SVG."""
    clips = {}
    for clip in root.iter(f"{SVG}clipPath"):
        rect = clip.find(f"{SVG}rect")
        m = re.search(r"(x\d*y\d*)plot$", clip.get("id", ""))
        if m and rect is not None:
            clips[clip.get("id")] = (float(rect.get("width")), float(rect.get("height")))
    areas = {}
    for g in root.iter(f"{SVG}g"):
        ref = re.search(r"url\(#(.+)\)", g.get("clip-path", ""))
        if not ref or ref[1] not in clips or "translate" not in g.get("transform", ""):
            continue
        x, y = (float(v) for v in re.findall(r"[-\d.]+", g.get("transform"))[:2])
        w, h = clips[ref[1]]
        areas[g.get("class")] = (x, y, x + w, y + h)
    return areas


def _title_boxes(root):
    """(axis, box) of every axis title: its text's extent from its anchor and font size."""
    for text in root.iter(f"{SVG}text"):
        cls = text.get("class", "")
        if not re.fullmatch(r"[xy]\d*title", cls) or not (text.text or "").strip():
            continue
        x, y = float(text.get("x")), float(text.get("y"))
        size = float(re.search(r"font-size: ([\d.]+)px", text.get("style"))[1])
        half = 0.55 * size * len(text.text) / 2
        if "rotate(-90" in (text.get("transform") or ""):  # reads upwards: glyphs left of x
            yield cls, (x - 0.8 * size, y - half, x + 0.25 * size, y + half)
        else:
            yield cls, (x - half, y - 0.8 * size, x + half, y + 0.25 * size)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _style(el, key: str) -> str | None:
    m = re.search(rf"{key}: ([^;]+)", el.get("style") or "")
    return m[1].strip() if m else None


def _legend_signatures(root):
    """(legend text, stroke, dash, marker fill) of each legend entry."""
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    for entry in legend.iter(f"{SVG}g"):
        if entry.get("class") != "traces":
            continue
        text = next(t.text for t in entry.iter(f"{SVG}text") if t.get("class") == "legendtext")
        line = next((p for p in entry.iter(f"{SVG}path") if p.get("class") == "js-line"), None)
        point = next((p for p in entry.iter(f"{SVG}path") if "pts" in p.get("class", "")), None)
        stroke = _style(line, "stroke") if line is not None else None
        dash = _style(line, "stroke-dasharray") if line is not None else None
        fill = _style(point, "fill") if point is not None else None
        yield text, stroke, dash, fill


@pytest.mark.parametrize("width", ["single", "double"])
@pytest.mark.parametrize("stem", STANDARD)
def test_standard_figure_geometry(svgs, width, stem):
    root = ET.parse(svgs[width] / f"{stem}.svg").getroot()
    areas = _plot_areas(root)
    assert areas, "no plot area found"
    for axis, box in _title_boxes(root):
        for name, area in areas.items():
            # a title may touch its own panel's edge, never another panel's plot area
            own = name == f"x{axis[1:-5]}y{axis[1:-5]}" or name.startswith(axis[0] + axis[1:-5])
            if not own:
                assert not _overlap(box, area), f"{stem} at {width}: {axis} inside {name}"
    drawn = [
        (_style(p, "stroke"), _style(p, "stroke-dasharray"), _style(p, "fill"))
        for p in root.iter(f"{SVG}path")
        if (p.get("d") or "").count("L") + (p.get("d") or "").count("V") >= 1
        or "point" in p.get("class", "")
    ]
    entries = list(_legend_signatures(root)) if stem != "attention_snapshots" else []
    seen = set()
    for text, stroke, dash, fill in entries:
        signature = (stroke, dash, fill)
        assert signature not in seen, f"{stem} at {width}: {text!r} looks like another entry"
        seen.add(signature)
        if stroke is not None:
            assert any(s == stroke and d == dash for s, d, _ in drawn), f"{text!r} not drawn"
        else:
            assert any(f == fill for _, _, f in drawn), f"{text!r} not drawn"
    # panels that share the step axis show one range: every labelled x axis the same ticks
    labels: dict[str, list[str]] = {}
    for g in root.iter(f"{SVG}g"):
        if re.fullmatch(r"x\d*tick", g.get("class") or ""):
            labels.setdefault(g.get("class"), []).extend(t.text for t in g)
    ticks = {tuple(v) for v in labels.values()}
    assert len(ticks) == 1, f"{stem} at {width}: x ranges {labels}"
    # the subtitle stays on one line: the title has exactly its two lines
    title = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "gtitle")
    assert len([s for s in title if s.get("class") == "line"]) <= 2, stem


def test_attention_snapshots_label_the_query_row(svgs):
    root = ET.parse(svgs["double"] / "attention_snapshots.svg").getroot()
    ticks = [t.text for g in root.iter(f"{SVG}g") if g.get("class") == "ytick" for t in g]
    assert "xq" in ticks


def test_every_standard_figure_fits_a_page(svgs):
    """At most the column's width by 9 in (a page's text block is about 7 x 9 in); the fit
    overlay's one panel at most 4 in tall at double width."""
    for width, inches in (("single", 3.5), ("double", 7.0)):
        files = sorted(svgs[width].glob("*.svg"))
        assert {p.stem for p in files} >= set(STANDARD)
        for path in files:
            root = ET.parse(path).getroot()
            w, h = float(root.get("width")), float(root.get("height"))
            assert w == pytest.approx(inches * 96), path.name
            assert h <= 9 * 96, f"{path.name} at {width}: {h / 96:.2f} in tall"
    overlay = ET.parse(svgs["double"] / "fit_overlay_run.svg").getroot()
    assert float(overlay.get("height")) <= 4 * 96


# Height of lowercase letters without ascender (x, q) and of letters with one or digits (l1), in
# font sizes (Arial): the query's label needs less room after the label token before it.
_X_HEIGHT, _ASCENT = 0.52, 0.72


def _tick_labels(root) -> dict[str, list[tuple[float, str, float]]]:
    """Axis (``x5``, ``y``) -> (position along the axis, text, font size) of its shown tick
    labels, in order along the axis."""
    out: dict[str, list] = {}
    for g in root.iter(f"{SVG}g"):
        m = re.fullmatch(r"([xy]\d*)tick", g.get("class") or "")
        for text in g if m else ():
            if not (text.text or "").strip():
                continue
            x, y = (float(v) for v in re.findall(r"[-\d.]+", text.get("transform"))[:2])
            size = float(re.search(r"font-size: ([\d.]+)px", text.get("style"))[1])
            out.setdefault(m[1], []).append((x if m[1][0] == "x" else y, text.text, size))
    return {axis: sorted(ticks) for axis, ticks in out.items()}


@pytest.mark.parametrize("width", ["single", "double"])
def test_attention_snapshots_name_the_label_tokens(tmp_path, width):
    """17 tokens (N = 8) crowd a print panel at 7 pt: the labels shown are the label tokens
    (where layer 1's previous-token diagonal and layer 2's query point) and the query, on every
    labelled axis, and no two of them overlap."""
    from interp.viz import plots
    from interp.viz.export import export_figure

    n = 17
    patterns = np.random.default_rng(0).dirichlet(np.ones(n), size=(4, 2, n))
    fig = plots.plot_attention_snapshots(
        patterns,
        [0, 100, 200, 300],
        plots.token_labels(8),
        captions=["IC acc 0.12"] * 4,
        tall=width == "single",  # as the figure set draws it in a column
    )
    (svg,) = export_figure(fig, tmp_path / "snapshots", ("svg",), style=width, csv=False)
    axes = _tick_labels(ET.parse(svg).getroot())
    assert len(axes) == 6, sorted(axes)  # the outer axes: 4 + 2 (2 + 4 with tall)
    for axis, ticks in axes.items():
        texts = [t for _, t, _ in ticks]
        assert texts[-1] == "xq" and texts[0] == "l1", (axis, texts)
        assert all(re.fullmatch(r"l[1-8]", t) for t in texts[:-1]), (axis, texts)
        for (a, _, size), (b, text, _) in zip(ticks, ticks[1:], strict=False):
            room = (_X_HEIGHT if text == "xq" else _ASCENT) * size
            assert b - a >= room, f"{axis}: {text} overlaps the label before it"
    if width == "double":
        assert [t for _, t, _ in axes["y"]] == [f"l{i}" for i in range(1, 9)] + ["xq"]


def test_tidy_csv_has_a_row_per_step_and_a_column_per_curve(svgs):
    table = pd.read_csv(svgs["single"] / "training_dynamics.csv")
    assert list(table.columns)[:2] == ["training step", "train loss"]
    assert {"IC", "IC2", "IW", "chance (1/8)"} <= set(table.columns)
    row = table[table["training step"] == 2000].iloc[0]
    assert row["IC"] == pytest.approx(0.125 + 0.85 / 2)
    cells = pd.read_csv(svgs["single"] / "attention_snapshots.csv")
    assert list(cells.columns) == ["panel", "query", "key", "attention"]
    assert set(cells["query"]) == {"x1", "l1", "x2", "l2", "x3", "l3", "x4", "l4", "xq"}


def test_no_whole_curve_fit_is_called_a_forecast(svgs):
    for width in ("single", "double"):
        svg = (svgs[width] / "fit_overlay_run.svg").read_text()
        texts = re.findall(r">([^<>]+)</", svg)
        assert any(t.startswith("fitted transition (step ") for t in texts), texts
        assert not [t for t in texts if "forecast" in t.lower()], texts


def test_the_observed_transition_is_one_number_under_one_name(run_dir, svgs, capsys):
    """The IC-accuracy midpoint is the observed transition in `transition`, the report and the
    training-dynamics figure; the IC-loss cliff is the IC-loss cliff in `transition` and `fit`."""
    from interp.analysis.transition import detect_run_transition
    from interp.io.rundir import load_run
    from interp.viz.report import ReportConfig, build_report

    observed = round(detect_run_transition(pd.read_csv(run_dir / "metrics.csv")))
    assert observed == pytest.approx(MID, abs=5)
    assert main(["transition", str(run_dir)]) == 0
    out = capsys.readouterr().out
    table = out.splitlines()
    assert round(float(table[1].split()[4])) == observed  # run, "one config", transitioned, step
    assert "step: the observed transition (IC-accuracy midpoint)" in out
    cliff = round(float(table[1].split()[-1]))
    fit_out = (run_dir / "fit.out").read_text()
    assert f"IC-loss cliff (cliff, whole curve): {cliff}" in fit_out
    line = next(x for x in fit_out.splitlines() if "transition step" in x)
    assert line.strip().startswith("fitted transition step") and "not a forecast" in line
    page = build_report([load_run(run_dir)], ReportConfig(fit=False))
    header = "<th>observed transition (IC-accuracy midpoint)</th>"
    assert header in page and "<th>IC-loss cliff</th>" in page
    assert (
        f"observed transition (step {observed})"
        in (svgs["single"] / "training_dynamics.svg").read_text()
    )
    svg = (svgs["single"] / "fit_overlay_run.svg").read_text()
    assert f"IC-loss cliff (step {cliff})" in svg


def test_the_fit_overlay_draws_only_the_curves_the_fit_compared(run_dir, monkeypatch):
    """The nested-logit model's trajectory carries its own soft ``cla`` (near 0.3 on the demo run,
    where the network's argmax CLA is near 0.95); a fit of the IC loss alone never compared it with
    the run's CLA, so the overlay draws no "CLA (fit)" line."""
    import interp.viz.fit_overlay as overlay
    from interp.io.rundir import load_run

    class Fitted:  # what a nested-logit fit of ic_loss returns (predict_curves' columns)
        transition_step_, transition_step_stderr_ = 2000.0, 10.0

        def __init__(self, *args, **kwargs):
            pass

        def fit(self, X, y):
            return self

        def predict_curves(self, steps):
            return pd.DataFrame({"step": steps, "ic_loss": 1.0, "loss": 1.0, "cla": 0.3})

    monkeypatch.setattr(overlay, "DynamicsFit", Fitted)
    _, fig = overlay.fit_overlay(load_run(run_dir), model="nested-logit", target="ic_loss")
    assert [t.name for t in fig.data] == ["IC loss (run)", "IC loss (fit)"]
