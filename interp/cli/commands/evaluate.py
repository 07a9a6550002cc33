"""``induction-cliff evaluate``: a trained run evaluated at other context lengths."""

from __future__ import annotations

from pathlib import Path

NAME = "evaluate"
HELP = "evaluate a trained run at several lengths (writes RUN_DIR/length_eval.csv)"
EPILOG = """\
examples:
  induction-cliff evaluate runs/rope --n-pairs 8,16,32,64
  induction-cliff evaluate runs/rope --n-pairs 32 --rope-scaling ntk --out ntk.csv
"""


def add_arguments(p) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a trained run directory")
    p.add_argument("--n-pairs", default="8,16,32", help="comma-separated context pairs")
    p.add_argument(
        "--n", type=int, default=None, help="sequences per set (default: the run's n_eval)"
    )
    p.add_argument("--step", type=int, default=None, help="checkpoint (default: the last)")
    p.add_argument(
        "--rope-scaling",
        default=None,
        help="RoPE eval-time rescaling: none, pi, ntk, mixed (default: the run's)",
    )
    p.add_argument(
        "--rope-scale", default="auto", help="rescaling ratio s (auto: n_pairs / training N)"
    )
    p.add_argument(
        "--out", default=None, metavar="PATH", help="CSV path (default RUN_DIR/length_eval.csv)"
    )


def rope_scale(text: str, scaling: str | None) -> float | str:
    """``--rope-scale``: ``auto`` or a finite number > 0, given only with ``--rope-scaling``.

    Raises:
        ValueError: one line naming ``--rope-scale``.
    """
    if text == "auto":
        return text
    from phenomenology.sources import parse_number

    value = parse_number("--rope-scale", text)  # NaN and infinity are refused there
    if not value > 0:
        raise ValueError(f"--rope-scale={text!r} is invalid: must be > 0 (or auto)")
    if scaling is None:
        raise ValueError(
            f"--rope-scale={text!r} has no effect without --rope-scaling (pi, ntk or mixed)"
        )
    return value


def run(args) -> int:
    from interp.io.budget import check_eval_n
    from interp.io.outputs import writing_into
    from interp.io.rundir import load_run

    check_eval_n("--n", args.n)  # judged before the run and the other flags
    args.rope_scale = rope_scale(args.rope_scale, args.rope_scaling)
    check_eval_n("--n", args.n, load_run(args.run_dir))  # a clear error before any work
    out = Path(args.out) if args.out else Path(args.run_dir) / "length_eval.csv"
    with writing_into([out]):  # inside a run: under its lock
        return _evaluate(args, out)


def _evaluate(args, out: Path) -> int:
    from interp.analysis.length import evaluate_lengths, parse_n_pairs
    from interp.io.atomic import write_text_atomic
    from interp.io.rundir import load_run

    scale = args.rope_scale
    df = evaluate_lengths(
        args.run_dir,
        parse_n_pairs(args.n_pairs),
        n=args.n,
        step=args.step,
        rope_scaling=args.rope_scaling,
        rope_scale=scale,
    )
    if args.out:
        path = out
        write_text_atomic(path, df.to_csv(index=False))
    else:
        path = load_run(args.run_dir).write_output("length_eval.csv", df)
    cols = [c for c in ("n_pairs", "ic_acc", "ila1", "tila2", "untrained_positions") if c in df]
    print(df[cols].to_string(index=False))
    print(f"wrote {path}")
    return 0
