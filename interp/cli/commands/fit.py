"""``induction-cliff fit``: a dynamics model fitted to runs or CSV curves, and its forecast."""

from __future__ import annotations

from pathlib import Path

NAME = "fit"
HELP = (
    "fit a dynamics model to runs or CSV curves and forecast the transition (writes "
    "RUN_DIR/fit.json or CURVE.fit.json; with --fraction or --until, forecast.json or "
    "CURVE.forecast.json)"
)
EPILOG = """\
examples:
  induction-cliff fit runs/fig3-s1                      # writes runs/fig3-s1/fit.json
  induction-cliff fit runs/fig3-s1 --fraction 0.8 --figure forecast.png   # forecast.json
  induction-cliff fit curve.csv --column loss --target ic_loss --set L=64
"""


def add_arguments(p) -> None:
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="run directory or CSV with a step column"
    )
    p.add_argument("--model", default="nested-logit", help="a registered dynamics model")
    p.add_argument("--column", default="ic_loss", help="the curve to fit")
    p.add_argument(
        "--target", default=None, help="the model's measure the column stands for (default: same)"
    )
    p.add_argument("--aux", action="append", metavar="COLUMN", help="fit jointly (repeatable)")
    p.add_argument(
        "--until", default=None, metavar="STEP", help="fit only steps <= STEP (default: all)"
    )
    p.add_argument(
        "--fraction",
        default=None,
        metavar="F",
        help="fit only the first F of the plateau seen on the whole curve (0 < F <= 1)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="L=..|N=..|B=..",
        help="task of a CSV curve (repeatable; default: the paper's)",
    )
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="a model option")
    p.add_argument("--n-boot", default="50", help="bootstrap replicates of the interval")
    p.add_argument(
        "--json",
        default=None,
        metavar="PATH",
        help="where to write the result (default: RUN_DIR/fit.json or CURVE.fit.json for the "
        "whole curve; RUN_DIR/forecast.json or CURVE.forecast.json with --fraction or --until, "
        "so that a forecast never replaces the fit that figures and report draw)",
    )
    p.add_argument(
        "--optimizer",
        choices=("sgd", "adam"),
        default=None,
        help="for a CSV: the optimiser that trained it, which picks the forecast's calibration "
        "(default sgd, the paper's; a run directory's comes from its config)",
    )
    p.add_argument(
        "--method",
        choices=("auto", "template", "progress"),
        default="auto",
        help="how a plateau is forecast: progress (the growth of the induction head's attention, "
        "--progress-column; plain SGD only), template (the calibrated nested-logit template fit of "
        "the loss curve) or auto (progress where it can forecast, else template)",
    )
    p.add_argument(
        "--progress-column",
        default="tila2",
        metavar="COLUMN",
        help="the progress measure of --method progress/auto",
    )
    p.add_argument(
        "--figure",
        default=None,
        metavar="PATH",
        help="also draw the forecast (.png, .pdf, .svg or .html): the curve seen, a fan of "
        "continuations, the 80%% interval and, where the run went on, what it did",
    )


def _parse_option(value: str):
    """A model option's value: true/false/none, a number, a comma-separated tuple, or text."""
    if "," in value:
        return tuple(_parse_option(v.strip()) for v in value.split(",") if v.strip())
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (abs(value) >= 1e5 or 0 < abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:.4g}" if abs(value) < 100 else f"{value:.0f}"


def _print_fit(result: dict, src) -> None:
    from interp.viz.vocabulary import observed_name

    task = " ".join(f"{k}={v:g}" for k, v in result["task"].items())
    print(
        f"{src.source}: model {result['model']}, column {result['column']}, task {task} "
        f"({src.task_note})"
    )
    width = max(12, *(len(k) for k in result["params"]))
    print(f"  {'parameter':<{width}s} {'value':>12s} {'stderr':>12s}")
    pinned = result.get("pinned") or {}
    for name, value in result["params"].items():
        se = result["stderr"].get(name)
        mark = f"  at its {pinned[name]} bound: not estimated" if name in pinned else ""
        print(f"  {name:<{width}s} {_fmt(value):>12s} {_fmt(se):>12s}{mark}")
    print(
        f"  R^2 {_fmt(result['r2'])} on {result['n_points_fitted']} points up to step "
        f"{result['fitted_until']:g} (whole curve: R^2 {_fmt(result['r2_all'])})"
    )
    # one name per number (interp.viz.vocabulary): a fit to the whole curve is not a forecast
    print(f"  {_forecast_line(result)}")
    warning = _warning_line(result, src)
    if warning:
        print(f"  {warning}")
    obs = result["observed"]
    seen = _fmt(obs["transition_step"]) if obs["transitioned"] else f"none ({obs['reason']})"
    print(f"  {observed_name(result['column'])} ({obs['method']}, whole curve): {seen}")


def _warning_line(result: dict, src) -> str | None:
    """For a run fitted on part of its curve: will it jump within its budget, and the AUROC
    measured for the forecaster that says so (:mod:`phenomenology.warning`)."""
    seen, budget = result.get("fitted_until"), getattr(src, "budget", None)
    if (
        budget is None
        or result.get("until_step") is None
        or result["forecast"] != "ok"
        or seen is None
        or seen >= budget
    ):
        return None
    from phenomenology.warning import MeasuredWarning, signals_of, verdict

    return verdict(
        signals_of(result.get("forecast_from", ""), result.get("forecast_update")),
        float(result["forecast_transition_step"]),
        float(seen),
        int(budget),
        MeasuredWarning.load(),
    )


def _forecast_line(result: dict) -> str:
    """The fit's forecast, or why there is none; a fit to the whole curve is not a forecast (one
    name per number: interp.viz.vocabulary)."""
    from interp.viz.vocabulary import CLIFF, FITTED, FORECAST

    if result["forecast"] != "ok":
        return f"{FORECAST}: {result['forecast']}"
    low, high = result["forecast_interval"]
    step = _fmt(result["forecast_transition_step"])
    if result.get("until_step") is None and result.get("forecast_from") == "fitted model":
        head = f"{FITTED} step {step} (the model fitted to the whole curve, not a forecast)"
    else:
        of = f" of the {CLIFF}" if result["column"] == "ic_loss" else ""
        head = f"{FORECAST}{of}: step {step}"
    return f"{head}, interval [{_fmt(low)}, {_fmt(high)}] ({result['forecast_method']})"


def forecast_path(fit_path: Path) -> Path:
    """Where a fit to part of a curve (``--fraction``, ``--until``) goes by default:
    ``forecast.json`` beside a run's ``fit.json``, ``CURVE.forecast.json`` beside a CSV's
    ``CURVE.fit.json``. The whole-curve fit stays where it is: ``figures`` and ``report`` draw it
    (docs/run-format.md)."""
    return fit_path.with_name(fit_path.name.removesuffix("fit.json") + "forecast.json")


def _check_arguments(args):
    """(until, fraction, n_boot, options), every option checked before any file is read."""
    from interp.train.overrides import parse_overrides
    from phenomenology.models import get_model
    from phenomenology.sources import parse_number

    if args.until is not None and args.fraction is not None:
        raise ValueError("give --until or --fraction, not both")
    until = parse_number("--until", args.until)
    fraction = parse_number("--fraction", args.fraction)
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"--fraction={args.fraction} must be in (0, 1]")
    n_boot = parse_number("--n-boot", args.n_boot, integer=True)
    from interp.io.budget import MAX_BOOTSTRAP, check_count

    check_count("--n-boot", n_boot, 0, MAX_BOOTSTRAP)
    if args.json:
        _check_json_arg(args)
    get_model(args.model)  # an unknown --model fails here, naming the registered ones
    options = {k: _parse_option(v) for k, v in parse_overrides(args.option or []).items()}
    if args.figure:
        _check_figure_args(args, until, fraction)
    return until, fraction, n_boot, options


def _check_json_arg(args) -> None:
    from interp.io.paths import check_output_path

    if len(args.paths) > 1:
        raise ValueError("--json names one file: give one PATH with it")
    check_output_path(args.json)  # a link (dangling or not) is refused before any work
    if not Path(args.json).resolve().parent.is_dir():
        raise ValueError(f"--json {args.json}: its folder does not exist")


def _check_figure_args(args, until, fraction) -> None:
    from interp.viz.export import FORMATS, STATIC_FORMATS, find_chromium

    fmt = Path(args.figure).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"--figure {args.figure}: name a .png, .pdf, .svg or .html file")
    _check_figure_scope(args, until, fraction)
    from interp.io.paths import check_output_path

    check_output_path(args.figure)  # a link (dangling or not) is refused before any work
    if not Path(args.figure).resolve().parent.is_dir():
        raise ValueError(f"--figure {args.figure}: its folder does not exist")
    if fmt in STATIC_FORMATS and find_chromium() is None:
        raise ValueError(f"--figure {args.figure}: .{fmt} needs chromium; .html works without it")


def _check_figure_scope(args, until, fraction) -> None:
    """--figure draws one nested-logit forecast of an IC-loss curve from part of it."""
    if len(args.paths) > 1:
        raise ValueError("--figure draws one forecast: give one PATH with it")
    if until is None and fraction is None:
        raise ValueError("--figure needs --until or --fraction (the part of the curve seen)")
    if (args.target or args.column) != "ic_loss" or args.model != "nested-logit" or args.aux:
        raise ValueError(
            "--figure draws the forecast of an ic_loss curve by the nested-logit model"
        )


def _write_forecast_figure(args, src, result: dict) -> None:
    from interp.viz.dynamics_plots import forecast_figure
    from interp.viz.export import export_figure
    from phenomenology.forecast import Forecast
    from phenomenology.sources import display_source

    curve = src.curve.rename(columns={result["column"]: "ic_loss"})
    combined = None
    if result.get("forecast_from") == "combined":
        low, high = result["forecast_interval"]
        combined = Forecast(result["forecast_transition_step"], low, high, result["fitted_until"])
    fig = forecast_figure(
        curve,
        task=src.task,
        until=result["until_step"],
        observed_step=result["observed"]["transition_step"],
        note=display_source(src.source),
        optimizer=src.optimizer,
        method=result.get("forecast_from", "template"),
        progress_column=args.progress_column,
        forecast=combined,
    )
    out = Path(args.figure)
    written = export_figure(fig, out.with_suffix(""), (out.suffix.lstrip(".").lower(),), csv=False)
    print(f"wrote {written[0]}")


def run(args) -> int:
    from interp.train.overrides import parse_overrides
    from phenomenology.sources import open_fit_sources

    until, fraction, n_boot, options = _check_arguments(args)
    sources = open_fit_sources(
        args.paths,
        task_set=parse_overrides(args.set or []),
        optimizer=args.optimizer,
        json_out=args.json,
        model=args.model,
        column=args.column,
        target=args.target,
        aux=tuple(args.aux or ()),
        options=options,
        method=args.method,
        progress_column=args.progress_column,
    )
    if not args.json and (until is not None or fraction is not None):
        for src in sources:
            src.out = forecast_path(Path(src.out))
    from interp.io.outputs import writing_into

    outs = [src.out for src in sources] + ([args.figure] if args.figure else [])
    with writing_into(outs):  # the runs written into are locked until the last write
        _fit_all(args, sources, until, fraction, options, n_boot)
    return 0


def _fit_all(args, sources, until, fraction, options, n_boot) -> None:
    from interp.io.atomic import write_json_atomic
    from phenomenology.fit import fit_curve

    for src in sources:
        result = fit_curve(
            src.curve,
            task=src.task,
            model=args.model,
            column=args.column,
            target=args.target,
            aux=tuple(args.aux or ()),
            until=until,
            fraction=fraction,
            options=options,
            n_boot=n_boot,
            source=src.source,
            optimizer=src.optimizer,
            method=args.method,
            progress_column=args.progress_column,
            prior=src.prior,
            calibration=src.calibration,
        )
        if src.run_dir is not None:
            result["run_dir"] = src.run_dir
        write_json_atomic(Path(src.out), result)
        _print_fit(result, src)
        print(f"wrote {src.out}")
        if args.figure:
            _write_forecast_figure(args, src, result)
