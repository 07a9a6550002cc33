"""Every pair of curves that share a legend or an axis, in every standard figure and in the
explorer's legend, differs in colour by CIEDE2000 >= 10 and CIELAB Delta E (1976) >= 20; curves
that run close to each other differ in dash as well. No browser needed."""

from __future__ import annotations

import contextlib
import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest

import tests.fixtures.extra_model  # noqa: F401  (registers the fast logistic-step model)
from interp.analysis import dead_units
from interp.cli import main
from tests.interp.tiny_runs import tiny_run

MIN_DE2000 = 10.0  # CIEDE2000: about 1 is just noticeable, 10 reads as another colour
MIN_DE76 = 20.0  # CIELAB Euclidean distance


def lab(color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of a ``#RRGGBB`` sRGB colour."""
    assert isinstance(color, str) and len(color) == 7 and color[0] == "#", color
    srgb = [int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in srgb)
    xyz = (
        (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047,
        0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
        (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883,
    )
    fx, fy, fz = (
        t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz
    )
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e76(a, b) -> float:
    """CIE 1976 colour difference of two CIELAB triples."""
    return math.dist(a, b)


def delta_e2000(lab1, lab2) -> float:
    """CIEDE2000 colour difference of two CIELAB triples (Sharma, Wu & Dalal 2005)."""
    (L1, a1, b1), (L2, a2, b2) = lab1, lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360
    h2p = math.degrees(math.atan2(b2, a2p)) % 360
    dh = 0.0 if c1p * c2p == 0 else (h2p - h1p + 180) % 360 - 180
    d_big_h = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar, cp_bar = (L1 + L2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    else:
        h_bar = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_bar - 30))
        + 0.24 * math.cos(math.radians(2 * h_bar))
        + 0.32 * math.cos(math.radians(3 * h_bar + 6))
        - 0.20 * math.cos(math.radians(4 * h_bar - 63))
    )
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c, s_h = 1 + 0.045 * cp_bar, 1 + 0.015 * cp_bar * t
    r_c = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
    r_t = -math.sin(math.radians(60 * math.exp(-(((h_bar - 275) / 25) ** 2)))) * r_c
    dl, dc, dh_ = (L2 - L1) / s_l, (c2p - c1p) / s_c, d_big_h / s_h
    return math.sqrt(dl**2 + dc**2 + dh_**2 + r_t * dc * dh_)


def test_the_colour_differences_match_published_values():
    # Sharma, Wu & Dalal (2005), table 1, pairs 1, 7 and 17
    assert delta_e2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(2.0425, abs=1e-4)
    assert delta_e2000((50, 0, 0), (50, -1, 2)) == pytest.approx(2.3669, abs=1e-4)
    assert delta_e2000((50, 2.5, 0), (73, 25, -18)) == pytest.approx(27.1492, abs=1e-4)
    assert lab("#FFFFFF") == pytest.approx((100, 0, 0), abs=0.01)
    assert delta_e76(lab("#000000"), lab("#FFFFFF")) == pytest.approx(100, abs=0.01)


def _marks(fig):
    """``(group, name, colour, axes, in legend, dash, reference)`` of every line or marker trace
    and every line shape in the legend; reference marks are the shapes and the two-point
    horizontal lines (transitions, chance), told apart from each other by dash."""
    out = []
    for t in fig.data:
        if t.type != "scatter":
            continue
        lines = "lines" in (t.mode or "lines")
        color = t.line.color if lines else t.marker.color
        flat = lines and len(t.y) == 2 and t.y[0] == t.y[1]
        axes = (t.xaxis or "x", t.yaxis or "y")
        dash = t.line.dash if lines else f"marker {t.marker.symbol}"
        group = t.legendgroup or t.name
        out.append((group, t.name, color, axes, t.showlegend is not False, dash or "solid", flat))
    for s in fig.layout.shapes:
        if s.showlegend and s.type == "line":
            group = s.legendgroup or s.name
            out.append((group, s.name, s.line.color, None, True, s.line.dash or "solid", True))
    return out


def close_pairs(fig) -> list[str]:
    """Pairs of curves sharing the legend or an axis whose colours are too close."""
    marks = _marks(fig)
    in_legend = {m[0] for m in marks if m[4]}
    bad = []
    for a, b in itertools.combinations(marks, 2):
        if a[0] == b[0]:  # one curve: a run's faint lines and their mean, a fit's run and line
            continue
        shared = (a[0] in in_legend and b[0] in in_legend) or (a[3] is not None and a[3] == b[3])
        if not shared:
            continue
        # one quantity in its loss and its accuracy form (IC loss, IC) keeps its colour on its
        # two axes: the axis tells them apart, the colour says they are one measure
        if a[3] != b[3] and a[2] == b[2] and a[1].split()[0] == b[1].split()[0]:
            continue
        if a[6] and b[6]:  # two reference marks: the same dark grey, another dash
            assert a[5] != b[5], f"{a[1]!r} and {b[1]!r}: same colour and dash"
            continue
        la, lb = lab(a[2]), lab(b[2])
        de00, de76 = delta_e2000(la, lb), delta_e76(la, lb)
        if de00 < MIN_DE2000 or de76 < MIN_DE76:
            bad.append(f"{a[1]} {a[2]} / {b[1]} {b[2]}: dE2000 {de00:.1f}, dE76 {de76:.1f}")
    return bad


def full_metrics() -> pd.DataFrame:
    """Every column the figures draw, the active units' included, with a jump at step 2000."""
    steps = np.arange(0, 3001, 50)
    s = 1 / (1 + np.exp(-(steps - 2000) / 120))
    loss = np.log(8) * (1 - s) + 0.05
    cols = {"train_loss": loss, "ic_loss": loss, "ic_acc": 0.125 + 0.85 * s}
    cols |= {"ic2_acc": 0.125 + 0.8 * s, "iw_acc": np.full(len(steps), 0.1)}
    cols |= {"ila1": 0.2 + 0.6 * s, "tila2": 0.1 + 0.8 * s, "tla2": 0.5 + 0.4 * s}
    cols |= {"cla": 0.95 - 0.6 * np.exp(-steps / 300), "prev_token_score": 0.15 + 0.6 * s}
    cols |= {"induction_score": 0.1 + 0.7 * s}
    for k in range(1, dead_units.MAX_LAYERS + 1):
        cols[dead_units.active_column(k)] = 0.9 - 0.1 * k * s
    return pd.DataFrame({"step": steps, **cols})


@pytest.fixture(scope="module")
def standard_figures(tmp_path_factory):
    """name -> figure of every registered section for a run with every curve and a fit.json."""
    from interp.io.rundir import load_run
    from interp.viz.figures import run_context
    from interp.viz.sections import sections

    run = tiny_run(tmp_path_factory.mktemp("colours") / "run", steps=10)
    full_metrics().to_csv(run / "metrics.csv", index=False)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["fit", str(run), "--model", "logistic-step"]) == 0
    ctx = run_context([load_run(run)], {"n_average": 4, "formats": ("html",)})
    built_in = ("dynamics", "attention", "fit_overlay", "llc", "quanta")
    chosen = [section for section in sections() if section.name in built_in]
    return {d.stem: d.figure for section in chosen for d in section.figures(ctx)}


def test_every_standard_figure_separates_its_curves_by_colour(standard_figures):
    from interp.viz.dynamics_plots import FIT_LOSS_COLUMNS, FIT_UNIT_COLUMNS, plot_fit_overlay

    assert {"training_dynamics", "progress_measures", "fit_overlay_run"} <= set(standard_figures)
    for name, fig in standard_figures.items():
        assert close_pairs(fig) == [], name
    # a fit overlay with every curve a fit can draw, beside both transitions and a cut-off
    metrics = full_metrics()
    columns = [*FIT_LOSS_COLUMNS, *FIT_UNIT_COLUMNS]
    fig = plot_fit_overlay(
        metrics, metrics, 2100.0, observed_step=2000.0, cutoff_step=1500.0, columns=columns
    )
    assert len(fig.data) == 2 * len(columns)
    assert close_pairs(fig) == []


def test_the_explorer_legend_separates_every_curve():
    from interp.viz.explorer import _measure_styles, measure_columns, measures_figure

    metrics = full_metrics()
    columns = [c for c in measure_columns() if c != "ic_acc" and c in metrics.columns]
    data = {"measures": metrics.to_dict("list"), **_measure_styles(metrics, ["ic_acc", *columns])}
    fig = measures_figure(data)
    assert len(fig.data) == 11  # IC, IW, six measures, three active-unit shares
    assert close_pairs(fig) == []


def test_ila1_and_the_previous_token_score_differ_in_dash(standard_figures):
    """They run together from the jump on: beside each other in the explorer, one is dashed."""
    from interp.viz.explorer import _measure_styles, measures_figure

    metrics = full_metrics()
    data = {"measures": metrics.to_dict("list")}
    data |= _measure_styles(metrics, ["ila1", "prev_token_score"])
    dashes = {t.name: t.line.dash for t in measures_figure(data).data}
    assert dashes == {"ILA1": "solid", "prev-token score": "dash"}
    progress = {t.name: t.line.dash for t in standard_figures["progress_measures"].data}
    assert progress["ILA1"] != progress["prev-token score"]
