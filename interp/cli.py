"""Command line: ``induction-cliff {train,sweep,sweep-summary,measures,transition,fit,figures,llc,presets}``.

Examples::

    induction-cliff train --preset demo --out runs/demo
    induction-cliff train --preset paper-fig3 --set steps=60000 --seed 1 --out runs/fig3-s1
    induction-cliff train --preset paper-fig3 --set intervention=clamp_prev_token --out runs/clamp
    induction-cliff train --resume --out runs/fig3-s1          # continue an interrupted run
    induction-cliff fit runs/fig3-s1                            # writes runs/fig3-s1/fit.json
    induction-cliff figures runs/demo --out runs/demo/figures
    induction-cliff sweep --preset fig2-kb-quick --out runs/fig2-kb   # rerun it to resume
    induction-cliff sweep --preset paper-fig1d --seeds 0-5 --out runs/fig1d --backend ray
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

__all__ = ["main", "parse_overrides", "build_configs"]


def _convert(value: str, current):
    """Parse ``value`` to the type of a config field's current value."""
    if value.lower() in ("none", "null"):
        return None
    if isinstance(current, bool):
        if value.lower() in ("true", "1", "yes"):
            return True
        if value.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(current, int):
        as_float = float(value)
        if as_float != int(as_float):
            raise ValueError(f"expected an integer, got {value!r}")
        return int(as_float)
    if isinstance(current, float):
        return float(value)
    if current is None:
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                pass
    return value


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["K=512", "lr=0.1"]`` -> ``{"K": "512", "lr": "0.1"}`` with a clear error if malformed."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"--set {pair!r} is invalid: expected key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def build_configs(preset_name: str, overrides: dict[str, str], seed: int | None):
    """The task, model and train configs of a preset with ``--set`` overrides applied.

    A key is a field name of ``TaskConfig``, ``TrainConfig`` or ``ModelConfig`` (optionally
    prefixed ``task.``, ``train.`` or ``model.``). The model's ``D``, ``L``, ``n_positions`` and
    ``n_ctx_train`` follow the task and cannot be set.
    """
    from interp.model import ModelConfig
    from interp.presets import get_preset

    preset = get_preset(preset_name)
    task_f = {f.name: getattr(preset.task, f.name) for f in dataclasses.fields(preset.task)}
    train_f = {f.name: getattr(preset.train, f.name) for f in dataclasses.fields(preset.train)}
    derived = {"D", "L", "n_positions", "n_ctx_train"}
    model_defaults = ModelConfig()
    model_f = {
        f.name: preset.model.get(f.name, getattr(model_defaults, f.name))
        for f in dataclasses.fields(ModelConfig)
        if f.name not in derived
    }
    groups = {"task": task_f, "train": train_f, "model": model_f}
    allowed = sorted(set(task_f) | set(train_f) | set(model_f))
    for key, value in overrides.items():
        group_name, _, name = key.rpartition(".")
        targets = (
            [groups[group_name]]
            if group_name in groups
            else [g for g in groups.values() if name in g]
        )
        if group_name and group_name not in groups:
            targets = []
        if not targets or name not in targets[0]:
            raise ValueError(f"--set key {key!r} is unknown: allowed keys are {allowed}")
        try:
            targets[0][name] = _convert(value, targets[0][name])
        except ValueError as err:
            raise ValueError(f"--set {key}={value!r} is invalid: {err}") from err
    if seed is not None:
        train_f["seed"] = seed
    from interp.task import TaskConfig
    from interp.training import TrainConfig

    task = TaskConfig(**task_f)
    return task, ModelConfig.from_task(task, **model_f), TrainConfig(**train_f), preset


def _cmd_train(args) -> int:
    from interp.training import RunDirectoryError, TrainingDiverged, load_run, train

    if (
        args.resume
        and args.out
        and (Path(args.out) / "config.json").exists()
        and not args.set
        and args.preset is None
    ):
        run = load_run(args.out)
        task, model_cfg, train_cfg = run.task, run.model_config, run.train_config
        note = ""
    else:
        task, model_cfg, train_cfg, preset = build_configs(
            args.preset or "demo", parse_overrides(args.set or []), args.seed
        )
        note = preset.note
    out = Path(args.out or f"runs/{args.preset or 'demo'}-seed{train_cfg.seed}")
    print(f"run directory: {out}", file=sys.stderr)
    if note:
        print(f"preset: {note}", file=sys.stderr)
    if train_cfg.deviation_note():
        print(f"DEVIATION from the paper: {train_cfg.deviation_note()}", file=sys.stderr)
    try:
        metrics = train(
            task,
            model_cfg,
            train_cfg,
            out,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=not args.quiet,
        )
    except (TrainingDiverged, RunDirectoryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    last = metrics.iloc[-1]
    print(
        f"done: step {int(last['step'])}  IC acc {last['ic_acc']:.3f}  IC2 acc {last['ic2_acc']:.3f}  "
        f"IW acc {last['iw_acc']:.3f}  -> {out}"
    )
    return 0


def _cmd_measures(args) -> int:
    from interp.over_training import measures_over_checkpoints

    for run_dir in args.run_dirs:
        df = measures_over_checkpoints(run_dir, n=args.n)
        path = Path(run_dir) / "checkpoint_measures.csv"
        df.to_csv(path, index=False)
        print(f"wrote {path} ({len(df)} rows)")
    return 0


def _cmd_transition(args) -> int:
    from interp.transition import transition_report

    report = transition_report(args.run_dirs, measure=args.measure)
    print(report.to_string(index=False))
    if args.out:
        report.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


def _cmd_fit(args) -> int:
    from phenomenology.fit import fit_run

    for run_dir in args.run_dirs:
        result = fit_run(run_dir)
        print(json.dumps({k: result[k] for k in ("r2", "transition_step") if k in result}))
        print(f"wrote {Path(run_dir) / 'fit.json'}")
    return 0


def _cmd_figures(args) -> int:
    from interp.figures import write_standard_figures

    paths = write_standard_figures(
        [Path(p) for p in args.run_dirs], Path(args.out), formats=tuple(args.formats.split(","))
    )
    print(f"wrote {len(paths)} files to {args.out}:")
    for p in paths:
        print(f"  {p}")
    return 0


def _cmd_evaluate(args) -> int:
    from interp.length import evaluate_lengths, parse_n_pairs

    scale = args.rope_scale if args.rope_scale == "auto" else float(args.rope_scale)
    df = evaluate_lengths(
        args.run_dir,
        parse_n_pairs(args.n_pairs),
        n=args.n,
        step=args.step,
        rope_scaling=args.rope_scaling,
        rope_scale=scale,
    )
    path = Path(args.out) if args.out else Path(args.run_dir) / "length_eval.csv"
    df.to_csv(path, index=False)
    cols = [c for c in ("n_pairs", "ic_acc", "ila1", "tila2", "untrained_positions") if c in df]
    print(df[cols].to_string(index=False))
    print(f"wrote {path}")
    return 0


def _cmd_sweep(args) -> int:
    from interp.sweep import (
        SweepDirectoryError,
        SweepSpec,
        load_manifest,
        parse_grid,
        parse_seeds,
        run_sweep,
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
        from interp.presets import get_preset

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
    from interp.sweep import (
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
    import math

    from interp.llc import (
        LLCConfig,
        calibrate_llc,
        chosen_from_calibration,
        llc_over_checkpoints,
        parse_steps,
    )
    from interp.training import RunDirectoryError, load_run

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
    # The library logs each flagged estimate; here they are printed once, as "warning:" lines.
    logging.getLogger("interp.llc").addHandler(logging.NullHandler())
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads={args.threads} is invalid: an integer >= 1")
        import torch

        torch.set_num_threads(args.threads)
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
            record = calibrate_llc(
                args.run_dir,
                args.calibrate_step,
                floats(args.epsilons, "--epsilons"),
                floats(args.nbetas, "--nbetas"),
                cfg,
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
            args.run_dir, cfg, steps, overwrite=args.overwrite, on_result=report
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
    from interp.presets import PRESETS

    width = max(map(len, PRESETS))
    for name, preset in PRESETS.items():
        print(f"{name:{width}s} {preset.note}")
        if preset.grid:
            axes = " x ".join(f"{k} in {list(v)}" for k, v in preset.grid.items())
            seeds = list(preset.seeds)
            print(f"{'':{width}s}   sweep: {axes}; seeds {seeds}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="induction-cliff", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "train", help="train the network (a run directory with metrics and checkpoints)"
    )
    p.add_argument("--preset", default=None, help="demo (default), paper-fig1d, paper-fig3, tiny")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)"
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", default=None, help="run directory (default runs/PRESET-seedS)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "measures", help="recompute the progress measures at every checkpoint of runs"
    )
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--n", type=int, default=None, help="IC sequences (default: the run's n_eval)")
    p.set_defaults(func=_cmd_measures)

    p = sub.add_parser("transition", help="plateau and transition report for one or more runs")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--measure", default="ic_acc")
    p.add_argument("--out", default=None, help="also write the report as CSV")
    p.set_defaults(func=_cmd_transition)

    p = sub.add_parser("fit", help="fit the nested-logit model to runs (writes RUN_DIR/fit.json)")
    p.add_argument("run_dirs", nargs="+")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser("figures", help="write the standard figure set of runs")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--formats", default="pdf,png", help="comma-separated: pdf,png,svg,html")
    p.set_defaults(func=_cmd_figures)

    p = sub.add_parser(
        "evaluate",
        help="evaluate a trained run at several lengths (writes RUN_DIR/length_eval.csv)",
    )
    p.add_argument("run_dir")
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
    p.add_argument("--backend", default="process", choices=["process", "ray", "serial"])
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
    p.add_argument("sweep_dir")
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

    p = sub.add_parser("presets", help="list the presets")
    p.set_defaults(func=_cmd_presets)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``induction-cliff`` command."""
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
