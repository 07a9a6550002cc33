"""What a run directory consists of (:data:`OWNED_FILES`, ``checkpoints/``), checked for links
(:func:`check_run_tree`) and deleted file by file (:func:`remove_run_files`), never following a
link and never touching anything else the directory holds."""

from __future__ import annotations

import os
from pathlib import Path

from interp.io import checkpoints
from interp.io.atomic import clean_temp_files
from interp.io.lock import LOCK_NAME
from interp.io.metrics import PER_CLASS_IW_NAME
from interp.io.paths import check_no_links, open_directory, unlink_in

__all__ = [
    "CONFIG_NAME",
    "METRICS_NAME",
    "CHECKPOINTS",
    "OWNED_FILES",
    "check_run_tree",
    "remove_run_files",
]

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.csv"
CHECKPOINTS = "checkpoints"
# What a run consists of: ``overwrite`` deletes these and nothing else.
OWNED_FILES = (
    CONFIG_NAME,
    METRICS_NAME,
    PER_CLASS_IW_NAME,
    "fit.json",
    "forecast.json",
    "checkpoint_measures.csv",
    "length_eval.csv",
    "llc.csv",
    "llc_calibration.json",
    "quanta.json",
    "report.html",
)


def _has_run_files(path: Path) -> bool:
    ckpt = path / CHECKPOINTS
    if not ckpt.is_dir():
        return False
    return any(_run_file(p.name) for p in ckpt.iterdir())


def check_run_tree(path: str | os.PathLike) -> None:
    """Refuse a run directory with a symbolic link among what a writer reads, writes or deletes
    (:data:`OWNED_FILES`, ``checkpoints/`` and its files, ``metrics.csv``, the lock), before
    anything is read, written or deleted.

    Raises:
        UnsafePathError: naming the link.
    """
    path = Path(path)
    for name in (*OWNED_FILES, CHECKPOINTS, LOCK_NAME):
        check_no_links(path, name)
    ckpt = path / CHECKPOINTS
    if ckpt.is_dir():
        for p in ckpt.iterdir():
            check_no_links(path, Path(CHECKPOINTS) / p.name)


def _run_file(name: str) -> bool:
    return name == checkpoints.RESUME_NAME or bool(checkpoints.STEP_RE.match(name))


def remove_run_files(path: str | os.PathLike) -> list[Path]:
    """Delete the files a run consists of (:data:`OWNED_FILES`, the checkpoints and the writer's
    temporary files) and nothing else. The directory itself stays, with whatever else it holds.
    A symbolic link among them (``checkpoints/`` itself included) is refused before anything is
    deleted (:func:`check_run_tree`).

    Returns:
        What was deleted.
    """
    path = Path(path)
    check_run_tree(path)
    removed = []
    fd = open_directory(path, path)
    try:
        names = set(os.listdir(fd))
        for name in OWNED_FILES:
            if name in names and os.path.isfile(path / name):
                unlink_in(fd, name, path / name)
                removed.append(path / name)
        if CHECKPOINTS in names and os.path.isdir(path / CHECKPOINTS):
            ckpt = path / CHECKPOINTS
            cfd = open_directory(ckpt, path)
            try:
                for name in sorted(os.listdir(cfd)):
                    if _run_file(name) and not os.path.isdir(ckpt / name):
                        unlink_in(cfd, name, ckpt / name)
                        removed.append(ckpt / name)
                removed += clean_temp_files(ckpt)
                empty = not os.listdir(cfd)
            finally:
                os.close(cfd)
            if empty:
                os.rmdir(CHECKPOINTS, dir_fd=fd)
    finally:
        os.close(fd)
    removed += clean_temp_files(path)
    return removed
