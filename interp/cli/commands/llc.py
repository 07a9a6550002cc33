"""``induction-cliff llc``: the local learning coefficient at a run's checkpoints (SGLD)."""

from __future__ import annotations

import logging
import math
import os
import sys
from pathlib import Path

from interp.cli._base import print_error
from interp.io.escape import for_terminal

NAME = "llc"
HELP = "local learning coefficient at a run's checkpoints (devinterp SGLD; RUN_DIR/llc.csv)"
EPILOG = """\
examples:
  induction-cliff llc runs/fig3-s0 --calibrate            # choose epsilon and nbeta first
  induction-cliff llc runs/fig3-s0 --from-calibration --steps 0,5000,10000
"""


def add_arguments(p) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a trained run directory")
    p.add_argument("--steps", default="all", help="checkpoint steps a,b,c or all")
    p.add_argument("--chains", type=int, default=4, help="SGLD chains per checkpoint")
    p.add_argument("--draws", type=int, default=100, help="draws per chain after burn-in")
    p.add_argument("--burnin", type=int, default=50, help="SGLD burn-in steps per chain")
    p.add_argument("--epsilon", type=float, default=1e-4, help="SGLD step size")
    p.add_argument(
        "--nbeta", type=float, default=None, help="inverse temperature (default m/log m)"
    )
    p.add_argument("--localization", type=float, default=100.0, help="SGLD localization gamma")
    p.add_argument("--batch-size", type=int, default=None, help="default: the run's batch size")
    p.add_argument("--n-batches", type=int, default=16, help="batches drawn from the task")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
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
    p.add_argument(
        "--calibrate-step", type=int, default=None, help="the checkpoint (default: the last)"
    )
    p.add_argument(
        "--epsilons", default="1e-5,3e-5,1e-4,3e-4,1e-3", help="step sizes of --calibrate"
    )
    p.add_argument(
        "--nbetas",
        default=None,
        help="inverse temperatures of --calibrate (default: m/log m times 0.3, 1, 3)",
    )


def run(args) -> int:
    # The library logs each flagged estimate; the command prints it once, as a "warning:" line.
    # (No propagation to the "interp" handler; the null handler keeps logging's last resort quiet.)
    llc_log = logging.getLogger("interp.analysis.llc")
    quiet = logging.NullHandler()
    propagate, llc_log.propagate = llc_log.propagate, False
    llc_log.addHandler(quiet)
    try:
        return _llc_command(args)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM while the workers run
        from interp.io.interrupt import signal_of

        print(
            f"interrupted: the finished checkpoints are in {Path(args.run_dir) / 'llc.csv'}; run "
            "the same command again to go on",
            file=sys.stderr,
        )
        return 128 + signal_of(err)
    finally:
        llc_log.propagate = propagate
        llc_log.removeHandler(quiet)


def _floats(text, name):
    try:
        return [float(v) for v in text.split(",")] if text else None
    except ValueError:
        raise ValueError(f"{name}={text!r} is invalid: comma-separated numbers") from None


def _config(args):
    """(the sampler's LLCConfig, workers), the thread options checked and applied."""
    from interp.analysis.llc import LLCConfig, chosen_from_calibration
    from interp.train.threads import check_thread_counts

    check_thread_counts(
        args.threads, args.workers, threads_name="--threads", workers_name="--workers"
    )
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
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
    return cfg, workers


def _calibrate(args, cfg) -> int:
    from interp.analysis.llc import calibrate_llc
    from interp.viz.llc_plots import write_calibration_traces

    record, sweep = calibrate_llc(
        args.run_dir,
        args.calibrate_step,
        _floats(args.epsilons, "--epsilons"),
        _floats(args.nbetas, "--nbetas"),
        cfg,
    )
    write_calibration_traces(args.run_dir, sweep, step=record["step"], chosen=record["chosen"])
    for row in record["table"]:
        warn = f"  WARNING: {row['warning']}" if row["warning"] else ""
        print(
            f"eps {row['epsilon']:<8g} nbeta {row['nbeta']:<8.4g} LLC {row['llc_mean']:.4g}"
            f" ± {row['llc_std']:.2g}  MALA {row['mala_acceptance']:.2f}{warn}"
        )
    print(f"chosen: {record['chosen']}: {record['reason']}")
    print("wrote llc_calibration.json, llc_calibration.csv, llc_calibration_traces.html")
    return 0


def _report(step, est) -> None:
    if est is None:
        print(f"step {step}: already in llc.csv, skipped")
        return
    print(
        f"step {step}: LLC {est.llc_mean:.4g} ± {est.llc_std:.2g} "
        f"(MALA {est.mala_acceptance:.2f}, {est.seconds:.1f} s)",
        flush=True,
    )
    if est.warning:
        print(f"warning: step {step}: {for_terminal(est.warning)}", file=sys.stderr, flush=True)


def _llc_command(args) -> int:
    from interp.analysis.llc import llc_over_checkpoints, parse_steps
    from interp.io.rundir import RunDirectoryError, load_run

    try:
        run_ = load_run(args.run_dir)
    except RunDirectoryError as err:
        raise RunDirectoryError(f"RUN_DIR: {err}") from None
    cfg, workers = _config(args)
    try:
        if args.calibrate:
            return _calibrate(args, cfg)
        steps = parse_steps(args.steps, run_.checkpoint_steps)
        df = llc_over_checkpoints(
            args.run_dir, cfg, steps, overwrite=args.overwrite, on_result=_report, workers=workers
        )
    except (
        ImportError
    ) as err:  # a tool it needs (devinterp) is missing: as figures without chromium
        print_error(err)
        return 3
    flagged = int((df["warning"] != "").sum())
    secs = [v for v in df["seconds"] if isinstance(v, float) and math.isfinite(v)]
    print(
        f"wrote {Path(args.run_dir) / 'llc.csv'} ({len(df)} checkpoints, {flagged} flagged; "
        f"{sum(secs):.0f} s of sampling recorded)"
    )
    return 0
