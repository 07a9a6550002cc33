"""interp.train.allocator: glibc keeps freed step tensors instead of unmapping them."""

import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None

# In a fresh interpreter: does a 1 MiB malloc get its own mapping (glibc's default threshold is
# 128 KiB), before and after retain_freed_memory()? mallinfo2().hblks counts mmapped blocks.
PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, sys
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = MallInfo2
    def mapped_by(size):
        before = libc.mallinfo2().hblks
        p = libc.malloc(size)
        during = libc.mallinfo2().hblks
        libc.free(p)
        return during - before
    first = mapped_by(2**20)
    from interp.train.allocator import retain_freed_memory
    ok = retain_freed_memory()
    print(first, int(ok), mapped_by(2**20), mapped_by(8 * 2**20))
    """
)


def _probe(env_extra: dict) -> list[int]:
    env = {**os.environ, **env_extra}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return [int(x) for x in done.stdout.split()]


@pytest.mark.skipif(not GLIBC, reason="the allocator thresholds are glibc's")
def test_after_retain_a_megabyte_block_comes_from_the_heap_not_a_fresh_mapping():
    first, ok, one_mib, eight_mib = _probe({})
    assert first == 1  # glibc's default: a 1 MiB block is mmapped (and unmapped on free)
    assert ok == 1
    assert (one_mib, eight_mib) == (0, 0)  # below the raised 32 MiB threshold: heap blocks


@pytest.mark.skipif(not GLIBC, reason="the allocator thresholds are glibc's")
def test_the_environment_switch_keeps_glibc_defaults():
    first, ok, _, eight_mib = _probe({"INDUCTION_CLIFF_MALLOC": "default"})
    # glibc's dynamic threshold rose to 1 MiB when the first block was freed; 8 MiB is above it
    assert (first, ok, eight_mib) == (1, 0, 1)


def test_training_turns_it_on(tmp_path, monkeypatch):
    from interp.experiments.standard import train
    from interp.train.presets import get_preset

    calls = []
    monkeypatch.setattr(
        "interp.train.training.retain_freed_memory", lambda: calls.append(1) or True
    )
    p = get_preset("tiny")
    train(p.task, None, replace(p.train, steps=2, eval_every=2), progress=False)
    assert calls == [1]
