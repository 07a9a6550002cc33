import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _global_rng_untouched():
    """Library code must not touch torch's global RNG (randomness is explicit)."""
    state = torch.random.get_rng_state()
    yield
    assert torch.equal(state, torch.random.get_rng_state()), "the test changed torch's global RNG"
