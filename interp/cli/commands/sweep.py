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
        choices=["process", "ray", "serial"],
        help="process pool, Ray (pip install -e '.[ray]'), or in-process",
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


def run(args) -> int:
    from interp.experiments.sweep import run_sweep
    from interp.io.errors import RunDirectoryError
    from interp.io.interrupt import signal_of
    from interp.io.plugins import loaded_plugins

    if loaded_plugins() and args.backend == "ray":
        raise ValueError(
            "--plugin with --backend ray: Ray workers do not load plugins, so their runs would "
            "lack what the plugins add; use --backend process or serial"
        )
    if args.ray_address is None:  # a Ray cluster's cores are its own, not this machine's
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
