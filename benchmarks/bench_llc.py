"""Cost of the LLC estimate per checkpoint (target: the demo run in a few minutes on 2 cores).

On a run directory (default ``runs/demo``; train it with ``induction-cliff train --preset demo
--out runs/demo``), measures in one process:

- the median time of one plain SGD step of the run's network (forward on the fast path, backward,
  update; batch of the LLC settings), the floor any SGLD step costs;
- the seconds of one LLC estimate (:func:`interp.analysis.llc.estimate_llc`, devinterp's SGLD with
  its MALA acceptance callback) on the last checkpoint at the given settings, and per SGLD step;
- the projected cost of the whole run: seconds per checkpoint times its checkpoints, and (with
  ``--threads 1``) divided among the one-thread workers ``induction-cliff llc`` starts by default.

The last lines read ``seconds per checkpoint: S`` and ``whole run (N checkpoints): T s``.

Usage: python benchmarks/bench_llc.py [RUN_DIR] [--threads 1] [--chains 4] [--draws 100]
    [--burnin 50] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from interp.analysis.llc import LLCConfig, estimate_llc, network_loss, run_batches
from interp.io.rundir import load_run
from interp.model.fast import fast_logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", nargs="?", default="runs/demo")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chains", type=int, default=LLCConfig().chains)
    parser.add_argument("--draws", type=int, default=LLCConfig().draws)
    parser.add_argument("--burnin", type=int, default=LLCConfig().burnin)
    parser.add_argument("--quick", action="store_true", help="1 chain of 30 draws, no burn-in")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = load_run(args.run_dir)
    cfg = LLCConfig(chains=args.chains, draws=args.draws, burnin=args.burnin)
    if args.quick:
        cfg = LLCConfig(chains=1, draws=30, burnin=0)
    cfg = cfg.resolved(run.train_config.batch_size)
    step = run.checkpoint_steps[-1]
    model = run.load_model(step)
    batches = run_batches(run, cfg.batch_size, cfg.n_batches, cfg.seed)

    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: the weights stay the checkpoint's

    def sgd_step(b):
        loss = F.cross_entropy(fast_logits(model, b[0], b[1]), b[2])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for b in batches[:3]:
        sgd_step(b)
    times = []
    for b in batches * 2:
        t0 = time.perf_counter()
        sgd_step(b)
        times.append(time.perf_counter() - t0)
    plain = statistics.median(times)

    estimate_llc(model, batches[:2], network_loss, LLCConfig(chains=1, draws=3, nbeta=cfg.nbeta))
    est = estimate_llc(model, batches, network_loss, cfg)
    n_steps = cfg.chains * (cfg.draws + cfg.burnin)
    n_ckpt = len(run.checkpoint_steps)
    print(f"run {args.run_dir}, checkpoint {step}, {args.threads} thread(s)")
    print(
        f"settings: {cfg.chains} chains x ({cfg.burnin} burn-in + {cfg.draws} draws), "
        f"batch {cfg.batch_size}, eps {cfg.epsilon:g}, nbeta {cfg.nbeta:.3g}, "
        f"gamma {cfg.localization:g}"
    )
    print(f"plain SGD step: {plain * 1e3:.1f} ms")
    print(
        f"SGLD step (devinterp, MALA callback): {est.seconds / n_steps * 1e3:.1f} ms "
        f"({est.seconds / n_steps / plain:.2f}x the plain step)"
    )
    print(f"LLC {est.llc_mean:.4g} ± {est.llc_std:.2g}; warning: {est.warning or 'none'}")
    print(f"seconds per checkpoint: {est.seconds:.1f}")
    print(f"whole run ({n_ckpt} checkpoints): {est.seconds * n_ckpt:.0f} s")
    if args.threads == 1:
        cpus = os.cpu_count() or 1
        print(
            f"projected for `induction-cliff llc` with its default {cpus} one-thread worker(s): "
            f"{est.seconds * n_ckpt / cpus:.0f} s (measure it: `time induction-cliff llc RUN_DIR`)"
        )


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
