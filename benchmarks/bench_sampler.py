"""What drawing the training batches costs on the CPU, and its share of a one-thread training step.

In one process, one thread, the allocator as training sets it (:mod:`interp.train.allocator`),
for each task (paper-fig3, paper-fig1d), in alternating rounds (medians, ms per batch of 128):

- ``host``: :meth:`interp.data.task.TaskGenerator.sample` (``sample_on="host"``, the default
  before run format 5);
- ``device``: :class:`interp.data.device_sampler.DeviceSampler` on the CPU (``sample_on="device"``
  with ``device="cpu"``, the default), which draws its batches many at a time, read as training
  reads it (``next_inputs``: tokens, positions and targets, without the probes' metadata);
- ``generator``: the part of ``device`` that no rewrite of the sampler can cut without changing its
  stream: torch's CPU generator drawing a batch's share of the chunk's uniforms and normals (the
  numbers the stream is defined by; a few uniforms are reserved and unread in some
  configurations, which the stream still draws), and nothing else;
- ``step``: the rest of a training step on a ready batch (the preset's forward, compiled for
  the paper presets (``backend="compiled"``), backward, the author's weight decay and the SGD
  update as the training loop applies them), the denominator of the shares.

Prints each sampler's share of a step (``sample / (sample + step)``) and the ratio
``host/device``; the last line is ``default sampler (device) share of a one-thread step
(paper-fig3): S``.

Usage: python benchmarks/bench_sampler.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from interp.config.train_config import TrainConfig
from interp.data.device_sampler import DeviceSampler
from interp.data.task import TaskGenerator
from interp.model.backends import training_loss
from interp.model.network import InductionNet, ModelConfig
from interp.train import training
from interp.train.allocator import retain_freed_memory
from interp.train.presets import get_preset


def _ms_per_call(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return 1e3 * (time.perf_counter() - t0) / n


def measure(preset: str, rounds: int, n: int) -> dict[str, float]:
    """Median ms per batch of each sampler and of the rest of a step, for ``preset``."""
    p = get_preset(preset)
    task, cfg = p.task, p.train
    gen = TaskGenerator(task, 0)
    stream = torch.Generator().manual_seed(0)
    sampler = DeviceSampler([gen], [0], cfg.batch_size, "cpu")
    model = InductionNet(ModelConfig.from_task(task), seed=0)
    opt = training._make_optimizer(list(model.parameters()), cfg)
    batch = gen.sample(cfg.batch_size, stream)
    loss_fn = training_loss(model, cfg.backend)  # as the training loop computes the loss

    def step() -> None:
        loss = loss_fn(batch.tokens, batch.positions, batch.target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        training._update(opt, cfg)
        loss.item()

    # a batch's share of one refill's draws (DeviceSampler._refill)
    n_uniform = cfg.batch_size * sampler.nu
    n_normal = cfg.batch_size * sampler.nz_seq + sampler.pool * task.D
    numbers = torch.Generator().manual_seed(1)

    def generator() -> None:
        torch.rand(n_uniform, generator=numbers)
        torch.randn(n_normal, generator=numbers)

    work = {
        "host": lambda: gen.sample(cfg.batch_size, stream),
        "device": sampler.next_inputs,
        "generator": generator,
        "step": step,
    }
    for fn in work.values():  # warm-up (and the compiler's first call)
        _ms_per_call(fn, 16)
    times: dict[str, list[float]] = {k: [] for k in work}
    for _ in range(rounds):  # alternate so that the machine's noise hits all alike
        for name, fn in work.items():
            times[name].append(_ms_per_call(fn, n))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about a minute)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    retain_freed_memory()
    rounds, n = (3, 32) if args.quick else (7, 96)
    print(f"one thread, batch 128, {rounds} alternating rounds of {n} batches, medians")
    shares: dict[str, dict[str, float]] = {"host": {}, "device": {}}
    for preset in ("paper-fig3", "paper-fig1d"):
        ms = measure(preset, rounds, n)
        host = ms["host"] / (ms["host"] + ms["step"])
        device = ms["device"] / (ms["device"] + ms["step"])
        shares["host"][preset], shares["device"][preset] = host, device
        print(
            f"{preset}: host {ms['host']:.2f} ms, device (on the CPU) {ms['device']:.2f} ms, rest "
            f"of the step ({get_preset(preset).train.backend} backend) {ms['step']:.2f} ms; share "
            f"of a step: host {host:.1%}, device "
            f"{device:.1%}; host/device: {ms['host'] / ms['device']:.2f}; of the device "
            f"sampler's {ms['device']:.2f} ms, the generator's draws take {ms['generator']:.2f} "
            f"({ms['generator'] / ms['device']:.0%}; alone, a share of "
            f"{ms['generator'] / (ms['generator'] + ms['step']):.1%})"
        )
    default = TrainConfig().sample_on
    print(
        f"default sampler ({default}) share of a one-thread step (paper-fig3): "
        f"{shares[default]['paper-fig3']:.3f}"
    )


if __name__ == "__main__":
    from machine import announce

    announce()
    main()
