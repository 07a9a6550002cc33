"""The loop's optimisers (interp.train.optim) against torch's: the same weights bit for bit, the
same state dicts both ways, and no import of the compiler."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from interp.train.optim import SGD, Adam
from tests.waits import HANG_S


def _pair(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ours = [torch.randn(5, 7, generator=g, requires_grad=True), torch.randn(3, generator=g)]
    ours[1].requires_grad_()
    ref = [t.detach().clone().requires_grad_() for t in ours]
    return g, ours, ref


def _steps(g, ours, ref, opt, ref_opt, n=4, skip_second_at=None):
    for k in range(n):
        grads = [torch.randn(t.shape, generator=g) for t in ours]
        for i, (a, b, gr) in enumerate(zip(ours, ref, grads)):
            none = i == 1 and k == skip_second_at
            a.grad = None if none else gr.clone()
            b.grad = None if none else gr.clone()
        opt.step()
        ref_opt.step()


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda p: Adam(p, lr=0.003), lambda p: torch.optim.Adam(p, lr=0.003)),
        (
            lambda p: Adam(p, lr=0.01, weight_decay=0.1),
            lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1),
        ),
        (
            lambda p: SGD(p, lr=0.1, weight_decay=0.01, momentum=0.9),
            lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.01, momentum=0.9),
        ),
        (lambda p: SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    ],
)
def test_the_update_and_state_are_torchs_bit_for_bit(ours, theirs):
    """Four steps (one with a weight that got no gradient, which torch leaves alone and whose
    Adam step count stays behind), then the state dicts are equal and each loads into the other's
    optimiser and gives the same next steps."""
    g, a, b = _pair()
    opt, ref = ours(a), theirs(b)
    _steps(g, a, b, opt, ref, skip_second_at=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    mine, torchs = opt.state_dict(), ref.state_dict()
    assert mine["param_groups"] == torchs["param_groups"]
    assert mine["state"].keys() == torchs["state"].keys()
    for k, s in torchs["state"].items():
        assert mine["state"][k].keys() == s.keys()
        assert all(torch.equal(mine["state"][k][n], v) for n, v in s.items())
    # each resumes from the other's state: the next steps still agree
    a2 = [t.detach().clone().requires_grad_() for t in a]
    b2 = [t.detach().clone().requires_grad_() for t in b]
    opt2, ref2 = ours(a2), theirs(b2)
    opt2.load_state_dict(torchs)
    ref2.load_state_dict(mine)
    _steps(g, a2, b2, opt2, ref2, n=2)
    assert all(torch.equal(x, y) for x, y in zip(a2, b2))


def test_adam_first_step_known_answer():
    """Adam's first step moves each weight by lr * sign(grad) (to within eps): m = 0.1 g,
    v = 0.001 g^2, corrected m / sqrt(v) = g / |g|."""
    w = torch.tensor([1.0, -2.0], requires_grad=True)
    opt = Adam([w], lr=0.5)
    w.grad = torch.tensor([3.0, -4.0])
    opt.step()
    assert torch.allclose(w.detach(), torch.tensor([0.5, -1.5]), atol=1e-6)
    assert float(opt.state[w]["step"]) == 1.0


def test_a_mismatched_state_dict_is_refused():
    opt = SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    two = SGD([torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="does not match"):
        opt.load_state_dict(two.state_dict())


def test_the_optimisers_do_not_import_the_compiler():
    """torch.optim's optimisers import torch._dynamo on first use (about as much CPU as torch
    itself); these do not. A fresh interpreter (about 1 s CPU)."""
    code = (
        "import sys, torch\n"
        "from interp.train.optim import SGD, Adam\n"
        "w = torch.zeros(3, requires_grad=True)\n"
        "for o in (SGD([w], lr=0.1, momentum=0.5), Adam([w], lr=0.1)):\n"
        "    w.grad = torch.ones(3); o.step(); o.load_state_dict(o.state_dict()); o.zero_grad()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, check=True
    )
    assert done.stdout.strip() == "False"
