"""``induction-cliff train``: one training run (a run directory with metrics and checkpoints)."""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from pathlib import Path

from interp.io.escape import for_terminal

NAME = "train"
HELP = "train the network (a run directory with metrics.csv, checkpoints and config.json)"

_EXAMPLES = """\
examples:
  induction-cliff train --preset demo --out runs/demo
  induction-cliff train --preset paper-fig3 --set steps=60000 --seed 1 --out runs/fig3-s1
  induction-cliff train --preset paper-fig3 --set intervention=clamp_prev_token --out runs/clamp
  induction-cliff train --resume --out runs/fig3-s1      # continue an interrupted run
"""


def set_keys_text(width: int | None = None) -> str:
    """The ``--set`` keys with type, default and meaning, from the config dataclasses (and any
    positional encoding a plugin registered)."""
    from interp.cli._base import plain
    from interp.train.overrides import settable_fields

    fields = settable_fields()  # the configs are torch-free: --help imports no model stack
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 100)
    key_w = max(len(f.key) for f in fields)
    lines = [
        "--set keys (KEY=VALUE, repeatable; a key may be prefixed task., model. or train.; the",
        "defaults are the config classes'; a preset changes some: `induction-cliff presets`):",
    ]
    owner = None
    for f in fields:
        if f.owner != owner:
            owner = f.owner
            lines.append(f"\n  {f.group} ({owner}):")
        head = f"    {f.key:<{key_w}s}  {f.type} = {f.default!r}: "
        doc = plain(f.doc) or "(undocumented)"
        lines.append(textwrap.fill(doc, width, initial_indent=head, subsequent_indent=" " * 8))
    return "\n".join(lines)


def EPILOG() -> str:  # noqa: N802 (a command's EPILOG, computed when help is shown)
    return f"{_EXAMPLES}\n{set_keys_text()}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset",
        default=None,
        help="demo (default), paper-fig1d, paper-fig3, tiny, ... "
        "(`induction-cliff presets` lists them)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field (repeatable; the keys are listed below)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the run's seed (default: the preset's, 0)"
    )
    p.add_argument(
        "--out", default=None, metavar="RUN_DIR", help="run directory (default runs/PRESET-seedS)"
    )
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: only when stderr is a terminal)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar (as --no-progress)")


def _configs(args):
    """(task, model, train config, preset note) for the run ``args`` asks for."""
    from interp.io.errors import RunDirectoryError
    from interp.io.rundir import classify, refuse_broken
    from interp.train.overrides import build_configs, parse_overrides, resumed_configs

    for flag, value in (("--preset", args.preset), ("--out", args.out)):
        if value is not None and not value.strip():
            raise ValueError(f"{flag} is empty: give a {flag[2:]} name (or leave the flag out)")
    if args.resume and args.out and classify(args.out) in ("absent", "empty"):
        raise RunDirectoryError(
            f"nothing to resume in {args.out}: it holds no run (no config.json); start it "
            "without --resume"
        )
    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite contradict each other: give one of them")
    if args.resume and not args.out:
        raise ValueError("--resume needs --out (the run directory to continue)")
    if args.resume and classify(args.out) == "broken":
        refuse_broken(args.out)  # never start a preset over a run whose config is unreadable
    overrides = parse_overrides(args.set or [])
    if args.resume and args.preset is None and classify(args.out) == "run":
        # Resuming without --preset: the stored configs are the reference, never a preset's.
        return (*resumed_configs(args.out, overrides, args.seed), "")
    task, model_cfg, train_cfg, preset = build_configs(args.preset or "demo", overrides, args.seed)
    return task, model_cfg, train_cfg, preset.note


def run(args) -> int:
    from interp.analysis.measures import check_reads
    from interp.experiments.standard import train
    from interp.io.paths import check_output_path
    from interp.model.network import InductionNet

    task, model_cfg, train_cfg, note = _configs(args)  # a resumed run's plugins: checked by main
    out = Path(args.out or f"runs/{args.preset or 'demo'}-seed{train_cfg.seed}")
    check_output_path(out)  # a link (dangling or not) is refused before any work
    check_reads(InductionNet(model_cfg, seed=0))  # every measure's hooks exist, before any work
    print(f"run directory: {for_terminal(out)}", file=sys.stderr)
    if note:
        print(f"preset: {for_terminal(note)}", file=sys.stderr)
    if train_cfg.deviation_note():
        print(
            f"DEVIATION from the paper: {for_terminal(train_cfg.deviation_note())}", file=sys.stderr
        )
    progress = False if args.quiet else args.progress  # None: only on a terminal
    metrics = train(
        task,
        model_cfg,
        train_cfg,
        out,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=progress,
    )
    last = metrics.iloc[-1]
    print(
        f"done: step {int(last['step'])}  IC acc {last['ic_acc']:.3f}  "
        f"IC2 acc {last['ic2_acc']:.3f}  "
        f"IW acc {last['iw_acc']:.3f}  -> {out}"
    )
    return 0
