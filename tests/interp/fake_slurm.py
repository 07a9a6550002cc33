"""A fake SLURM for tests: ``sbatch``, ``srun``, ``sacct``, ``squeue``, ``scancel`` and
``scontrol`` as one script (installed under those names by :func:`install`), running a submitted
array's tasks on this machine as background processes.

The state lives in ``$FAKE_SLURM_DIR``: ``<task>.state`` (PENDING, RUNNING, PREEMPTED, COMPLETED,
FAILED, CANCELLED), ``<task>.pid`` (the step's process, written by ``srun``), ``<task>.runs``
(one line per start), and command files the scheduler process of each array reads: ``.requeue``
(``scontrol requeue``: run it again once it exits), ``.cancel`` (``scancel``: SIGTERM, then
CANCELLED) and ``.preempt`` (SIGTERM, state PREEMPTED, then requeued by the fake a second later).
``scancel --signal SIG TASK`` sends SIG to the step at once.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

NAMES = ("sbatch", "srun", "sacct", "squeue", "scancel", "scontrol")
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


def install(bin_dir: Path) -> None:
    """Write the fake commands into ``bin_dir`` (put it first on PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{__file__}" {name} "$@"\n')
        path.chmod(0o755)


def _dir() -> Path:
    return Path(os.environ["FAKE_SLURM_DIR"])


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _tasks(ids) -> list[str]:
    """The task ids named by ``ids`` (``123`` names every task of array 123)."""
    found = []
    for state in sorted(_dir().glob("*.state")):
        tid = state.name[: -len(".state")]
        if any(tid == i or tid.split("_")[0] == i for i in ids):
            found.append(tid)
    return found


def sbatch(args) -> None:
    script = Path(args[-1])
    text = script.read_text()
    array = re.search(r"#SBATCH --array=0-(\d+)%(\d+)", text)
    counter = _dir() / "counter"
    jid = str(int(_read(counter, "1000")) + 1)
    _write(counter, jid)
    tids = [f"{jid}_{i}" for i in range(int(array.group(1)) + 1)] if array else [jid]
    for tid in tids:
        _write(_dir() / f"{tid}.state", "PENDING")
    limit = int(array.group(2)) if array else 1
    subprocess.Popen(
        [sys.executable, __file__, "_schedule", str(script), str(limit), *tids],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print(f"Submitted batch job {jid}")


def _start(script: str, tid: str) -> subprocess.Popen:
    jid, _, index = tid.partition("_")
    env = {**os.environ, "SLURM_JOB_ID": jid + (index or ""), "FAKE_SLURM_TASK": tid}
    env.update(SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_NTASKS="1")
    env["SLURM_JOB_NUM_NODES"] = "1"
    if index:
        env.update(SLURM_ARRAY_JOB_ID=jid, SLURM_ARRAY_TASK_ID=index)
    with open(_dir() / f"{tid}.runs", "a") as f:
        f.write("start\n")
    (_dir() / f"{tid}.pid").unlink(missing_ok=True)
    _write(_dir() / f"{tid}.state", "RUNNING")
    return subprocess.Popen(
        ["bash", script],
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _step_kill(tid: str, sig: int) -> None:
    pid = _read(_dir() / f"{tid}.pid")
    if pid:
        try:
            os.kill(int(pid), sig)
        except ProcessLookupError:
            pass


def _schedule(args) -> None:
    """The scheduler of one submission: runs its tasks, ``limit`` at once."""
    script, limit, tids = args[0], int(args[1]), args[2:]
    running: dict[str, subprocess.Popen] = {}
    requeue_at: dict[str, float] = {}
    d = _dir()
    while True:
        for tid in tids:
            state = _read(d / f"{tid}.state")
            cmd = {c: (d / f"{tid}.{c}").exists() for c in ("cancel", "preempt", "requeue")}
            if cmd["cancel"] and state in ("PENDING", "PREEMPTED"):
                (d / f"{tid}.cancel").unlink()
                _write(d / f"{tid}.state", "CANCELLED")
                requeue_at.pop(tid, None)
            elif tid in running:
                if cmd["preempt"] and state == "RUNNING":
                    _write(d / f"{tid}.state", "PREEMPTED")
                    _step_kill(tid, signal.SIGTERM)
                if cmd["cancel"] and state == "RUNNING":
                    _write(d / f"{tid}.state", "CANCELLING")
                    _step_kill(tid, signal.SIGTERM)
                rc = running[tid].poll()
                if rc is None:
                    continue
                del running[tid]
                if cmd["cancel"]:
                    (d / f"{tid}.cancel").unlink()
                    _write(d / f"{tid}.state", "CANCELLED")
                elif cmd["preempt"]:
                    (d / f"{tid}.preempt").unlink()
                    requeue_at[tid] = time.monotonic() + 1.0  # PREEMPTED, then requeued
                elif cmd["requeue"]:
                    (d / f"{tid}.requeue").unlink()
                    _write(d / f"{tid}.state", "PENDING")
                else:
                    _write(d / f"{tid}.state", "COMPLETED" if rc == 0 else "FAILED")
            elif tid in requeue_at and time.monotonic() > requeue_at[tid]:
                del requeue_at[tid]
                _write(d / f"{tid}.state", "PENDING")
        for tid in tids:
            if len(running) < limit and _read(d / f"{tid}.state") == "PENDING":
                running[tid] = _start(script, tid)
        if not running and not requeue_at:
            if all(_read(d / f"{t}.state") in TERMINAL for t in tids):
                return
        time.sleep(0.05)


def srun(args) -> None:
    """Run the step: this process becomes the command (its pid is the step's)."""
    out = err = None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt in ("--output", "--error"):
            value = args.pop(0)
            if opt == "--output":
                out = value
            else:
                err = value
    tid = os.environ.get("FAKE_SLURM_TASK", "0")
    jid, _, index = tid.partition("_")

    def expand(path: str) -> str:
        return path.replace("%A", jid).replace("%a", index).replace("%j", tid).replace("%t", "0")

    _write(_dir() / f"{tid}.pid", str(os.getpid()))
    for path, fd in ((out, 1), (err, 2)):
        if path:
            f = os.open(expand(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(f, fd)
    os.execvp(args[0], args)


def sacct(args) -> None:
    ids = [args[i + 1] for i, a in enumerate(args) if a == "-j"]
    print("JobID|State|NodeList")
    for tid in _tasks(ids):
        state = _read(_dir() / f"{tid}.state")
        print(f"{tid}|{'RUNNING' if state == 'CANCELLING' else state}|fakenode")


def squeue(args) -> None:
    print("JOBID STATE")
    for tid in _tasks([p.name.split("_")[0] for p in _dir().glob("*.state")]):
        state = _read(_dir() / f"{tid}.state")
        if state not in TERMINAL:
            print(f"{tid} {state}")


def scancel(args) -> None:
    sig = None
    ids = []
    it = iter(args)
    for a in it:
        if a == "--signal":
            sig = next(it)
        elif a.startswith("--signal="):
            sig = a.split("=", 1)[1]
        else:
            ids.append(a)
    for tid in _tasks(ids):
        if sig is None:
            (_dir() / f"{tid}.cancel").touch()
        else:
            name = sig if sig.startswith("SIG") else "SIG" + sig
            _step_kill(tid, getattr(signal, name))


def scontrol(args) -> None:
    if args[:1] == ["requeue"]:
        for tid in _tasks(args[1:]):
            (_dir() / f"{tid}.requeue").touch()


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    {
        "sbatch": sbatch,
        "srun": srun,
        "sacct": sacct,
        "squeue": squeue,
        "scancel": scancel,
        "scontrol": scontrol,
        "_schedule": _schedule,
    }[command](rest)
