"""On a GPU: do the training paths compute the same function there as the hooked model on the CPU?

In float64 on the GPU, the fast path (:func:`interp.model.fast.fast_logits`), the hooked model and a
stack of three models (:func:`interp.model.stacked.stacked_logits`) are compared with the hooked
model in float64 on the CPU (logits and every parameter's gradient; the largest difference relative
to the reference's largest entry is printed, and must be under 1e-9). In float32, the fast path on
the GPU is compared with the float64 CPU reference (the error float32 and TF32 arithmetic bring).
Exits 1 if a check fails; prints one line per check.

Part of ``benchmarks/gpu_check.sh`` (the GPU checks). ``--device cpu`` runs the same checks
on the CPU (for trying the script where there is no GPU).
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from interp.data.task import TaskGenerator
from interp.model.fast import fast_logits
from interp.model.network import InductionNet, ModelConfig
from interp.model.stacked import ModelStack, stacked_logits
from interp.train.presets import get_preset


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _logits_and_grads(model, forward, target):
    """``forward(model)``'s logits and, after a cross-entropy backward, each parameter's
    gradient."""
    model.zero_grad(set_to_none=True)
    logits = forward(model)
    F.cross_entropy(logits, target.to(logits.device)).backward()
    return logits, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def main(device: str = "cuda") -> int:
    if device == "cuda" and not torch.cuda.is_available():
        print("gpu_equality: torch sees no GPU here", file=sys.stderr)
        return 1
    task = get_preset("paper-fig3").task
    cfg = ModelConfig.from_task(task)
    gen = TaskGenerator(task, 0)
    batches = [gen.sample(128, torch.Generator().manual_seed(10 + i)) for i in range(3)]
    failures = 0

    def report(what: str, err: float, limit: float) -> None:
        nonlocal failures
        ok = err < limit
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max relative difference {err:.2e} (< {limit:g})")

    # The reference: the hooked model in float64 on the CPU.
    b0 = batches[0]
    ref_model = InductionNet(cfg, seed=0).double()
    ref, ref_grads = _logits_and_grads(
        ref_model, lambda m: m(b0.tokens.double(), b0.positions), b0.target
    )
    dev = torch.device(device)
    tokens, positions = b0.tokens.double().to(dev), b0.positions.to(dev)
    for name, fn in (
        ("hooked model", lambda m: m(tokens, positions)),
        ("fast path", lambda m: fast_logits(m, tokens, positions)),
    ):
        model = InductionNet(cfg, seed=0).double().to(dev)
        logits, grads = _logits_and_grads(model, fn, b0.target)
        err = max([_rel(logits, ref)] + [_rel(grads[n], ref_grads[n]) for n in ref_grads])
        report(
            f"float64 {device} {name} vs float64 CPU hooked model (logits, gradients)", err, 1e-9
        )

    # A stack of three seeds on the GPU against three hooked models on the CPU.
    stack = ModelStack([InductionNet(cfg, seed=s).double().to(dev) for s in range(3)])
    st_tokens = torch.stack([b.tokens.double() for b in batches]).to(dev)
    st_positions = torch.stack([b.positions for b in batches]).to(dev)
    targets = torch.stack([b.target for b in batches]).to(dev)
    logits = stacked_logits(stack, st_tokens, st_positions)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(3, -1).mean(
        1
    ).sum().backward()
    err = 0.0
    for i, batch in enumerate(batches):
        model = InductionNet(cfg, seed=i).double()
        ref_i, grads_i = _logits_and_grads(
            model, lambda m, b=batch: m(b.tokens.double(), b.positions), batch.target
        )
        err = max([err, _rel(logits[i], ref_i)])
        err = max([err] + [_rel(stack.params[n].grad[i], g) for n, g in grads_i.items()])
    report(f"float64 {device} stack of 3 vs three float64 CPU hooked models", err, 1e-9)

    # float32 on the GPU, as training runs there, against the float64 reference.
    for tf32 in (False, True) if device == "cuda" else (False,):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        model = InductionNet(cfg, seed=0).to(dev)
        logits = fast_logits(model, b0.tokens.to(dev), positions)
        label = "TF32 matmuls" if tf32 else "TF32 off"
        report(
            f"float32 {device} fast path ({label}) vs float64 CPU logits", _rel(logits, ref), 1e-2
        )
    torch.backends.cuda.matmul.allow_tf32 = False
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    sys.exit(main(parser.parse_args().device))
