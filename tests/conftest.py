import os

import pytest
import torch

from tests.waits import nothing_left_running, record_popens

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

# Two threads on the 2-core machine the suite is sized for; one per worker when pytest-xdist
# runs the files in parallel processes (each worker then has a core).
torch.set_num_threads(
    1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads())
)


@pytest.fixture(autouse=True, scope="session")
def _compile_cache_of_the_test_run(tmp_path_factory):
    """The tests never read or write the user's compile cache (``~/.cache/induction-cliff``):
    ``backend=auto`` then chooses from what the test run itself compiled, whatever earlier runs
    left on the machine (subprocesses inherit the folder)."""
    before = os.environ.get("INDUCTION_CLIFF_CACHE")
    os.environ["INDUCTION_CLIFF_CACHE"] = str(tmp_path_factory.mktemp("compile-cache"))
    yield
    if before is None:
        del os.environ["INDUCTION_CLIFF_CACHE"]
    else:
        os.environ["INDUCTION_CLIFF_CACHE"] = before


@pytest.fixture(autouse=True)
def _global_rng_untouched():
    """Library code must not touch torch's global RNG (randomness is explicit)."""
    state = torch.random.get_rng_state()
    yield
    assert torch.equal(state, torch.random.get_rng_state()), "the test changed torch's global RNG"


record_popens()


@pytest.fixture(autouse=True)
def _nothing_left_running(request):
    """A test that leaves a process it started running (or exited and never waited for), or a
    non-daemon thread it started alive, fails naming them (and its processes are killed, so that
    the next test starts clean)."""
    with nothing_left_running(request.node.nodeid):
        yield
