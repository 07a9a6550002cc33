"""``induction-cliff quanta``: per-class in-weights learning steps of a run."""

from __future__ import annotations

NAME = "quanta"
HELP = (
    "per-class IW learning steps against frequency rank, and the IW curve as a sum of per-class "
    "steps (a run trained with per_class_iw > 0; writes RUN_DIR/quanta.json)"
)
EPILOG = """\
example:
  induction-cliff quanta runs/q --threshold 0.5
"""


def add_arguments(p) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with per_class_iw.csv")
    p.add_argument(
        "--threshold",
        default="0.5",
        help="accuracy at which a class counts as learned (two evaluations in a row)",
    )


def _print_result(run, result, threshold: float) -> None:
    fit, frame = result.fit, result.frame
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


def run(args) -> int:
    from interp.analysis.quanta import analyse_run
    from interp.io.rundir import load_run
    from phenomenology.sources import parse_number

    threshold = parse_number("--threshold", args.threshold)
    if not 0 < threshold <= 1:
        raise ValueError(f"--threshold={args.threshold} is invalid: must be in (0, 1]")
    run_ = load_run(args.run_dir)
    from interp.io.outputs import writing

    with writing(run_.path):  # refused while another process writes the run
        result = analyse_run(run_, threshold)
        _print_result(run_, result, threshold)
        path = run_.write_output("quanta.json", result.to_dict())
    print(f"wrote {path}")
    return 0
