"""``induction-cliff sweep``: one run per point of a grid x seeds, resumable."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from interp.cli._base import print_error

NAME = "sweep"
HELP = "train one run per point of a grid x seeds (resumable), write a summary and figure"
EPILOG = """\
examples:
  induction-cliff sweep --preset fig2-kb-quick --out runs/fig2-kb   # rerun it to resume
  induction-cliff sweep --preset paper-fig1d --seeds 0-5 --out runs/fig1d --backend ray
  induction-cliff sweep --preset fig2-kb-quick --grid K=128,512 --set steps=2000 --out runs/k
  induction-cliff sweep --preset paper-fig1d --seeds 0-5 --out /shared/fig1d --backend submitit \
      --slurm-partition cpu --slurm-time 240 --slurm-points-per-job 4
"""


def add_arguments(p) -> None:
    p.add_argument("--preset", default=None, help="base preset, e.g. fig2-kb-quick or paper-fig1d")
    p.add_argument(
        "--grid",
        action="append",
        metavar="FIELD=V1,V2,...",
        help="sweep a config field (repeatable; replaces the preset's axis of that field; a value "
        "naming another field refers to it, e.g. L=N,32)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a field at every point (the keys of `induction-cliff train --help`)",
    )
    p.add_argument("--seeds", default=None, help="e.g. 0,1 or 0-5 (default: the preset's)")
    p.add_argument(
        "--out", default=None, metavar="SWEEP_DIR", help="sweep folder (default runs/sweep-PRESET)"
    )
    p.add_argument(
        "--backend",
        default="process",
        choices=["process", "ray", "serial", "submitit"],
        help="process pool, Ray (pip install -e '.[ray]'), in-process, or SLURM jobs through "
        "submitit (pip install -e '.[slurm]'; docs/slurm.md)",
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
    p.add_argument(
        "--ray-address",
        default=None,
        help="address of a running Ray cluster (default: a local instance)",
    )
    slurm = p.add_argument_group("--backend submitit (SLURM jobs, docs/slurm.md)")
    slurm.add_argument("--slurm-partition", default=None, help="partition (default: the cluster's)")
    slurm.add_argument(
        "--slurm-time", type=int, default=None, metavar="MIN", help="time limit per job (60)"
    )
    slurm.add_argument(
        "--slurm-points-per-job",
        type=int,
        default=None,
        metavar="N",
        help="points one job trains in turn (1)",
    )
    slurm.add_argument(
        "--slurm-array-parallelism",
        type=int,
        default=None,
        metavar="N",
        help="jobs of the array running at once (256)",
    )
    slurm.add_argument(
        "--slurm-signal-delay",
        type=int,
        default=None,
        metavar="S",
        help="seconds before the limit at which SLURM sends SIGUSR2: the job saves and requeues "
        "(120)",
    )
    slurm.add_argument(
        "--slurm-local",
        action="store_true",
        help="run the jobs on this machine (submitit's LocalExecutor)",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="delete the sweep in --out and start again"
    )
    p.add_argument("--no-figures", action="store_true", help="no phase-diagram figure")
    p.add_argument("--formats", default="png,pdf,html", help="figure formats (comma-separated)")


def print_summary(summary, fields) -> None:
    """The sweep's summary table, one row per run."""
    cols = [*fields, "seed", "steps_done", "ic_acc", "ic2_acc", "iw_acc", "transition_step"]
    print(summary[[*cols, "status"]].to_string(index=False, float_format=lambda v: f"{v:.3g}"))


def _spec(args):
    """The sweep to run: from --preset (with --grid, --set, --seeds), or the one in --out."""
    from interp.experiments.sweep import SweepSpec, parse_grid, parse_seeds
    from interp.train.overrides import parse_overrides
    from interp.train.presets import get_preset

    seeds = parse_seeds(args.seeds) if args.seeds else None
    grid, overrides = parse_grid(args.grid or []), parse_overrides(args.set or [])
    if args.preset is None:
        return _rerun_spec(args, grid or overrides, seeds)
    spec = SweepSpec.from_preset(args.preset, grid, overrides, seeds)
    dropped = [k for k in get_preset(args.preset).grid if k not in spec.grid]
    if dropped:
        print(f"--set fixes {dropped}: not swept", file=sys.stderr)
    print(f"preset: {get_preset(args.preset).note}", file=sys.stderr)
    return spec


def _rerun_spec(args, changed, seeds):
    """The sweep recorded in ``--out`` (its seeds replaced by ``--seeds``): a rerun, which takes
    no ``--grid`` or ``--set`` (``changed``)."""
    from interp.experiments.sweep import SweepSpec, load_manifest

    if not (args.out and (Path(args.out) / "sweep.json").exists()) or changed:
        raise ValueError("--preset is required (only a rerun of a sweep in --out may omit it)")
    spec = SweepSpec.from_dict(load_manifest(args.out)["spec"])
    return spec if seeds is None else dataclasses.replace(spec, seeds=seeds)


_SLURM_FLAGS = {
    "partition": "--slurm-partition",
    "time_min": "--slurm-time",
    "points_per_job": "--slurm-points-per-job",
    "array_parallelism": "--slurm-array-parallelism",
    "signal_delay_s": "--slurm-signal-delay",
}


def _slurm_options(args):
    """The SLURM options of ``--backend submitit`` (refused with any other backend, as is
    ``--workers`` with it: a job trains its points in turn)."""
    from interp.experiments.sweep import SlurmOptions

    given = {
        field: getattr(args, flag[2:].replace("-", "_"))
        for field, flag in _SLURM_FLAGS.items()
        if getattr(args, flag[2:].replace("-", "_")) is not None
    }
    if args.backend != "submitit":
        flags = [_SLURM_FLAGS[f] for f in given] + ["--slurm-local"] * args.slurm_local
        if flags:
            raise ValueError(f"{flags[0]} is for --backend submitit (not {args.backend})")
    elif args.workers is not None:
        raise ValueError(
            "--workers is for the process and ray backends: a SLURM job trains its points in "
            "turn (--slurm-points-per-job), --slurm-array-parallelism jobs at once"
        )
    options = SlurmOptions(local=args.slurm_local, **given)
    if args.backend == "submitit":
        options.check()  # before the preset's note or anything else
    return options


def run(args) -> int:
    from interp.experiments.sweep import run_sweep
    from interp.io.errors import RunDirectoryError
    from interp.io.interrupt import signal_of
    from interp.io.paths import check_output_path
    from interp.io.plugins import loaded_plugins

    if args.out is not None:
        check_output_path(args.out)  # a link (dangling or not) is refused before any work
    if loaded_plugins() and args.backend == "ray":  # submitit's jobs load the plugins
        raise ValueError(
            "--plugin with --backend ray: Ray workers do not load plugins, so their runs would "
            "lack what the plugins add; use --backend process or serial"
        )
    slurm = _slurm_options(args)
    on_cluster = args.ray_address is not None or (args.backend == "submitit" and not slurm.local)
    if not on_cluster:  # a cluster's cores are its own, not this machine's
        from interp.train.threads import check_thread_counts

        check_thread_counts(
            args.threads_per_worker,
            args.workers,
            threads_name="--threads-per-worker",
            workers_name="--workers",
        )
    spec = _spec(args)
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
            slurm=slurm,
            overwrite=args.overwrite,
            figures=not args.no_figures,
            formats=tuple(args.formats.split(",")),
        )
    except RunDirectoryError:
        raise  # a sweep folder that cannot be used, or is locked: one line and its code, by main
    except RuntimeError as err:
        print_error(err)
        return 3
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM, every running point's state saved
        return 128 + signal_of(err)
    print_summary(summary, spec.fields)
    return 1 if (summary["status"] == "failed").any() else 0
