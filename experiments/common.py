"""Pieces the experiment modules share: the tiny quick-tier settings, analyses beyond the sweep
summary, and the small functions that turn rows into the text a page compares with the paper."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from interp.experiments.core import Experiment, matches, sweep_rows

# The quick tiers train the `tiny` preset (D = 15, K = 64, L = 8, N = 4, Adam lr 3e-3, batch 64):
# 600 steps give a plateau and a jump in about 15 s on one thread.
TINY = {"steps": 600, "eval_every": 25, "num_threads": 1}
TINY_SGD = {
    "steps": 1500,
    "eval_every": 25,
    "optimizer": "sgd",
    "lr": 0.3,
    "hidden_bias": "scalar",
    "num_threads": 1,
}
TINY_NOTE = (
    "the `tiny` preset (D 15, K 64, L 8, N 4, a 32-unit classifier; Adam lr 3e-3, batch 64), "
    "600 steps, evaluations every 25 steps, one thread: a smoke test of the pipeline and of "
    "the qualitative result, not the claim"
)


def fmt(value, spec: str = "{:.3g}") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return spec.format(value)


def values(rows: pd.DataFrame, column: str, spec: str = "{:.3g}", **where) -> str:
    """The values of ``column`` in the rows selected by ``where``, joined by ' / '."""
    sel = select(rows, **where)
    vals = pd.to_numeric(sel[column], errors="coerce") if column in sel else pd.Series([], float)
    return " / ".join(fmt(float(v), spec) for v in vals) or "-"


def mean_sd(rows: pd.DataFrame, column: str, spec: str = "{:.0f}", **where) -> str:
    sel = select(rows, **where)
    vals = pd.to_numeric(sel[column], errors="coerce").dropna() if column in sel else []
    if len(vals) == 0:
        return "-"
    if len(vals) == 1:
        return fmt(float(vals.iloc[0]), spec)
    return f"{fmt(float(vals.mean()), spec)} ± {fmt(float(vals.std()), spec)} ({len(vals)} rows)"


def count(rows: pd.DataFrame, column: str = "transitioned", **where) -> str:
    sel = select(rows, **where)
    sel = sel[sel[column].notna()] if column in sel else sel.iloc[0:0]
    if not len(sel):
        return "-"
    truth = sel[column].astype(str).str.lower().isin(["true", "1", "1.0"])
    return f"{int(truth.sum())} of {len(sel)}"


def select(rows: pd.DataFrame, **where) -> pd.DataFrame:
    sel = rows
    for k, v in where.items():
        if k in sel:
            sel = sel[matches(sel[k], v)]
        else:
            return sel.iloc[0:0]
    return sel


def with_transitions(columns: Sequence[str]):
    """An analysis: the sweep summary plus the transition step of each metrics column in
    ``columns`` (``<column>_transition``, NaN without one)."""

    def analyse(experiment: Experiment, tier: str, dirs: Sequence[Path]) -> pd.DataFrame:
        from interp.analysis.transition import detect_transition
        from interp.io.rundir import read_metrics

        rows = sweep_rows(experiment, tier, dirs)
        for col in columns:
            found = []
            for sweep, point in zip(rows["sweep"], rows["point"]):
                d = dirs[[s.name for s in experiment.tiers[tier].sweeps].index(sweep)] / point
                m = read_metrics(d / "metrics.csv").frame
                r = detect_transition(m["step"], m[col]) if col in m else None
                found.append(r.step if r is not None and r.transitioned else math.nan)
            rows[f"{col}_transition"] = found
        return rows

    return analyse


def with_lengths(n_pairs: Sequence[int], n: int | None = None):
    """An analysis: the sweep summary plus IC accuracy and the query row's entropy and N_eff at
    each length (``ic_acc_n{N}``, ``entropy_n{N}``, ``neff_n{N}``; :func:`evaluate_lengths`);
    a tier's ``params["n_pairs"]`` replaces the lengths."""

    def analyse(experiment: Experiment, tier: str, dirs: Sequence[Path]) -> pd.DataFrame:
        from interp.analysis.length import evaluate_lengths

        rows = sweep_rows(experiment, tier, dirs)
        names = [s.name for s in experiment.tiers[tier].sweeps]
        lengths = experiment.tiers[tier].params.get("n_pairs", n_pairs)
        extra: dict[str, list] = {}
        for sweep, point in zip(rows["sweep"], rows["point"]):
            df = evaluate_lengths(dirs[names.index(sweep)] / point, lengths, n=n, sets=("ic",))
            for _, r in df.iterrows():
                k = int(r["n_pairs"])
                for src, dst in (
                    ("ic_acc", "ic_acc"),
                    ("l2_query_entropy", "entropy"),
                    ("l2_query_neff", "neff"),
                ):
                    extra.setdefault(f"{dst}_n{k}", []).append(
                        float(r[src]) if src in df else math.nan
                    )
        for k, v in extra.items():
            rows[k] = v
        return rows

    return analyse


def std_columns(*fields: str, extra: Sequence = ()) -> tuple:
    """The usual table: sweep, the given config fields, seed, steps, the transition of IC
    accuracy, the plateau, the final accuracies, then ``extra`` columns."""
    from interp.experiments.core import Column

    return (
        Column(key="sweep", header="sweep"),
        *(Column(key=f, header=f, fmt="{:g}") for f in fields),
        Column(key="seed", header="seed", fmt="{:.0f}"),
        Column(key="steps", header="steps", fmt="{:.0f}"),
        Column(key="transition_step", header="transition (IC acc)", fmt="{:.0f}"),
        Column(key="transition_width", header="10-90% width", fmt="{:.0f}"),
        Column(key="plateau_measured", header="plateau IC acc", fmt="{:.3f}"),
        Column(key="ic_acc", header="final IC", fmt="{:.3f}"),
        Column(key="ic2_acc", header="final IC2", fmt="{:.3f}"),
        Column(key="iw_acc", header="final IW", fmt="{:.3f}"),
        *extra,
    )


def line_figure(
    rows: pd.DataFrame,
    x: str,
    ys: Sequence[str],
    *,
    title: str,
    by: str | None = None,
    where: dict | None = None,
    log_x: bool = False,
):
    """A figure of the rows: each of ``ys`` against ``x`` (one line per value of ``by``), named by
    the measures' labels."""
    import plotly.graph_objects as go

    from interp.viz.plots import METRIC_LABELS

    sel = select(rows, **(where or {}))
    fig = go.Figure()
    groups = sel.groupby(by, sort=False) if by else [(None, sel)]
    for key, g in groups:
        g = g.assign(_x=pd.to_numeric(g[x], errors="coerce")).sort_values("_x")
        for y in ys:
            label = METRIC_LABELS.get(y, y)
            # a bare number (a seed) is named with its field; a descriptive key as it is
            said = f"{by} {key}" if str(key).replace(".", "", 1).isdigit() else str(key)
            name = label if key is None else (said if len(ys) == 1 else f"{label}, {said}")
            vals = pd.to_numeric(g[y], errors="coerce")
            fig.add_trace(go.Scatter(x=g["_x"], y=vals, mode="lines+markers", name=name))
    fig.update_layout(title=title, width=700, height=420, template="plotly_white")
    fig.update_xaxes(title=x, type="log" if log_x else "linear")
    return fig


def heatmap_figure(
    rows: pd.DataFrame, x: str, y: str, zs: Sequence[str], *, title: str, where: dict | None = None
):
    """Heatmaps of ``zs`` over the grid ``x`` by ``y`` (side by side)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from interp.viz.plots import METRIC_LABELS

    sel = select(rows, **(where or {}))
    fig = make_subplots(rows=1, cols=len(zs), subplot_titles=[METRIC_LABELS.get(z, z) for z in zs])
    for i, z in enumerate(zs):
        grid = sel.pivot_table(index=y, columns=x, values=z, aggfunc="mean")
        fig.add_trace(
            go.Heatmap(
                z=grid.to_numpy(),
                x=[str(c) for c in grid.columns],
                y=[str(r) for r in grid.index],
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                showscale=i == len(zs) - 1,
                texttemplate="%{z:.2f}",
            ),
            row=1,
            col=i + 1,
        )
        fig.update_xaxes(title=x, row=1, col=i + 1)
        fig.update_yaxes(title=y, row=1, col=i + 1)
    fig.update_layout(title=title, width=900, height=420, template="plotly_white")
    return fig
