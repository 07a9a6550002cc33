"""``induction-cliff import``: a state dict of this network trained elsewhere as a run directory."""

from __future__ import annotations

NAME = "import"
HELP = (
    "turn a state dict of this network trained elsewhere into a run directory (config.json, the "
    "weights as the checkpoint of --step, one evaluation in metrics.csv); a tensor that is "
    "missing, extra or of another shape is refused with one line naming it, before anything is "
    "written"
)
EPILOG = """\
example:
  induction-cliff import trained.pt runs/imported --preset demo --step 3500
"""


def add_arguments(p) -> None:
    p.add_argument(
        "weights",
        metavar="PATH",
        help="the state dict (.safetensors or torch.save, or a checkpoint dict holding one)",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to write")
    p.add_argument("--preset", default="demo", help="the setting the weights belong to")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the run's seed (its evaluation sets; default: the preset's)",
    )
    p.add_argument("--step", type=int, default=0, help="training step of the weights")
    p.add_argument("--overwrite", action="store_true", help="replace a run in RUN_DIR")


def run(args) -> int:
    from interp.experiments.importer import import_weights
    from interp.io.paths import check_output_path
    from interp.io.rundir import load_run
    from interp.train.overrides import build_configs, parse_overrides

    check_output_path(args.run_dir)  # a link (dangling or not) is refused before any work
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
