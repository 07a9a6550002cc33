"""Declared experiments: what one is, how it runs, and how its page is rendered from its data.

An :class:`Experiment` is declared once, in a module of its own in this package: its question, the
sweeps of each tier (``quick``: a minute or less on 2 cores, run in the tests; ``full``: the claim),
the analysis that turns its runs into rows, the columns its page shows, the paper's values beside
them, its deviations from the paper and the tolerances of the quick tier's key numbers.

:func:`reproduce` trains what is missing (through :func:`interp.experiments.sweep.run_sweep`, which
skips finished runs and resumes interrupted ones), analyses, writes ``NAME.csv`` (one row per run:
config, seed, the numbers the page reports, and where each row comes from) and renders ``NAME.md``
from that CSV alone (:func:`render_page`), so that a page can always be rebuilt from its committed
data and nothing on it is typed by hand. Rendering is deterministic: the date, commit, wall time and
machine of a result are fields of its rows, never read at render time.

Every row carries its provenance in the :data:`META` columns: ``source`` (``run``: produced by
:func:`reproduce`; ``transcribed``: copied from an earlier measurement whose runs are gone, with the
command and the commit that produced it), ``tier``, ``commit``, ``format_version`` (the run format
and defaults version the runs were trained under), ``date``, ``wall_s``, ``machine`` and
``command``.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = [
    "Check",
    "Column",
    "Experiment",
    "META",
    "PaperValue",
    "Sweep",
    "Tier",
    "TIERS",
    "check_rows",
    "matches",
    "page_text",
    "read_rows",
    "render_page",
    "reproduce",
    "sweep_rows",
]

TIERS = ("quick", "full")
META = ("source", "tier", "commit", "format_version", "date", "wall_s", "machine", "command")
SOURCES = ("run", "transcribed")
RUN_LOG = ("point", "wall_s", "commit", "date", "machine")
REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "docs" / "results"


def current_format_version() -> int:
    """The run format (and defaults) version this toolkit writes, read from the code."""
    from interp.io.rundir import FORMAT_VERSION

    return int(FORMAT_VERSION)


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """One sweep of a tier: a preset, a grid, overrides for every point and seeds, as
    ``induction-cliff sweep`` takes them. ``name`` names its folder (``TIER-NAME``)."""

    preset: str
    grid: Mapping[str, Sequence] = field(default_factory=dict)
    overrides: Mapping[str, object] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    name: str = "main"

    def spec(self):
        from interp.experiments.sweep import SweepSpec

        return SweepSpec.from_preset(
            self.preset,
            {k: list(v) for k, v in self.grid.items()},
            {k: str(v) for k, v in self.overrides.items()},
            self.seeds,
        )

    def command(self) -> str:
        """The ``induction-cliff sweep`` line that trains the same runs."""
        parts = ["induction-cliff", "sweep", "--preset", self.preset]
        for k, v in self.grid.items():
            parts += ["--grid", f"{k}={','.join(str(x) for x in v)}"]
        for k, v in self.overrides.items():
            parts += ["--set", f"{k}={v}"]
        parts += ["--seeds", ",".join(str(s) for s in self.seeds)]
        return shlex.join(parts)


@dataclass(frozen=True, kw_only=True)
class Tier:
    """The runs of one tier and what they cost.

    Attributes:
        sweeps: the sweeps that train its runs (none: the analysis needs no training).
        cost: the estimated cost in words ("about 20 s on 2 cores").
        cost_s: the same in seconds, for ``list experiments``.
        note: the budget and every deviation of this tier beyond the experiment's own.
        params: settings of the analysis for this tier (what the experiment's analysis reads).
        hidden_bias: the classifier's hidden-bias form of a tier that trains plain-SGD runs of
            its own (no sweeps); sweeps pin theirs in their overrides or grid.
    """

    sweeps: tuple[Sweep, ...] = ()
    cost: str = ""
    cost_s: float = math.nan
    note: str = ""
    params: Mapping[str, object] = field(default_factory=dict)
    hidden_bias: str | None = None


@dataclass(frozen=True, kw_only=True)
class Column:
    """A column of the page's table: the CSV column ``key``, its header and number format."""

    key: str
    header: str
    fmt: str = "{:.3f}"

    def format(self, value) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, bool) or str(value) in ("True", "False"):
            return "yes" if str(value) == "True" else "no"
        if isinstance(value, int | float):
            try:
                return self.fmt.format(value)
            except (ValueError, TypeError):
                return str(value)
        text = str(value)
        return text.replace("|", "\\|") if text else "-"


@dataclass(frozen=True, kw_only=True)
class PaperValue:
    """A value the paper states, beside what the rows give.

    Attributes:
        quantity: what is compared, in words.
        paper: the paper's value, as the paper states it.
        source: where the paper states it (figure or section).
        here: rows -> the value here, as text (computed from the page's data).
    """

    quantity: str
    paper: str
    source: str
    here: Callable[[pd.DataFrame], str]


@dataclass(frozen=True, kw_only=True)
class Check:
    """A key number of the quick tier and its tolerance.

    ``column`` of the rows selected by ``where`` (column -> value; all rows if empty), reduced by
    ``reduce`` (``min``, ``max``, ``mean``, ``all``/``any`` for a boolean column, ``count`` of
    non-missing values) must lie in ``[low, high]`` (a bound of None is open).
    """

    what: str
    column: str
    low: float | None = None
    high: float | None = None
    where: Mapping[str, object] = field(default_factory=dict)
    reduce: str = "min"

    def value(self, rows: pd.DataFrame) -> float:
        sel = rows
        for k, v in self.where.items():
            sel = sel[matches(sel[k], v)] if k in sel else sel.iloc[0:0]
        col = pd.to_numeric(sel[self.column], errors="coerce") if len(sel) else pd.Series([], float)
        if self.reduce == "count":
            return float(col.notna().sum())
        if self.reduce in ("all", "any"):
            truth = sel[self.column].astype(str).str.lower().isin(["true", "1", "1.0"])
            return float(getattr(truth, self.reduce)()) if len(sel) else math.nan
        return float(getattr(col, self.reduce)()) if col.notna().any() else math.nan

    def holds(self, rows: pd.DataFrame) -> tuple[bool, str]:
        v = self.value(rows)
        ok = not math.isnan(v)
        ok = ok and (self.low is None or v >= self.low) and (self.high is None or v <= self.high)
        bounds = f"[{'-inf' if self.low is None else self.low}, "
        bounds += f"{'inf' if self.high is None else self.high}]"
        return ok, f"{self.what}: {self.reduce} {self.column} = {v:.4g}, tolerance {bounds}"


def matches(column: pd.Series, value) -> pd.Series:
    """Which cells of a CSV column equal ``value``: as numbers where both are numbers (8 equals
    8.0), else as text ("N", "none")."""
    text = column.astype(str) == str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return text
    return text | (pd.to_numeric(column, errors="coerce") == number)


def sweep_rows(experiment: Experiment, tier: str, sweep_dirs: Sequence[Path]) -> pd.DataFrame:
    """The default analysis: one row per run of the sweeps (:func:`summarize_sweep`: grid values,
    seed, final IC / IC2 / IW accuracy, the transition of IC accuracy), tagged with its sweep."""
    from interp.experiments.sweep import summarize_sweep

    frames = []
    for sweep, d in zip(experiment.tiers[tier].sweeps, sweep_dirs):
        s = summarize_sweep(d)
        s.insert(0, "sweep", sweep.name)
        for k, v in sweep.overrides.items():  # the fixed fields, beside the swept ones
            if k not in s.columns and k != "num_threads":
                s[k] = v
        s["transitioned"] = s["transition_step"].notna()
        frames.append(s)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """A declared experiment (see the module docstring).

    Attributes:
        name: the registry name (``induction-cliff reproduce NAME``; the page ``NAME.md``).
        title: the page's title.
        question: the question it answers, in one sentence.
        tiers: ``quick`` and ``full`` (a :class:`Tier` each).
        columns: the table's columns.
        analyse: ``(experiment, tier, sweep folders) -> rows`` (default :func:`sweep_rows`).
        sort: CSV columns the rows are sorted by.
        paper: the paper's values, with the figure or section that states them.
        deviations: every deviation from the paper's settings (both tiers).
        checks: the quick tier's key numbers and their tolerances.
        reading: what the data show, in words without numbers (the numbers are in the table).
        headline: rows -> the result in one line (the experiments table of the README).
        figure: rows -> a plotly figure drawn beside the page (``NAME.png``), or None.
        notes: further lines of the page, rows -> markdown (computed from the data).
        page: ``(experiment, rows) -> markdown``: a renderer of its own instead of
            :func:`render_page` (for data produced elsewhere, in a form of their own); with
            ``companions``, ``(experiment, rows, companions) -> markdown``.
        meta: the provenance columns its CSV must have (default :data:`META`).
        produce: ``(experiment, tier, runs folder, workers, log, out) -> (rows, companions)``:
            trains (``out``: the folder of the committed CSVs, whose runs it may keep instead of
            training them again) and collects the data in a form of its own, instead of the
            tiers' sweeps and ``analyse`` (rows without the provenance columns ``source``,
            ``tier`` and ``command``, which :func:`reproduce` adds; ``companions``: file name ->
            frame).
        companions: further CSVs beside ``NAME.csv`` that ``produce`` writes and the page
            reads (``--render-only`` reads them back).
    """

    name: str
    title: str
    question: str
    tiers: Mapping[str, Tier]
    columns: tuple[Column, ...]
    analyse: Callable[[Experiment, str, Sequence[Path]], pd.DataFrame] = sweep_rows
    sort: tuple[str, ...] = ()
    paper: tuple[PaperValue, ...] = ()
    deviations: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    reading: str = ""
    headline: Callable[[pd.DataFrame], str] | None = None
    figure: Callable[[pd.DataFrame], object] | None = None
    notes: Callable[[pd.DataFrame], str] | None = None
    page: Callable[..., str] | None = None
    meta: tuple[str, ...] = META
    produce: Callable[..., tuple[pd.DataFrame, dict[str, pd.DataFrame]]] | None = None
    companions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [t for t in TIERS if t not in self.tiers]
        if missing:
            raise ValueError(f"experiment {self.name!r}: tiers {missing} are missing")
        if not self.question.strip().endswith("?"):
            raise ValueError(f"experiment {self.name!r}: the question must end with '?'")


# ---------------------------------------------------------------------------------------------
# rows: reading, provenance, checks


def read_table(path: Path) -> pd.DataFrame:
    """A CSV of an experiment's data; one that does not parse is refused naming the file."""
    from interp.io.inputs import read_csv

    return read_csv(path, keep_default_na=True)  # limits checked first; damaged: one line


def read_rows(path: str | os.PathLike, required: Sequence[str] = META) -> pd.DataFrame:
    """The rows of an experiment's CSV, with its provenance columns checked.

    Raises:
        ValueError: a provenance column is missing, or a row's ``source`` or ``tier`` is not
            one of the allowed values (the message names the file, the column and the row).
    """
    path = Path(path)
    rows = read_table(path)
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise ValueError(
            f"{path}: columns {missing} are missing (every row needs {list(required)})"
        )
    for col, allowed in (("source", SOURCES), ("tier", TIERS)):
        if col not in rows.columns:
            continue
        bad = rows.index[~rows[col].isin(allowed)].tolist()
        if bad:
            raise ValueError(
                f"{path} row {bad[0] + 2} field {col}={rows[col][bad[0]]!r} is invalid: allowed "
                f"values are {list(allowed)}"
            )
    fv = pd.to_numeric(rows.get("format_version", pd.Series(dtype=float)), errors="coerce")
    if fv.isna().any():
        bad = int(fv.index[fv.isna()][0])
        raise ValueError(f"{path} row {bad + 2} field format_version is missing or not a number")
    return rows


def check_rows(experiment: Experiment, rows: pd.DataFrame) -> list[tuple[bool, str]]:
    """Every check of ``experiment`` on ``rows``: (holds, the line that says so)."""
    return [c.holds(rows) for c in experiment.checks]


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        commit = out.stdout.strip()
        if not commit:
            return "unknown"
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return f"{commit}+changes" if dirty else commit
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _machine(device: str = "cpu") -> str:
    cpus = os.cpu_count() or 0
    where = f"{cpus} CPUs ({platform.machine()})"
    if device.startswith("cuda"):
        try:
            import torch

            where += f", {torch.cuda.get_device_name(0)}"
        except Exception:  # noqa: BLE001 - the name is decoration
            where += ", cuda"
    return where


# ---------------------------------------------------------------------------------------------
# rendering


def _table(columns: Sequence[Column], rows: pd.DataFrame) -> list[str]:
    lines = [
        "| " + " | ".join(c.header for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    for _, r in rows.iterrows():
        cells = [_source_cell(r) if c.key == "source" else c.format(r.get(c.key)) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def needs_gpu(row: pd.Series) -> bool:
    """Whether a row was measured on a GPU (its ``machine`` names one)."""
    machine = str(row.get("machine", ""))
    return "NVIDIA" in machine or "GPU" in machine


def _source_cell(row: pd.Series) -> str:
    """A row's ``source`` as the table says it: a transcribed row says it was not regenerated,
    and one measured on a GPU that it cannot be without one."""
    source = str(row.get("source", ""))
    if source != "transcribed":
        return source or "-"
    if needs_gpu(row):
        return "transcribed, not regenerated: needs a GPU"
    return "transcribed, not regenerated"


def _plain(value) -> object:
    """A CSV cell as a Python value (numpy scalars to int/float, whole floats to int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def _provenance(rows: pd.DataFrame, experiment: Experiment | None = None) -> list[str]:
    from interp.experiments.pins import hidden_bias_line

    n = len(rows)
    tiers = sorted(set(rows["tier"]), key=TIERS.index)
    sources = {s: int((rows["source"] == s).sum()) for s in SOURCES}
    lines = [f"- **Tier:** {', '.join(tiers)} ({n} rows)."]
    if sources["transcribed"]:
        lines.append(
            f"- **Transcribed:** {sources['transcribed']} of {n} rows were copied from an earlier "
            "measurement whose run directories are no longer kept; each row names the command and "
            "the commit that produced it. They are not regenerated by `--render-only`."
        )
    if sources["run"]:
        lines.append(
            f"- **Produced by `induction-cliff reproduce`:** {sources['run']} of {n} rows."
        )
    commits = list(dict.fromkeys(str(c) for c in rows["commit"]))
    lines.append(f"- **Commit:** {', '.join(f'`{c}`' for c in commits)}.")
    versions = sorted({int(v) for v in rows["format_version"]})
    lines.append(
        f"- **Run format (defaults) version:** {', '.join(map(str, versions))} "
        f"(current: {current_format_version()})."
    )
    dates = sorted({str(d) for d in rows["date"] if isinstance(d, str) and d})
    if dates:
        span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
        lines.append(f"- **Date of the runs:** {span}.")
    lines += _wall_line(rows)
    machines = list(dict.fromkeys(str(m) for m in rows["machine"] if isinstance(m, str) and m))
    if machines:
        lines.append(f"- **Machine:** {'; '.join(machines)}.")
    return lines + hidden_bias_line(experiment, rows)


def _wall_line(rows: pd.DataFrame) -> list[str]:
    """The page's wall time: a run that gives several rows (one per rescaling, say) counts once,
    so where rows name their run (``sweep`` and ``point``) the time is summed over runs."""
    wall = pd.to_numeric(rows["wall_s"], errors="coerce")
    if not wall.notna().any():
        return []
    what = "rows"
    if {"sweep", "point"} <= set(rows.columns):
        runs = rows.assign(wall_s=wall).drop_duplicates(["sweep", "point"])
        wall, what = runs["wall_s"], "runs"
    return [
        f"- **Wall time:** {_duration(float(wall.sum()))} in all "
        f"({int(wall.notna().sum())} of {len(wall)} {what} timed)."
    ]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render_page(experiment: Experiment, rows: pd.DataFrame) -> str:
    """The page of ``experiment`` from its rows (as read back from its CSV): markdown text,
    the same for the same rows."""
    e = experiment
    lines: list[str] = []
    current = current_format_version()
    old = rows[pd.to_numeric(rows["format_version"]) < current]
    if len(old):
        versions = ", ".join(str(v) for v in sorted({int(v) for v in old["format_version"]}))
        lines += [
            f"> **Older defaults:** {len(old)} of {len(rows)} rows were produced under run format "
            f"version {versions}; the current defaults are version {current} "
            "([run-format.md](../run-format.md)). Rerun the experiment to update them.",
            "",
        ]
    lines += [f"# {e.title}", "", f"**Question.** {e.question}", ""]
    lines += ["## Data", "", *_provenance(rows, e), ""]
    lines += ["## Result", "", *_table(e.columns, rows), ""]
    if e.figure is not None:
        lines += [f"![{e.title}]({e.name}.png)", ""]
    if e.notes is not None:
        text = e.notes(rows).strip()
        if text:
            lines += [text, ""]
    if e.reading:
        lines += [f"**Reading.** {e.reading}", ""]
    if e.paper:
        lines += [
            "## The paper",
            "",
            "| quantity | paper | where | here |",
            "| --- | --- | --- | --- |",
        ]
        for p in e.paper:
            lines.append(f"| {p.quantity} | {p.paper} | {p.source} | {p.here(rows)} |")
        lines.append("")
    lines += ["## Deviations from the paper", ""]
    lines += [f"- {d}" for d in e.deviations] or ["- none"]
    lines.append("")
    lines += ["## Tiers", ""]
    for t in TIERS:
        tier = e.tiers[t]
        what = f"`{t}` ({tier.cost})" if tier.cost else f"`{t}`"
        lines.append(f"- {what}: {tier.note}".rstrip())
        lines += [f"  - `{s.command()}`" for s in tier.sweeps]
    lines += checks_lines(e)
    lines += reproduce_lines(
        e,
        [
            f"induction-cliff reproduce {e.name} --tier {t}"
            for t in sorted(set(rows["tier"]), key=TIERS.index)
        ]
        + [f"induction-cliff reproduce {e.name} --render-only   # this page from {e.name}.csv"],
        rows,
    )
    return "\n".join(lines)


def checks_lines(e: Experiment) -> list[str]:
    """The page's list of the quick tier's key numbers that the tests check (none: no lines)."""
    if not e.checks:
        return []
    lines = ["", "Key numbers of the `quick` tier, checked by the tests:", ""]
    for c in e.checks:
        lo = "-inf" if c.low is None else f"{c.low:g}"
        hi = "inf" if c.high is None else f"{c.high:g}"
        lines.append(f"- {c.what}: {c.reduce} of `{c.column}` in [{lo}, {hi}]")
    return lines


def reproduce_lines(e: Experiment, commands: Sequence[str], rows: pd.DataFrame) -> list[str]:
    """The page's closing section: the ``commands`` that rebuild it, then the distinct commands
    recorded in the rows' ``command`` column (where the data came from)."""
    lines = ["", "## Reproduce", "", "```bash", *commands, "```", ""]
    made_by = list(dict.fromkeys(str(c) for c in rows["command"] if isinstance(c, str) and c))
    if made_by:
        lines += ["The rows' data came from:", "", *[f"- `{c}`" for c in made_by], ""]
    return lines


def write_figure(experiment: Experiment, rows: pd.DataFrame, out: Path) -> list[Path]:
    """Draw the experiment's figure from its rows (``NAME.png``; HTML without Chromium)."""
    if experiment.figure is None:
        return []
    from interp.viz.export import export_figure, find_chromium

    fig = experiment.figure(rows)
    formats = ("png",) if find_chromium() else ("html",)
    return export_figure(fig, out / experiment.name, formats, csv=False)


def page_text(experiment: Experiment, out: str | os.PathLike) -> str:
    """The page of ``experiment`` rendered from ``out/NAME.csv`` (and its companions) alone."""
    out = Path(out)
    csv = out / f"{experiment.name}.csv"
    if not csv.exists():
        raise ValueError(f"{csv} is missing: run `induction-cliff reproduce {experiment.name}`")
    rows = read_rows(csv, experiment.meta)
    if not experiment.companions:
        return (experiment.page or render_page)(experiment, rows)
    extra = {}
    for name in experiment.companions:
        if not (out / name).exists():
            raise ValueError(
                f"{out / name} is missing: run `induction-cliff reproduce {experiment.name}`"
            )
        from interp.io.inputs import read_csv

        # a table with nothing in it (too little data) reads as an empty one
        extra[name] = read_csv(out / name, keep_default_na=True, empty=pd.DataFrame())
    if experiment.page is None:  # companions kept beside the rows, the page from the rows alone
        return render_page(experiment, rows)
    return experiment.page(experiment, rows, extra)


def render(experiment: Experiment, out: str | os.PathLike, *, figures: bool = True) -> list[Path]:
    """Rebuild ``NAME.md`` (and its figure) in ``out`` from ``out/NAME.csv`` alone."""
    from interp.io.atomic import write_text_atomic

    out = Path(out)
    text = page_text(experiment, out)
    rows = read_rows(out / f"{experiment.name}.csv", experiment.meta)
    page = out / f"{experiment.name}.md"
    write_text_atomic(page, text)
    written = [page]
    if figures:
        written += write_figure(experiment, rows, out)
    return written


# ---------------------------------------------------------------------------------------------
# reproduce


def reproduce(
    experiment: Experiment,
    *,
    tier: str = "quick",
    out: str | os.PathLike,
    runs: str | os.PathLike = "runs/experiments",
    backend: str = "process",
    workers: int | None = None,
    figures: bool = True,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> tuple[pd.DataFrame, list[Path]]:
    """Train what is missing of ``tier``, analyse, write ``out/NAME.csv`` and render the page.

    Runs go to ``runs/NAME/TIER-SWEEP/`` (sweep folders: a second call skips finished runs and
    resumes interrupted ones). Rows the analysis gives get the provenance columns: a run's commit,
    date, machine and wall time are those of the call that trained it (kept in
    ``runs/NAME/TIER-SWEEP.runs.csv``), its format version that of its ``config.json``.

    Returns:
        The rows (as written) and the files written.
    """
    from interp.io.atomic import write_text_atomic

    if tier not in TIERS:
        raise ValueError(f"--tier {tier!r} is invalid: allowed values are {list(TIERS)}")
    if experiment.produce is not None:
        return _reproduce_own(
            experiment, tier, Path(out), Path(runs), workers, figures, command, log
        )
    t = experiment.tiers[tier]
    base = Path(runs) / experiment.name
    dirs, trained_by = [], {}
    for sweep in t.sweeps:
        sweep.spec().points()  # every point of every sweep validated before anything trains
    device = next((str(s.overrides["device"]) for s in t.sweeps if "device" in s.overrides), "cpu")
    now = {
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": _machine(device),
    }
    for sweep in t.sweeps:
        d, known = _train_sweep(experiment, tier, sweep, now, base, backend, workers, log)
        for _, k in known.iterrows():
            trained_by[(sweep.name, k["point"])] = {c: k[c] for c in RUN_LOG if c != "point"}
        dirs.append(d)
    t0 = time.perf_counter()
    rows = experiment.analyse(experiment, tier, dirs).copy()
    analysis_wall = time.perf_counter() - t0
    names = [s.name for s in t.sweeps]
    rows = _with_provenance(rows, names, dirs, trained_by, now, analysis_wall)
    rows["source"] = "run"
    rows["tier"] = tier
    rows["command"] = command or f"induction-cliff reproduce {experiment.name} --tier {tier}"
    keys = [k for k in experiment.sort if k in rows.columns]
    if keys:  # numbers in order, words (a reference such as L=N) after them
        rows = rows.sort_values(keys, kind="stable", key=_sort_key).reset_index(drop=True)
    rows = rows[[*[c for c in rows.columns if c not in META], *META]]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"{experiment.name}.csv"
    write_text_atomic(csv, rows.to_csv(index=False))
    written = [csv, *render(experiment, out, figures=figures)]
    return read_rows(csv, experiment.meta), written


def _train_sweep(experiment, tier, sweep, now, base: Path, backend, workers, log):
    """Train (or resume) one sweep of ``tier`` into ``base/TIER-SWEEP``; returns that folder and
    its run log (``TIER-SWEEP.runs.csv``: when, where and how long each point trained), with the
    points this call trained recorded as ``now``. A point that does not finish is an error."""
    from interp.experiments.sweep import run_sweep
    from interp.io.atomic import write_text_atomic

    d = base / f"{tier}-{sweep.name}"
    log_file = base / f"{tier}-{sweep.name}.runs.csv"
    known = read_table(log_file) if log_file.exists() else pd.DataFrame(columns=RUN_LOG)
    log(f"{experiment.name} [{tier}] {sweep.command()} -> {d}")
    before = _done_points(d)
    t0 = time.perf_counter()
    summary = run_sweep(sweep.spec(), d, backend=backend, workers=workers, figures=False, log=log)
    wall = time.perf_counter() - t0
    unfinished = summary.loc[summary["status"] != "done", "point"].tolist()
    if unfinished:
        raise RuntimeError(
            f"{d}: points {unfinished} did not finish; nothing was written: rerun the "
            "same command to resume them"
        )
    trained = [p for p in summary["point"] if p not in before]
    if trained:
        fresh = pd.DataFrame([{"point": p, "wall_s": wall / len(trained), **now} for p in trained])
        known = pd.concat([known[~known["point"].isin(trained)], fresh], ignore_index=True)
        base.mkdir(parents=True, exist_ok=True)
        write_text_atomic(log_file, known.to_csv(index=False))
    return d, known


def _with_provenance(rows, names, dirs, trained_by, now, analysis_wall) -> pd.DataFrame:
    """``rows`` with ``wall_s``, ``commit``, ``date``, ``machine`` and ``format_version``: a run's
    (by its ``sweep`` and ``point``) are those of its training, which may predate this call; rows
    of no run get this call's."""
    if "point" in rows.columns and "sweep" in rows.columns:
        unknown = {"wall_s": math.nan, "commit": "not recorded", "date": "", "machine": ""}
        made = [trained_by.get((s, p), unknown) for s, p in zip(rows["sweep"], rows["point"])]
        for col in ("wall_s", "commit", "date", "machine"):
            rows[col] = [m[col] for m in made]
        rows["format_version"] = [
            _run_version(dirs[names.index(s)] / p) for s, p in zip(rows["sweep"], rows["point"])
        ]
    else:
        rows["wall_s"] = rows["wall_s"] if "wall_s" in rows else analysis_wall / max(len(rows), 1)
        for col, value in now.items():
            rows[col] = value
        rows["format_version"] = current_format_version()
    return rows


def _reproduce_own(experiment, tier, out: Path, runs: Path, workers, figures, command, log):
    """:func:`reproduce` for an experiment with a ``produce`` of its own."""
    from interp.io.atomic import write_text_atomic

    rows, companions = experiment.produce(
        experiment, tier, runs / experiment.name / tier, workers, log, out
    )
    rows = rows.copy()
    rows["source"] = "run"
    rows["tier"] = tier
    rows["command"] = command or f"induction-cliff reproduce {experiment.name} --tier {tier}"
    rows = rows[[*[c for c in rows.columns if c not in META], *[c for c in META if c in rows]]]
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"{experiment.name}.csv"
    write_text_atomic(csv, rows.to_csv(index=False))
    written = [csv]
    for name, data in companions.items():  # frames as CSV, records (a dict) as JSON
        import json

        text = (
            json.dumps(data, indent=1, sort_keys=True) + "\n"
            if isinstance(data, dict)
            else data.to_csv(index=False)
        )
        write_text_atomic(out / name, text)
        written.append(out / name)
    written += render(experiment, out, figures=figures)
    return read_rows(csv, experiment.meta), written


def _run_version(run_dir: Path) -> int:
    """The format version a run's ``config.json`` was written with (before any migration)."""
    from interp.io.inputs import read_json_object

    return int(read_json_object(run_dir / "config.json").get("format_version", 1))


def _sort_key(column: pd.Series) -> pd.Series:
    return pd.to_numeric(column, errors="coerce").fillna(math.inf)


def _done_points(d: Path) -> set[str]:
    from interp.experiments.sweep import MANIFEST, summarize_sweep

    if not (d / MANIFEST).exists():
        return set()
    try:
        s = summarize_sweep(d)
    except Exception:  # noqa: BLE001 - an unreadable sweep is run_sweep's to report
        return set()
    return set(s.loc[s["status"] == "done", "point"])
