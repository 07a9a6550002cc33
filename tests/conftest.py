import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

# Two threads on the 2-core machine the suite is sized for; one per worker when pytest-xdist
# runs the files in parallel processes (each worker then has a core).
torch.set_num_threads(
    1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads())
)


@pytest.fixture(autouse=True)
def _global_rng_untouched():
    """Library code must not touch torch's global RNG (randomness is explicit)."""
    state = torch.random.get_rng_state()
    yield
    assert torch.equal(state, torch.random.get_rng_state()), "the test changed torch's global RNG"
