"""The training loop's optimisers: SGD (with momentum and coupled decay) and Adam, as multi-tensor
updates, with the state dicts of ``torch.optim.SGD`` and ``torch.optim.Adam``.

They compute what torch's own single-tensor updates on the CPU compute, operation for operation
(the same kernels, in the same order, with the same scalars), so their weights are torch's bit for
bit (``tests/interp/test_optim.py``), and a checkpoint's optimizer state is read and written in
torch's format both ways. Two things differ: one multi-tensor call per operation instead of one
per weight, and no import of ``torch._dynamo``, which every ``torch.optim`` optimiser pulls in on
first use (its methods are wrapped to be skipped by the compiler): about as much CPU as importing
torch, at the start of every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

__all__ = ["SGD", "Adam"]


class _Optimizer:
    """What the loop uses of ``torch.optim.Optimizer``: ``param_groups`` (one group), ``state``
    (by parameter), ``zero_grad``, ``step``, ``state_dict`` and ``load_state_dict``."""

    defaults: dict[str, Any]

    def __init__(self, params: Iterable[Tensor], **hyper: Any) -> None:
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        self.param_groups: list[dict[str, Any]] = [{"params": params, **hyper}]
        self.state: dict[Tensor, dict[str, Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_().zero_()

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: per-parameter state by position, the groups with positions."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            groups.append(
                {k: v for k, v in group.items() if k != "params"}
                | {"params": [index[id(p)] for p in group["params"]]}
            )
        params = [p for group in self.param_groups for p in group["params"]]
        state = {index[id(p)]: dict(self.state[p]) for p in params if p in self.state}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As torch does it: the saved hyperparameters replace the current ones, state tensors
        move to their parameter's device (and dtype; an Adam ``step`` stays as saved)."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
            len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)
        ):
            raise ValueError("loaded state dict does not match the optimizer's parameters")
        by_index = {}
        for s, g in zip(saved, self.param_groups):
            by_index.update(zip(s["params"], g["params"]))
        self.state = {}
        for i, values in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {
                k: v if k == "step" or not torch.is_tensor(v) else v.to(p.device, p.dtype)
                for k, v in values.items()
            }
        self.param_groups = [
            {k: v for k, v in s.items() if k != "params"} | {"params": g["params"]}
            for s, g in zip(saved, self.param_groups)
        ]


class SGD(_Optimizer):
    """``torch.optim.SGD``'s update (no dampening, no Nesterov): ``g = grad + wd theta``;
    with momentum ``b = g`` the first step, then ``b = momentum b + g``; ``theta -= lr b``."""

    def __init__(
        self, params: Iterable[Tensor], lr: float, weight_decay: float = 0.0, momentum: float = 0.0
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            momentum=momentum,
            dampening=0,
            weight_decay=weight_decay,
            nesterov=False,
            maximize=False,
            foreach=None,
            differentiable=False,
            fused=None,
        )

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if group["weight_decay"]:
                grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
            if group["momentum"]:
                grads = self._momentum(group, params, grads)
            torch._foreach_add_(params, grads, alpha=-group["lr"])

    def _momentum(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor]):
        kept = [i for i, p in enumerate(params) if "momentum_buffer" in self.state.get(p, {})]
        if kept:
            bufs = [self.state[params[i]]["momentum_buffer"] for i in kept]
            torch._foreach_mul_(bufs, group["momentum"])
            torch._foreach_add_(bufs, [grads[i] for i in kept], alpha=1 - group["dampening"])
        for p, g in zip(params, grads):
            if "momentum_buffer" not in self.state.get(p, {}):
                self.state.setdefault(p, {})["momentum_buffer"] = torch.clone(g).detach()
        return [self.state[p]["momentum_buffer"] for p in params]


class Adam(_Optimizer):
    """``torch.optim.Adam``'s update (no amsgrad): the single-tensor form's operations, each for
    all weights at once, with the step count kept as a number (torch reads it back from a tensor
    every step) and mirrored in the state's ``step`` tensor."""

    def __init__(self, params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=weight_decay,
            amsgrad=False,
            maximize=False,
            foreach=None,
            capturable=False,
            differentiable=False,
            fused=None,
            decoupled_weight_decay=False,
        )
        self._steps: dict[Tensor, float] = {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._steps = {p: float(s["step"]) for p, s in self.state.items()}

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> None:
        beta1, beta2 = group["betas"]
        for p in params:
            if p not in self.state:
                self.state[p] = {
                    "step": torch.tensor(0.0),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
                self._steps[p] = 0.0
        states = [self.state[p] for p in params]
        torch._foreach_add_([s["step"] for s in states], 1)
        grads = [p.grad for p in params]
        if group["weight_decay"]:
            grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        steps = {self._steps[p] + 1 for p in params}
        for p in params:
            self._steps[p] += 1
        if len(steps) == 1:  # the usual case: every weight has taken as many steps
            self._apply(group, params, exp_avgs, exp_avg_sqs, steps.pop())
        else:
            for p, m, v in zip(params, exp_avgs, exp_avg_sqs):
                self._apply(group, [p], [m], [v], self._steps[p])

    @staticmethod
    def _apply(group, params, exp_avgs, exp_avg_sqs, step: float) -> None:
        beta1, beta2 = group["betas"]
        step_size = group["lr"] / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, group["eps"])
        torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)
