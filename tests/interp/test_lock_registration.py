"""A run's lock as this process sees it (interp.io.lock): released, it is no longer registered as
held, so the next ``holding`` takes the real ``flock`` again instead of trusting a lock that is gone
(which would let another process write the run at the same time)."""

import fcntl
import os

import pytest

from interp.io.lock import LOCK_NAME, RunLock, held, holding


def _locked_by_someone(directory) -> bool:
    """Whether the ``flock`` of ``directory``'s lock file is taken, tried from a separate open file
    description (as another process would)."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def test_a_released_lock_is_no_longer_held(tmp_path):
    lock = RunLock(tmp_path).acquire()
    assert held(tmp_path) and _locked_by_someone(tmp_path)
    lock.release()
    assert not held(tmp_path) and not _locked_by_someone(tmp_path)
    lock.release()  # a second release does nothing
    assert not held(tmp_path)


def test_holding_takes_the_real_lock_again_after_a_release(tmp_path):
    with RunLock(tmp_path):
        pass
    with holding(tmp_path):
        assert held(tmp_path)
        assert _locked_by_someone(tmp_path)  # a real flock, not a stale registration
    assert not held(tmp_path) and not _locked_by_someone(tmp_path)


def test_a_block_that_raises_releases_and_unregisters(tmp_path):
    with pytest.raises(KeyError):
        with holding(tmp_path):
            raise KeyError("boom")
    assert not held(tmp_path) and not _locked_by_someone(tmp_path)
    with holding(tmp_path):
        assert _locked_by_someone(tmp_path)


def test_a_nested_holding_keeps_the_outer_lock(tmp_path):
    with holding(tmp_path):
        with holding(tmp_path):  # reentrant: no second flock, which would deadlock
            assert _locked_by_someone(tmp_path)
        assert held(tmp_path) and _locked_by_someone(tmp_path)  # the outer block still holds it
    assert not held(tmp_path)
