"""The suite's own guards: a test that leaves a process or thread behind fails by name, and the
waits of the tests end on events, not on the machine's speed."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from tests import waits
from tests.waits import alive, descendants, nothing_left_running, wait_for


def test_a_process_left_running_fails_the_block_that_started_it_and_is_killed(monkeypatch):
    monkeypatch.setattr(waits, "GRACE_S", 0.5)  # what a test stops may take this long to exit
    with pytest.raises(AssertionError, match=r"leaky left behind: process \d+ \(running\): sleep"):
        with nothing_left_running("leaky"):
            proc = subprocess.Popen(["sleep", "600"])
    assert proc.returncode == -9  # killed, and waited for through its Popen: no warning later
    assert proc.pid not in descendants()


def test_a_process_never_waited_for_fails_the_block_that_started_it():
    with pytest.raises(AssertionError, match=r"process \d+ \(exited, never waited for\)"):
        with nothing_left_running("unwaited"):
            proc = subprocess.Popen([sys.executable, "-c", "pass"])
            wait_for(lambda: not alive(proc.pid), "exit of the child")
    assert proc.returncode == 0  # waited for by the guard


def test_a_thread_left_alive_fails_the_block_that_started_it(monkeypatch):
    monkeypatch.setattr(waits, "GRACE_S", 0.2)
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match="left behind: thread 'stuck'"):
            with nothing_left_running("threaded"):
                threading.Thread(target=release.wait, name="stuck").start()
    finally:
        release.set()


def test_what_a_block_stops_and_waits_for_is_not_a_leak():
    with nothing_left_running("tidy"):
        proc = subprocess.Popen(["sleep", "600"])
        proc.kill()
        proc.wait()
        thread = threading.Thread(target=lambda: None)
        thread.start()  # ends by itself: not joined, not a leak


def test_a_wait_ends_on_its_event_and_names_a_hang():
    wait_for(lambda: True, "nothing")
    with pytest.raises(AssertionError, match="no sign of life after 0 s: a hang"):
        wait_for(lambda: False, "sign of life", timeout=0.1)
