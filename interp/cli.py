"""Command line: ``induction-cliff COMMAND`` (train, sweep, measures, fit, figures, list, ...).

Examples::

    induction-cliff train --preset demo --out runs/demo
    induction-cliff train --preset paper-fig3 --set steps=60000 --seed 1 --out runs/fig3-s1
    induction-cliff train --preset paper-fig3 --set intervention=clamp_prev_token --out runs/clamp
    induction-cliff train --resume --out runs/fig3-s1          # continue an interrupted run
    induction-cliff fit runs/fig3-s1                            # writes runs/fig3-s1/fit.json
    induction-cliff fit curve.csv --column loss --target ic_loss --set L=64
    induction-cliff figures runs/demo --out runs/demo/figures
    induction-cliff report runs/demo                            # writes runs/demo/report.html
    induction-cliff quanta runs/q --threshold 0.5               # writes runs/q/quanta.json
    induction-cliff sweep --preset fig2-kb-quick --out runs/fig2-kb   # rerun it to resume
    induction-cliff sweep --preset paper-fig1d --seeds 0-5 --out runs/fig1d --backend ray
    induction-cliff --plugin my_measure.py train --preset tiny --out runs/t   # a new measure
    induction-cliff list measures                               # also positional, models, ...
    induction-cliff import trained.pt runs/imported --preset demo   # weights trained elsewhere
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path

from interp.train.overrides import build_configs, parse_overrides

__all__ = ["main", "parse_overrides", "build_configs"]


def _resumed_configs(args, out: Path):
    """The configs to resume the run in ``out`` with: the stored ones, with ``--set`` allowed only
    on the fields a resumption may change, and ``--seed`` only if it is the stored seed."""
    from interp.io.rundir import RESUMABLE_TRAIN_FIELDS, load_run
    from interp.train.overrides import convert_value

    run = load_run(out)
    if run.kind != "induction_net":
        raise ValueError(
            f"{out} is a {run.kind} run; `induction-cliff train` resumes network runs only"
        )
    where = out / "config.json"
    if args.seed is not None and args.seed != run.train_config.seed:
        raise ValueError(
            f"--seed {args.seed} contradicts train.seed={run.train_config.seed} in {where}; a "
            "resumed run keeps its seed (choose another --out for a new seed)"
        )
    changes = {}
    stored = {
        "task": dataclasses.asdict(run.task),
        "model": run.model_config.to_dict(),
        "train": dataclasses.asdict(run.train_config),
    }
    for key, value in parse_overrides(args.set or []).items():
        group, _, name = key.rpartition(".")
        groups = [group] if group else [g for g in stored if name in stored[g]]
        if not groups or groups[0] not in stored or name not in stored[groups[0]]:
            raise ValueError(f"--set key {key!r} is unknown")
        current = stored[groups[0]][name]
        try:
            new = convert_value(value, current)
        except (ValueError, OverflowError) as err:
            raise ValueError(f"--set {key}={value!r} is invalid: {err}") from None
        if new == current:
            continue
        if groups[0] != "train" or name not in RESUMABLE_TRAIN_FIELDS:
            raise ValueError(
                f"--set {key}={value} contradicts {groups[0]}.{name}={current!r} in {where}; only "
                f"{', '.join(RESUMABLE_TRAIN_FIELDS)} may change when resuming"
            )
        changes[name] = new
    return run.task, run.model_config, dataclasses.replace(run.train_config, **changes), ""


def _cmd_train(args) -> int:
    from interp.experiments.standard import train
    from interp.io.rundir import classify, refuse_broken

    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite contradict each other: give one of them")
    if args.resume and not args.out:
        raise ValueError("--resume needs --out (the run directory to continue)")
    if args.resume and classify(args.out) == "broken":
        refuse_broken(args.out)  # never start a preset over a run whose config is unreadable
    if args.resume and args.preset is None and classify(args.out) == "run":
        # Resuming without --preset: the stored configs are the reference, never a preset's.
        task, model_cfg, train_cfg, note = _resumed_configs(args, Path(args.out))
    else:
        task, model_cfg, train_cfg, preset = build_configs(
            args.preset or "demo", parse_overrides(args.set or []), args.seed
        )
        note = preset.note
    if args.resume and args.out:
        _check_recorded_plugins(args.out)
    from interp.analysis.measures import check_reads
    from interp.model.network import InductionNet

    check_reads(InductionNet(model_cfg, seed=0))  # every measure's hooks exist, before any work
    out = Path(args.out or f"runs/{args.preset or 'demo'}-seed{train_cfg.seed}")
    print(f"run directory: {out}", file=sys.stderr)
    if note:
        print(f"preset: {note}", file=sys.stderr)
    if train_cfg.deviation_note():
        print(f"DEVIATION from the paper: {train_cfg.deviation_note()}", file=sys.stderr)
    metrics = train(
        task,
        model_cfg,
        train_cfg,
        out,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.quiet,
    )
    last = metrics.iloc[-1]
    print(
        f"done: step {int(last['step'])}  IC acc {last['ic_acc']:.3f}  IC2 acc {last['ic2_acc']:.3f}  "
        f"IW acc {last['iw_acc']:.3f}  -> {out}"
    )
    return 0


def _cmd_measures(args) -> int:
    from interp.analysis.over_training import (
        measures_over_checkpoints,
        score_terms_over_checkpoints,
    )
    from interp.io.rundir import load_run

    runs = [load_run(d) for d in args.run_dirs]  # every directory checked before any work
    for run in runs:
        df = measures_over_checkpoints(run, n=args.n)
        if args.score_terms:
            import pandas as pd

            df = pd.concat([df, score_terms_over_checkpoints(run, n=args.n)], ignore_index=True)
        path = run.write_output("checkpoint_measures.csv", df)
        print(f"wrote {path} ({len(df)} rows)")
    return 0


def _cmd_transition(args) -> int:
    from interp.analysis.transition import transition_report

    report = transition_report(args.run_dirs, measure=args.measure)  # errors: one line, by main
    print(report.to_string(index=False))
    if args.out:
        from interp.io.atomic import write_text_atomic

        write_text_atomic(args.out, report.to_csv(index=False))
        print(f"wrote {args.out}")
    return 0


def _parse_number(flag: str, value: str | None, *, integer: bool = False):
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{flag}={value!r} is not a number") from None
    if integer:
        if number != int(number):
            raise ValueError(f"{flag}={value!r} must be an integer")
        return int(number)
    return number


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


def _fit_sources(args, options: dict) -> list[dict]:
    """Every PATH of ``fit`` opened and checked (curve, task, where to write) before any fit."""
    import pandas as pd

    from phenomenology.fit import PAPER_TASK, check_curve, check_forecast_method, read_run

    task_set = parse_overrides(args.set or [])
    for key in task_set:
        if key not in PAPER_TASK:
            raise ValueError(f"--set {key}: fit takes only the task parameters L, N and B")
    sources = []
    for spec in args.paths:
        path = Path(spec)
        if path.is_dir():
            if not (path / "config.json").exists():
                raise ValueError(f"{path}: not a run directory (no config.json) and not a CSV")
            if task_set:
                raise ValueError(
                    f"--set {','.join(task_set)}: {path} is a run directory, its task comes from "
                    f"{path / 'config.json'}"
                )
            if args.optimizer is not None:
                raise ValueError(
                    f"--optimizer: {path} is a run directory, its optimiser comes from "
                    f"{path / 'config.json'}"
                )
            from interp.io.rundir import load_run

            run = load_run(path)  # opened once: its curve, task and optimiser
            curve, task = read_run(run)
            optimizer = run.train_config.optimizer
            sources.append({
                "source": str(path / "metrics.csv"), "curve": curve, "task": task,
                "task_note": f"from {path / 'config.json'}", "out": path / "fit.json",
                "run_dir": str(path), "optimizer": optimizer,
            })  # fmt: skip
        elif path.is_file():
            try:
                curve = pd.read_csv(path)
            except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else "empty file"
                raise ValueError(f"{path}: not a readable CSV ({first})") from None
            task = dict(PAPER_TASK)
            for key, value in task_set.items():
                task[key] = _parse_number(f"--set {key}", value, integer=key != "L")
            defaults = [k for k in PAPER_TASK if k not in task_set]
            note = "from --set" if not defaults else (
                f"{', '.join(defaults)}: the paper's default{'s' if len(defaults) > 1 else ''}"
                + (f"; {', '.join(task_set)} from --set" if task_set else "")
            )  # fmt: skip
            sources.append({
                "source": str(path), "curve": curve, "task": task, "task_note": note,
                "out": path.with_name(f"{path.stem}.fit.json"), "run_dir": None,
                "optimizer": args.optimizer or "sgd",
            })  # fmt: skip
        else:
            raise ValueError(f"{path}: no such run directory or CSV file")
        if args.json:
            sources[-1]["out"] = Path(args.json)
        check_curve(
            sources[-1]["curve"], task=sources[-1]["task"], model=args.model,
            column=args.column, target=args.target, aux=tuple(args.aux or ()),
            options=options,
            source=sources[-1]["source"],
        )  # fmt: skip
        check_forecast_method(
            sources[-1]["curve"], method=args.method, progress_column=args.progress_column,
            optimizer=sources[-1]["optimizer"], source=sources[-1]["source"],
        )  # fmt: skip
    return sources


def _print_fit(result: dict, source: dict) -> None:
    task = " ".join(f"{k}={v:g}" for k, v in result["task"].items())
    print(f"{source['source']}: model {result['model']}, column {result['column']}, task {task} "
          f"({source['task_note']})")  # fmt: skip
    width = max(12, *(len(k) for k in result["params"]))
    print(f"  {'parameter':<{width}s} {'value':>12s} {'stderr':>12s}")
    for name, value in result["params"].items():
        se = result["stderr"].get(name)
        print(f"  {name:<{width}s} {_fmt(value):>12s} {_fmt(se):>12s}")
    print(f"  R^2 {_fmt(result['r2'])} on {result['n_points_fitted']} points up to step "
          f"{result['fitted_until']:g} (whole curve: R^2 {_fmt(result['r2_all'])})")  # fmt: skip
    if result["forecast"] == "ok":
        low, high = result["forecast_interval"]
        print(f"  forecast_transition_step {_fmt(result['forecast_transition_step'])}, "
              f"80% interval [{_fmt(low)}, {_fmt(high)}] ({result['forecast_method']})")  # fmt: skip
    else:
        print(f"  forecast: {result['forecast']}")
    obs = result["observed"]
    seen = _fmt(obs["transition_step"]) if obs["transitioned"] else f"none ({obs['reason']})"
    print(f"  observed transition ({obs['method']}, whole curve): {seen}")


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (abs(value) >= 1e5 or 0 < abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:.4g}" if abs(value) < 100 else f"{value:.0f}"


def _cmd_fit(args) -> int:
    from interp.io.checkpoints import write_json_atomic
    from phenomenology.fit import fit_curve

    if args.until is not None and args.fraction is not None:
        raise ValueError("give --until or --fraction, not both")
    until = _parse_number("--until", args.until)
    fraction = _parse_number("--fraction", args.fraction)
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"--fraction={args.fraction} must be in (0, 1]")
    n_boot = _parse_number("--n-boot", args.n_boot, integer=True)
    if n_boot < 0:
        raise ValueError(f"--n-boot={args.n_boot} must be >= 0")
    if args.json and len(args.paths) > 1:
        raise ValueError("--json names one file: give one PATH with it")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise ValueError(f"--json {args.json}: its folder does not exist")
    from phenomenology.models import get_model

    get_model(args.model)  # an unknown --model fails here, naming the registered ones
    options = {}
    for key, value in parse_overrides(args.option or []).items():
        options[key] = _parse_option(value)
    if args.figure:
        _check_figure_args(args, until, fraction)
    sources = _fit_sources(args, options)
    for src in sources:
        result = fit_curve(
            src["curve"], task=src["task"], model=args.model, column=args.column,
            target=args.target, aux=tuple(args.aux or ()), until=until, fraction=fraction,
            options=options, n_boot=n_boot, source=src["source"], optimizer=src["optimizer"],
            method=args.method, progress_column=args.progress_column,
        )  # fmt: skip
        if src["run_dir"] is not None:
            result["run_dir"] = src["run_dir"]
        write_json_atomic(Path(src["out"]), result)
        _print_fit(result, src)
        print(f"wrote {src['out']}")
        if args.figure:
            _write_forecast_figure(args, src, result)
    return 0


def _check_figure_args(args, until, fraction) -> None:
    from interp.viz.export import FORMATS, STATIC_FORMATS, find_chromium

    fmt = Path(args.figure).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"--figure {args.figure}: name a .png, .pdf, .svg or .html file")
    if len(args.paths) > 1:
        raise ValueError("--figure draws one forecast: give one PATH with it")
    if until is None and fraction is None:
        raise ValueError("--figure needs --until or --fraction (the part of the curve seen)")
    if (args.target or args.column) != "ic_loss" or args.model != "nested-logit" or args.aux:
        raise ValueError(
            "--figure draws the forecast of an ic_loss curve by the nested-logit model"
        )
    if not Path(args.figure).resolve().parent.is_dir():
        raise ValueError(f"--figure {args.figure}: its folder does not exist")
    if fmt in STATIC_FORMATS and find_chromium() is None:
        raise ValueError(f"--figure {args.figure}: .{fmt} needs chromium; .html works without it")


def _write_forecast_figure(args, src: dict, result: dict) -> None:
    from interp.viz.dynamics_plots import forecast_figure
    from interp.viz.export import export_figure

    curve = src["curve"].rename(columns={result["column"]: "ic_loss"})
    fig = forecast_figure(
        curve, task=src["task"], until=result["until_step"],
        observed_step=result["observed"]["transition_step"], note=src["source"],
        optimizer=src["optimizer"],
        method=result.get("forecast_from", "template"), progress_column=args.progress_column,
    )  # fmt: skip
    out = Path(args.figure)
    written = export_figure(fig, out.with_suffix(""), (out.suffix.lstrip(".").lower(),), csv=False)
    print(f"wrote {written[0]}")


def _cmd_figures(args) -> int:
    from interp.viz.export import STATIC_FORMATS, find_chromium
    from interp.viz.figures import write_standard_figures

    formats = tuple(f.strip() for f in args.formats.split(","))
    static = [f for f in formats if f in STATIC_FORMATS]
    if static:  # say so before any work, not as a traceback
        try:
            browser = find_chromium()
        except RuntimeError as err:  # BROWSER_PATH set to something that is not a browser
            print(f"error: --formats {','.join(static)}: {err}", file=sys.stderr)
            return 3
        if browser is None:
            print(
                f"error: --formats {','.join(static)} needs chromium (apt-get install -y chromium,"
                " or BROWSER_PATH=/path/to/chrome); --formats html works without it",
                file=sys.stderr,
            )
            return 3
    paths = write_standard_figures(
        [Path(p) for p in args.run_dirs], Path(args.out), formats=formats
    )
    print(f"wrote {len(paths)} files to {args.out}:")
    for p in paths:
        print(f"  {p}")
    return 0


def _cmd_quanta(args) -> int:
    from interp.analysis.quanta import analyse_run
    from interp.io.rundir import load_run

    threshold = _parse_number("--threshold", args.threshold)
    if not 0 < threshold <= 1:
        raise ValueError(f"--threshold={args.threshold} is invalid: must be in (0, 1]")
    run = load_run(args.run_dir)
    result = analyse_run(run, threshold)
    fit = result.fit
    frame = result.frame
    print(
        f"{run.path}: K={result.K}, alpha={result.alpha:g}, {result.per_class_iw} sequences per "
        f"class, {len(frame)} evaluations to step {int(frame['step'].max())}"
    )
    print(
        f"  classes learned: {result.n_learned} of {result.K} (accuracy >= {threshold:g} at "
        f"{result.confirm} evaluations in a row), {result.n_learned_at_start} of them already at "
        f"step {int(frame['step'].min())} (left out of the fit)"
    )
    if fit.slope is None:
        print(f"  rank exponent: none ({fit.reason})")
    else:
        interval = (
            f", {fit.level:.0%} interval [{fit.low:.3f}, {fit.high:.3f}]"
            if fit.low is not None
            else ""
        )
        print(
            f"  rank exponent (log-log slope of t_k on rank): {fit.slope:.3f}{interval} over "
            f"{fit.n_used} classes (bootstrap over classes, {fit.n_boot} resamples)"
        )
    print(f"  predicted slope (alpha): {result.alpha:g}")
    dec = result.decomposition
    print(
        f"  RMS to the measured IW accuracy: exact decomposition {dec.rms_exact:.4f}, sum of "
        f"sharp steps {dec.rms_steps:.4f}"
    )
    said = "none" if result.transition_step is None else f"step {result.transition_step:.0f}"
    print(f"  ICL transition (IC accuracy): {said}")
    path = run.write_output("quanta.json", result.to_dict())
    print(f"wrote {path}")
    return 0


def _cmd_report(args) -> int:
    from interp.viz.explorer import ExplorerConfig
    from interp.viz.report import ReportConfig, ReportInputError, write_report

    if args.sequences < 1:
        raise ValueError(f"--sequences {args.sequences} is invalid: must be >= 1")
    config = ReportConfig(fit=not args.no_fit, explorer=ExplorerConfig(n_sequences=args.sequences))
    from interp.io.checkpoints import CheckpointError

    try:
        path = write_report(args.run_dirs, args.out, config)
    except (ReportInputError, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): open it in a browser (works offline)"
    )
    return 0


def _cmd_import(args) -> int:
    from interp.experiments.importer import import_weights
    from interp.io.rundir import load_run

    task, model_cfg, train_cfg, _ = build_configs(
        args.preset, parse_overrides(args.set or []), args.seed
    )
    out = import_weights(
        args.weights,
        args.run_dir,
        task=task,
        model=model_cfg,
        train=train_cfg,
        step=args.step,
        overwrite=args.overwrite,
    )
    row = load_run(out).metrics.iloc[-1]
    print(
        f"imported {args.weights} at step {args.step}: IC acc {row['ic_acc']:.3f}  IC2 acc "
        f"{row['ic2_acc']:.3f}  IW acc {row['iw_acc']:.3f}  -> {out}"
    )
    return 0


def _cmd_evaluate(args) -> int:
    from interp.analysis.length import evaluate_lengths, parse_n_pairs
    from interp.io.atomic import write_text_atomic
    from interp.io.rundir import load_run

    load_run(args.run_dir)  # a clear error before any work

    scale = args.rope_scale if args.rope_scale == "auto" else float(args.rope_scale)
    df = evaluate_lengths(
        args.run_dir,
        parse_n_pairs(args.n_pairs),
        n=args.n,
        step=args.step,
        rope_scaling=args.rope_scaling,
        rope_scale=scale,
    )
    if args.out:
        path = Path(args.out)
        write_text_atomic(path, df.to_csv(index=False))
    else:
        path = load_run(args.run_dir).write_output("length_eval.csv", df)
    cols = [c for c in ("n_pairs", "ic_acc", "ila1", "tila2", "untrained_positions") if c in df]
    print(df[cols].to_string(index=False))
    print(f"wrote {path}")
    return 0


def _cmd_sweep(args) -> int:
    from interp.experiments.sweep import (
        SweepDirectoryError,
        SweepSpec,
        load_manifest,
        parse_grid,
        parse_seeds,
        run_sweep,
    )
    from interp.io.plugins import loaded_plugins

    if loaded_plugins() and args.backend == "ray":
        raise ValueError(
            "--plugin with --backend ray: Ray workers do not load plugins, so their runs would "
            "lack what the plugins add; use --backend process or serial"
        )
    seeds = parse_seeds(args.seeds) if args.seeds else None
    grid, overrides = parse_grid(args.grid or []), parse_overrides(args.set or [])
    if args.preset is None:
        if not (args.out and (Path(args.out) / "sweep.json").exists()) or grid or overrides:
            raise ValueError("--preset is required (only a rerun of a sweep in --out may omit it)")
        spec = SweepSpec.from_dict(load_manifest(args.out)["spec"])
        if seeds is not None:
            spec = dataclasses.replace(spec, seeds=seeds)
    else:
        spec = SweepSpec.from_preset(args.preset, grid, overrides, seeds)
        from interp.train.presets import get_preset

        dropped = [k for k in get_preset(args.preset).grid if k not in spec.grid]
        if dropped:
            print(f"--set fixes {dropped}: not swept", file=sys.stderr)
        print(f"preset: {get_preset(args.preset).note}", file=sys.stderr)
    out = args.out or f"runs/sweep-{spec.preset}"
    try:
        summary = run_sweep(
            spec,
            out,
            backend=args.backend,
            workers=args.workers,
            threads_per_worker=args.threads_per_worker,
            stack=args.stack,
            ray_address=args.ray_address,
            overwrite=args.overwrite,
            figures=not args.no_figures,
            formats=tuple(args.formats.split(",")),
        )
    except (SweepDirectoryError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    _print_summary(summary, spec.fields)
    return 1 if (summary["status"] == "failed").any() else 0


def _print_summary(summary, fields) -> None:
    cols = [*fields, "seed", "steps_done", "ic_acc", "ic2_acc", "iw_acc", "transition_step"]
    print(summary[[*cols, "status"]].to_string(index=False, float_format=lambda v: f"{v:.3g}"))


def _cmd_sweep_summary(args) -> int:
    from interp.experiments.sweep import (
        SweepDirectoryError,
        SweepSpec,
        load_manifest,
        summarize_sweep,
        write_summary,
        write_sweep_figures,
    )

    try:
        spec = SweepSpec.from_dict(load_manifest(args.sweep_dir)["spec"])
        summary = summarize_sweep(args.sweep_dir)
    except SweepDirectoryError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    paths = write_summary(args.sweep_dir, summary)
    if not args.no_figures:
        paths += write_sweep_figures(args.sweep_dir, summary, tuple(args.formats.split(",")))
    _print_summary(summary, spec.fields)
    for p in paths:
        print(f"wrote {p}")
    return 0


def _cmd_llc(args) -> int:
    import logging

    # The library logs each flagged estimate; the command prints it once, as a "warning:" line.
    # (No propagation to the "interp" handler; the null handler keeps logging's last resort quiet.)
    llc_log = logging.getLogger("interp.analysis.llc")
    quiet = logging.NullHandler()
    propagate, llc_log.propagate = llc_log.propagate, False
    llc_log.addHandler(quiet)
    try:
        return _llc_command(args)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM while the workers run
        print(
            f"interrupted: the finished checkpoints are in {Path(args.run_dir) / 'llc.csv'}; run "
            "the same command again to go on",
            file=sys.stderr,
        )
        return 130
    finally:
        llc_log.propagate = propagate
        llc_log.removeHandler(quiet)


def _llc_command(args) -> int:
    import math

    from interp.analysis.llc import (
        LLCConfig,
        calibrate_llc,
        chosen_from_calibration,
        llc_over_checkpoints,
        parse_steps,
    )
    from interp.io.rundir import RunDirectoryError, load_run

    def floats(text, name):
        try:
            return [float(v) for v in text.split(",")] if text else None
        except ValueError:
            raise ValueError(f"{name}={text!r} is invalid: comma-separated numbers") from None

    try:
        run = load_run(args.run_dir)
    except RunDirectoryError as err:
        print(f"error: RUN_DIR: {err}", file=sys.stderr)
        return 2
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads={args.threads} is invalid: an integer >= 1")
        import torch

        torch.set_num_threads(args.threads)
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers={args.workers} is invalid: an integer >= 1")
    # One-thread workers over the checkpoints use the cores best (as in a sweep); --threads alone
    # asks for one process with that many threads.
    workers = args.workers or (1 if args.threads is not None else (os.cpu_count() or 1))
    chosen = chosen_from_calibration(args.run_dir) if args.from_calibration else {}
    cfg = LLCConfig(
        epsilon=chosen.get("epsilon", args.epsilon),
        nbeta=chosen.get("nbeta", args.nbeta),
        localization=args.localization,
        chains=args.chains,
        draws=args.draws,
        burnin=args.burnin,
        batch_size=args.batch_size,
        n_batches=args.n_batches,
        seed=args.seed,
    )
    try:
        if args.calibrate:
            from interp.viz.llc_plots import write_calibration_traces

            record, sweep = calibrate_llc(
                args.run_dir,
                args.calibrate_step,
                floats(args.epsilons, "--epsilons"),
                floats(args.nbetas, "--nbetas"),
                cfg,
            )
            write_calibration_traces(
                args.run_dir, sweep, step=record["step"], chosen=record["chosen"]
            )
            for row in record["table"]:
                warn = f"  WARNING: {row['warning']}" if row["warning"] else ""
                print(
                    f"eps {row['epsilon']:<8g} nbeta {row['nbeta']:<8.4g} LLC {row['llc_mean']:.4g}"
                    f" ± {row['llc_std']:.2g}  MALA {row['mala_acceptance']:.2f}{warn}"
                )
            print(f"chosen: {record['chosen']}: {record['reason']}")
            print("wrote llc_calibration.json, llc_calibration.csv, llc_calibration_traces.html")
            return 0
        steps = parse_steps(args.steps, run.checkpoint_steps)

        def report(step, est):
            if est is None:
                print(f"step {step}: already in llc.csv, skipped")
                return
            print(
                f"step {step}: LLC {est.llc_mean:.4g} ± {est.llc_std:.2g} "
                f"(MALA {est.mala_acceptance:.2f}, {est.seconds:.1f} s)",
                flush=True,
            )
            if est.warning:
                print(f"warning: step {step}: {est.warning}", file=sys.stderr, flush=True)

        df = llc_over_checkpoints(
            args.run_dir, cfg, steps, overwrite=args.overwrite, on_result=report, workers=workers
        )
    except ImportError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    flagged = int((df["warning"] != "").sum())
    secs = [v for v in df["seconds"] if isinstance(v, float) and math.isfinite(v)]
    print(
        f"wrote {Path(args.run_dir) / 'llc.csv'} ({len(df)} checkpoints, {flagged} flagged; "
        f"{sum(secs):.0f} s of sampling recorded)"
    )
    return 0


def _cmd_presets(args) -> int:
    from interp.train.presets import PRESETS

    width = max(map(len, PRESETS))
    for name, preset in PRESETS.items():
        print(f"{name:{width}s} {preset.note}")
        if preset.grid:
            axes = " x ".join(f"{k} in {list(v)}" for k, v in preset.grid.items())
            seeds = list(preset.seeds)
            print(f"{'':{width}s}   sweep: {axes}; seeds {seeds}")
    return 0


def _check_runs_plugins(args) -> None:
    """Every command that opens a run (``RUN_DIR`` arguments, a fit's run-directory ``PATH``)
    first checks that the plugins the run was trained with are loaded: its metrics have their
    columns, its task or model may come from one."""
    named = [getattr(args, "run_dir", None)]
    named += [*(getattr(args, "run_dirs", None) or []), *(getattr(args, "paths", None) or [])]
    for path in named:
        if isinstance(path, str) and (Path(path) / "config.json").is_file():
            _check_recorded_plugins(path, "rerun with")
    out = getattr(args, "out", None)
    if getattr(args, "resume", False) and out and (Path(out) / "config.json").is_file():
        _check_recorded_plugins(out)


def _check_recorded_plugins(run_dir: str, what: str = "resume with") -> None:
    """A run trained with plugins is opened (or resumed) only with them loaded again; say which,
    rather than load code named in a file."""
    from interp.io.plugins import loaded_plugins
    from interp.io.rundir import recorded_plugins

    loaded = set(loaded_plugins())
    missing = [p for p in recorded_plugins(run_dir) if p not in loaded]
    if missing:
        again = " ".join(f"--plugin {p}" for p in missing)
        raise ValueError(
            f"{Path(run_dir) / 'config.json'} field plugins: the run was trained with {missing}; "
            f"{what} {again}"
        )


def _list_measures() -> list[str]:
    from interp.analysis.measures import MEASURES

    width = max(map(len, MEASURES))
    lines = []
    for name, m in MEASURES.items():
        reads = ", ".join(m.reads) or "logits"
        fit = f"; fitted as {m.fit_quantity} ({m.fit_map})" if m.fit_quantity else ""
        lines.append(f"{name:{width}s} {m.direction:7s} {m.label} - {m.description}")
        lines.append(f"{'':{width}s}         reads {reads}{fit}; from {m.source}")
    return lines


def _list_positional() -> list[str]:
    """Positional encodings (:data:`interp.model.positional.POSITIONAL_ENCODINGS`: a tuple of names
    today, a name -> class registry once it exists)."""
    from interp.model.positional import POSITIONAL_ENCODINGS

    if isinstance(POSITIONAL_ENCODINGS, dict):
        return [f"{name:10s} {_first_line(obj)}" for name, obj in POSITIONAL_ENCODINGS.items()]
    return list(POSITIONAL_ENCODINGS)


def _list_models() -> list[str]:
    """Every registered dynamics model (:mod:`phenomenology.models`), plugins' included."""
    from phenomenology.models import get_model, model_names

    lines = []
    for name in model_names():
        cls = get_model(name)
        lines.append(f"{name:14s} {cls.description or _first_line(cls)}")
    return lines


def _list_tasks() -> list[str]:
    """Every registered task (:mod:`interp.data.tasks`), plugins' included."""
    from interp.data.tasks import TASKS

    width = max(map(len, TASKS))
    lines = []
    for name, t in TASKS.items():
        applies = "every measure" if t.measures is None else (", ".join(t.measures) or "none")
        lines.append(f"{name:{width}s} {t.description}")
        lines.append(
            f"{'':{width}s}   config {t.config.__name__}, layout {t.layout}, sets "
            f"{', '.join(t.eval_sets)}; measures: {applies}; from {t.source}"
        )
    return lines


def _list_interventions() -> list[str]:
    from interp.model.interventions import INTERVENTIONS

    return [
        f"{name:18s} layer {layer + 1}: {_first_line(fn)}"
        for name, (layer, fn) in INTERVENTIONS.items()
    ]


def _first_line(obj) -> str:
    return ((getattr(obj, "__doc__", None) or "").strip().splitlines() or [""])[0]


def _list_experiments() -> list[str]:
    from interp.experiments import EXPERIMENTS

    width = max(map(len, EXPERIMENTS))
    lines = []
    for name, e in EXPERIMENTS.items():
        costs = ", ".join(f"{t} {tier.cost or '?'}" for t, tier in e.tiers.items())
        lines.append(f"{name:{width}s} {e.question}")
        lines.append(f"{'':{width}s}   {costs}")
    return lines


def _cmd_reproduce(args) -> int:
    from interp.experiments import EXPERIMENTS, check_rows, get_experiment, render, reproduce

    names = sorted(EXPERIMENTS) if args.name == "all" and args.render_only else [args.name]
    experiments = [get_experiment(n) for n in names]  # an unknown name fails before any work
    if args.render_only:
        out = Path(args.out or "docs/results")
        for e in experiments:
            if args.name == "all" and not (out / f"{e.name}.csv").exists():
                print(f"skipped {e.name}: no {out / (e.name + '.csv')}", file=sys.stderr)
                continue
            for path in render(e, out, figures=not args.no_figures):
                print(f"wrote {path}")
        if args.name == "all":
            from interp.experiments import results_index
            from interp.io.atomic import write_text_atomic

            write_text_atomic(out / "README.md", results_index(out))
            print(f"wrote {out / 'README.md'}")
        return 0
    if args.name == "all":
        raise ValueError("reproduce all is only for --render-only; name one experiment")
    e = experiments[0]
    out = Path(args.out or ("docs/results" if args.tier == "full" else "runs/results"))
    line = f"induction-cliff reproduce {e.name} --tier {args.tier}"
    from interp.experiments.sweep import SweepDirectoryError

    try:
        rows, written = reproduce(
            e,
            tier=args.tier,
            out=out,
            runs=args.runs,
            backend=args.backend,
            workers=args.workers,
            figures=not args.no_figures,
            command=line,
            log=lambda text: print(text, file=sys.stderr),
        )
    except (SweepDirectoryError, RuntimeError) as err:  # a sweep folder in the way, a failed run
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 3
    for path in written:
        print(f"wrote {path}")
    failed = 0
    if args.tier == "quick":
        for ok, text in check_rows(e, rows):
            print(f"{'ok  ' if ok else 'FAIL'} {text}")
            failed += not ok
    return 1 if failed else 0


def _cmd_list(args) -> int:
    if args.registry == "presets":
        return _cmd_presets(args)
    if args.markdown:
        if args.registry != "experiments":
            raise ValueError("--markdown is for `list experiments` only")
        from interp.experiments import experiments_table

        print(experiments_table())
        return 0
    lines = {
        "measures": _list_measures,
        "positional": _list_positional,
        "models": _list_models,
        "tasks": _list_tasks,
        "interventions": _list_interventions,
        "experiments": _list_experiments,
    }[args.registry]()
    print("\n".join(lines))
    return 0


LIST_REGISTRIES = (
    "measures",
    "positional",
    "models",
    "tasks",
    "presets",
    "interventions",
    "experiments",
)


class _OneLineErrors(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``error: PROG: what``) and exit 2,
    like every other error of the command; ``-h`` still prints the whole usage. Sub-command
    parsers inherit the class."""

    def error(self, message: str):
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        sys.exit(2)


def make_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(prog="induction-cliff", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="PATH_OR_MODULE",
        help="import a .py file or module that registers measures, encodings or models, before "
        "the command runs (repeatable; may stand anywhere on the line; recorded in config.json "
        "by train)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "train", help="train the network (a run directory with metrics and checkpoints)"
    )
    p.add_argument("--preset", default=None, help="demo (default), paper-fig1d, paper-fig3, tiny")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the run's seed (default: the preset's, 0)"
    )
    p.add_argument("--out", default=None, help="run directory (default runs/PRESET-seedS)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "measures", help="recompute the progress measures at every checkpoint of runs"
    )
    p.add_argument("run_dirs", nargs="+", help="run directories (writes checkpoint_measures.csv)")
    p.add_argument("--n", type=int, default=None, help="IC sequences (default: the run's n_eval)")
    p.add_argument(
        "--score-terms",
        action="store_true",
        help="also the positional part of layer-1 scores on the label rows (l1_pos_margin, "
        "l1_pos_margin_content_free, l1_pos_share; interp.analysis.score_terms)",
    )
    p.set_defaults(func=_cmd_measures)

    p = sub.add_parser("transition", help="plateau and transition report for one or more runs")
    p.add_argument("run_dirs", nargs="+", help="run directories")
    p.add_argument(
        "--measure", default="ic_acc", help="metrics.csv column to detect the jump on (ic_acc)"
    )
    p.add_argument("--out", default=None, help="also write the report as CSV")
    p.set_defaults(func=_cmd_transition)

    p = sub.add_parser(
        "fit",
        help="fit a dynamics model to runs or CSV curves and forecast the transition (writes "
        "RUN_DIR/fit.json or CURVE.fit.json)",
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="run directory or CSV with a step column"
    )
    p.add_argument("--model", default="nested-logit", help="registered dynamics model")
    p.add_argument("--column", default="ic_loss", help="the curve to fit (default ic_loss)")
    p.add_argument(
        "--target", default=None, help="the model's measure the column stands for (default: same)"
    )
    p.add_argument("--aux", action="append", metavar="COLUMN", help="fit jointly (repeatable)")
    p.add_argument("--until", default=None, metavar="STEP", help="fit only steps <= STEP")
    p.add_argument(
        "--fraction",
        default=None,
        metavar="F",
        help="fit only the first F of the plateau seen on the whole curve (0 < F <= 1)",
    )
    p.add_argument(
        "--set", action="append", metavar="L=..|N=..|B=..", help="task of a CSV curve (repeatable)"
    )
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="model option")
    p.add_argument("--n-boot", default="50", help="bootstrap replicates of the interval")
    p.add_argument("--json", default=None, metavar="FILE", help="where to write the result")
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
        "the loss curve) or auto (progress where it can forecast, else template; default)",
    )
    p.add_argument(
        "--progress-column",
        default="tila2",
        metavar="COLUMN",
        help="the progress measure of --method progress/auto (default tila2)",
    )
    p.add_argument(
        "--figure",
        default=None,
        metavar="FILE",
        help="also draw the forecast (.png, .pdf, .svg or .html): the curve seen, a fan of "
        "continuations, the 80%% interval and, where the run went on, what it did",
    )
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser("figures", help="write the standard figure set of runs")
    p.add_argument("run_dirs", nargs="+", help="run directories")
    p.add_argument("--out", required=True, help="folder for the figures (created if missing)")
    p.add_argument(
        "--formats",
        default="pdf,png",
        help="comma-separated: pdf,png,svg,html (pdf/png/svg need chromium; html does not)",
    )
    p.set_defaults(func=_cmd_figures)

    p = sub.add_parser(
        "quanta",
        help="per-class IW learning steps against frequency rank, and the IW curve as a sum of "
        "per-class steps (a run trained with per_class_iw > 0; writes RUN_DIR/quanta.json)",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with per_class_iw.csv")
    p.add_argument(
        "--threshold",
        default="0.5",
        help="accuracy at which a class counts as learned (two evaluations in a row; default 0.5)",
    )
    p.set_defaults(func=_cmd_quanta)

    p = sub.add_parser(
        "report",
        help="one self-contained offline HTML page: config and deviations, dynamics, transition, "
        "fit and forecast, attention explorer (runs grouped by config)",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument(
        "--out", default=None, help="HTML file (default RUN_DIR/report.html; required for several)"
    )
    p.add_argument(
        "--no-fit", action="store_true", help="skip the nested-logit fit and forecast (faster)"
    )
    p.add_argument(
        "--sequences", type=int, default=3, help="explorer sequences per IC/IC2/IW set (default 3)"
    )
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "import",
        help="turn a state dict of this network trained elsewhere into a run directory",
        description="Check every tensor of PATH (the network's state_dict as .safetensors or "
        "torch.save, or a checkpoint dict holding one) against the network the preset and --set build, then "
        "write RUN_DIR: config.json, the weights as the checkpoint of --step and one evaluation "
        "in metrics.csv. A tensor that is missing, extra or of another shape is refused with one "
        "line naming it, before anything is written.",
        epilog="example: induction-cliff import trained.pt runs/imported --preset demo --step 3500",
    )
    p.add_argument("weights", metavar="PATH", help="the state dict (.safetensors or torch.save)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to write")
    p.add_argument("--preset", default="demo", help="the setting the weights belong to (demo)")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)"
    )
    p.add_argument("--seed", type=int, default=None, help="the run's seed (its evaluation sets)")
    p.add_argument("--step", type=int, default=0, help="training step of the weights (0)")
    p.add_argument("--overwrite", action="store_true", help="replace a run in RUN_DIR")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser(
        "evaluate",
        help="evaluate a trained run at several lengths (writes RUN_DIR/length_eval.csv)",
    )
    p.add_argument("run_dir", help="a trained run directory")
    p.add_argument("--n-pairs", default="8,16,32", help="comma-separated context pairs")
    p.add_argument("--n", type=int, default=None, help="sequences per set (default: n_eval)")
    p.add_argument("--step", type=int, default=None, help="checkpoint (default: the last)")
    p.add_argument(
        "--rope-scaling", default=None, help="RoPE eval-time rescaling: none, pi, ntk, mixed"
    )
    p.add_argument(
        "--rope-scale", default="auto", help="rescaling ratio s (auto: n_pairs / training N)"
    )
    p.add_argument("--out", default=None, help="CSV path (default RUN_DIR/length_eval.csv)")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "sweep",
        help="train one run per point of a grid x seeds (resumable), write a summary and figure",
    )
    p.add_argument("--preset", default=None, help="base preset, e.g. fig2-kb-quick or paper-fig1d")
    p.add_argument(
        "--grid",
        action="append",
        metavar="FIELD=V1,V2,...",
        help="sweep a config field (repeatable; replaces the preset's axis of that field; a value "
        "naming another field refers to it, e.g. L=N,32)",
    )
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a field at every point"
    )
    p.add_argument("--seeds", default=None, help="e.g. 0,1 or 0-5 (default: the preset's)")
    p.add_argument("--out", default=None, help="sweep folder (default runs/sweep-PRESET)")
    p.add_argument(
        "--backend",
        default="process",
        choices=["process", "ray", "serial"],
        help="process pool (default), Ray (pip install -e '.[ray]'), or in-process",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="concurrent runs (default: CPUs / threads)"
    )
    p.add_argument("--threads-per-worker", type=int, default=1, help="torch threads per run")
    p.add_argument(
        "--stack",
        type=int,
        default=1,
        help="train up to N seeds of one config together per worker (fast on GPUs; ~5-8%% on a "
        "2-core CPU)",
    )
    p.add_argument("--ray-address", default=None, help="address of a running Ray cluster")
    p.add_argument(
        "--overwrite", action="store_true", help="delete the sweep in --out and start again"
    )
    p.add_argument("--no-figures", action="store_true", help="no phase-diagram figure")
    p.add_argument("--formats", default="png,pdf,html", help="figure formats (comma-separated)")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser(
        "sweep-summary", help="rebuild a sweep's summary and figure from what is on disk"
    )
    p.add_argument("sweep_dir", help="a sweep folder (with sweep.json)")
    p.add_argument("--no-figures", action="store_true", help="only the summary tables")
    p.add_argument("--formats", default="png,pdf,html", help="figure formats (comma-separated)")
    p.set_defaults(func=_cmd_sweep_summary)

    p = sub.add_parser(
        "llc",
        help="local learning coefficient at a run's checkpoints (devinterp SGLD; RUN_DIR/llc.csv)",
    )
    p.add_argument("run_dir")
    p.add_argument("--steps", default="all", help="checkpoint steps a,b,c or all (default)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=100, help="draws per chain after burn-in")
    p.add_argument("--burnin", type=int, default=50, help="SGLD burn-in steps per chain")
    p.add_argument("--epsilon", type=float, default=1e-4, help="SGLD step size")
    p.add_argument(
        "--nbeta", type=float, default=None, help="inverse temperature (default m/log m)"
    )
    p.add_argument("--localization", type=float, default=100.0, help="SGLD localization gamma")
    p.add_argument("--batch-size", type=int, default=None, help="default: the run's batch size")
    p.add_argument("--n-batches", type=int, default=16, help="batches drawn from the task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="checkpoints estimated at once, one thread each (default: the CPUs; 1 with --threads)",
    )
    p.add_argument("--overwrite", action="store_true", help="discard an existing llc.csv")
    p.add_argument(
        "--from-calibration",
        action="store_true",
        help="use the epsilon and nbeta chosen in RUN_DIR/llc_calibration.json",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="sweep --epsilons x --nbetas on one checkpoint instead (llc_calibration.*)",
    )
    p.add_argument("--calibrate-step", type=int, default=None, help="default: the last")
    p.add_argument("--epsilons", default="1e-5,3e-5,1e-4,3e-4,1e-3")
    p.add_argument("--nbetas", default=None, help="default: m/log m times 0.3, 1, 3")
    p.set_defaults(func=_cmd_llc)

    p = sub.add_parser(
        "reproduce",
        help="run a declared experiment's tier (training what is missing), write its CSV and "
        "page (induction-cliff list experiments)",
    )
    p.add_argument("name", metavar="NAME", help="an experiment (all: every page, --render-only)")
    p.add_argument("--tier", choices=("quick", "full"), default="quick")
    p.add_argument(
        "--backend", default="process", choices=["process", "ray", "serial"], help="as for sweep"
    )
    p.add_argument("--workers", type=int, default=None, help="concurrent runs (as for sweep)")
    p.add_argument(
        "--out",
        default=None,
        help="folder of NAME.csv and NAME.md (default docs/results for full, runs/results for "
        "quick)",
    )
    p.add_argument(
        "--runs", default="runs/experiments", help="where the runs go (runs/experiments/NAME/...)"
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="rebuild the page and figure from NAME.csv in --out alone, without training",
    )
    p.add_argument("--no-figures", action="store_true", help="the page only, no figure")
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("presets", help="list the presets with their deviations from the paper")
    p.set_defaults(func=_cmd_presets)

    p = sub.add_parser("list", help="list a registry (with the plugins given by --plugin)")
    p.add_argument("registry", choices=LIST_REGISTRIES)
    p.add_argument(
        "--markdown",
        action="store_true",
        help="experiments: the README's table (question, headline result from each CSV, link)",
    )
    p.set_defaults(func=_cmd_list)
    return parser


def _take_plugins(argv: list[str]) -> tuple[list[str], list[str]]:
    """``--plugin X`` / ``--plugin=X`` anywhere on the line -> (plugins, the other arguments)."""
    plugins, rest = [], []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            rest.extend([token, *tokens])
        elif token == "--plugin":
            value = next(tokens, None)
            if value is None or value.startswith("-"):
                raise ValueError("--plugin needs a value: a .py file or a module name")
            plugins.append(value)
        elif token.startswith("--plugin="):
            plugins.append(token.split("=", 1)[1])
        else:
            rest.append(token)
    return plugins, rest


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _setup_logging() -> None:
    """Library notes and warnings (``logging``) go to stderr as plain lines."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("interp", "phenomenology"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``induction-cliff`` command.

    Every failure a user can cause ends in one line on stderr and a non-zero exit: 2 for invalid
    input, 3 for a run or sweep directory that cannot be used (or a diverged run), 1 for anything
    unexpected (``INDUCTION_CLIFF_TRACEBACK=1`` shows its traceback), 128 + the signal number
    when SIGINT or SIGTERM stopped training (its state saved).
    """
    try:
        plugins, argv = _take_plugins(sys.argv[1:] if argv is None else list(argv))
        from interp.io.plugins import load_plugins

        load_plugins(plugins)  # before parsing: registries they extend are read from here on
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args = make_parser().parse_args(argv)
    _setup_logging()
    from interp.io.checkpoints import CheckpointError
    from interp.io.rundir import RunDirectoryError
    from interp.train.training import TrainingDiverged, TrainingInterrupted

    try:
        _check_runs_plugins(args)
        return args.func(args)
    except TrainingInterrupted as err:
        return 128 + err.signum
    except KeyboardInterrupt:
        return 130
    except (RunDirectoryError, CheckpointError, TrainingDiverged) as err:
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 3
    except (ValueError, OverflowError) as err:
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:
        where = f" {err.filename}" if getattr(err, "filename", None) else ""
        print(f"error: cannot access{where}: {err.strerror or _one_line(err)}", file=sys.stderr)
        return 3
    except Exception as err:
        if os.environ.get("INDUCTION_CLIFF_TRACEBACK"):
            raise
        print(
            f"error: {type(err).__name__}: {_one_line(err)} (unexpected; rerun with "
            "INDUCTION_CLIFF_TRACEBACK=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
