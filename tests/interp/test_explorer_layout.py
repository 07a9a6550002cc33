"""The attention explorer fits a 1280-px window beside JupyterLab's file browser."""

from interp.viz import explorer


def _data():
    """A minimal explorer_data dict: one step, one IC sequence of 2 pairs, 2 layers."""
    ticks, hover = explorer.token_ticks([300, 301], [4, 7], 300, 4, K=256)
    pattern = [[1.0, None, None, None, None]] * 5
    return {
        "run": "demo",
        "steps": [100],
        "n_layers": 2,
        "sets": {"ic": [{"ticks": ticks, "hover": hover, "patterns": [[pattern, pattern]]}]},
        "set_names": {"ic": "IC"},
        "measures": {"step": [0, 100], "ic_acc": [0.1, 0.9]},
        "labels": {"ic_acc": "IC"},
        "colors": {"ic_acc": "#000000"},
    }


def test_the_two_figures_side_by_side_fit_a_1280_px_window():
    data = _data()
    heat = explorer.heatmap_figure(data)
    measures = explorer.measures_figure(data, 100)
    width = heat.layout.width + measures.layout.width + explorer.JUPYTERLAB_CHROME_PX
    assert width <= explorer.WINDOW_PX == 1280
    assert (heat.layout.width, heat.layout.height) == explorer.HEATMAP_SIZE
    assert (measures.layout.width, measures.layout.height) == explorer.MEASURES_SIZE


def test_the_html_report_draws_the_same_sizes():
    js = explorer.EXPLORER_JS
    assert "__" not in js.replace("__proto__", "")  # every size placeholder was filled
    heat_w, heat_h = explorer.HEATMAP_SIZE
    meas_w, meas_h = explorer.MEASURES_SIZE
    assert f"width: {heat_w}, height: {heat_h}" in js
    assert f"width: {meas_w}, height: {meas_h}" in js


def test_the_widget_rows_wrap_instead_of_overflowing():
    import pytest

    pytest.importorskip("ipywidgets")
    widget = explorer.AttentionExplorer(None, data=_data()).widget
    assert [row.layout.flex_flow for row in widget.children] == ["row wrap", "row wrap"]
