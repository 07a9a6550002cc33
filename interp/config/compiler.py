"""Whether this machine can compile a run's training step (``TrainConfig.backend="compiled"``,
:mod:`interp.model.compiled`), and where the compiler keeps its artefacts: what
:func:`interp.config.train_config.check_device` asks before a run opens its folder. Torch and its
compiler are imported only when a compiled run is checked."""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["CACHE_ENV", "check_compiler", "compile_cache_dir", "compiles_on"]

_INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
CACHE_ENV = "INDUCTION_CLIFF_CACHE"  # a folder for the compile cache, or "off"


def compiles_on(device) -> bool:
    """Whether ``backend="compiled"`` compiles on ``device``: the CPU, the device it is tested
    on; on another device the backend trains as ``fast`` (and so stacks, :func:`train_many
    <interp.train.training.train_many>`)."""
    import torch

    return torch.device(device).type == "cpu"


def check_compiler(device) -> None:
    """A one-line ValueError when ``torch.compile`` cannot build code for ``device`` here."""
    if not compiles_on(device):
        return
    _own_cache_dir()  # first: inductor's own calls would set its default folder
    from torch._inductor import cpp_builder

    try:
        compiler = cpp_builder.get_cpp_compiler()
    except Exception as err:  # noqa: BLE001 - inductor raises several kinds
        compiler, why = None, str(err).splitlines()[0] if str(err) else type(err).__name__
    else:
        why = f"{compiler!r} was not found"
    if compiler is None or shutil.which(compiler) is None:
        raise ValueError(
            "TrainConfig.backend='compiled' is invalid here: torch.compile needs a C++ compiler "
            f"on the CPU ({why}); install one (g++) or use backend=fast"
        )


def _user_inductor_dir() -> str:
    """``TORCHINDUCTOR_CACHE_DIR`` when the user set it ('' else): torch sets it to its own
    temporary default when parts of it are imported, which is not a choice of the user's."""
    value = os.environ.get(_INDUCTOR_ENV, "")
    if value:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        if os.path.normpath(value) == os.path.normpath(default_cache_dir()):
            return ""
    return value


def compile_cache_dir() -> Path | None:
    """The folder the compiler's artefacts are kept in across processes, or ``None`` when the
    cache is off (``INDUCTION_CLIFF_CACHE=off``). Never inside a run directory."""
    named = os.environ.get(CACHE_ENV, "").strip()
    if named.lower() in ("off", "0", "false", "no", "none"):
        return None
    if named:
        return Path(named).expanduser() / "inductor"
    if _user_inductor_dir():
        return Path(_user_inductor_dir())
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "induction-cliff" / "inductor"


def _own_cache_dir() -> None:
    """Point the compiler's cache at :func:`compile_cache_dir` (created if needed), or, with the
    cache off or not writable, at a temporary folder of this process removed at exit."""
    if _user_inductor_dir() and not os.environ.get(CACHE_ENV):
        return
    path = compile_cache_dir()
    if path is not None:
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
            os.environ[_INDUCTOR_ENV] = str(path)
            return
    path = tempfile.mkdtemp(prefix="induction-cliff-compile-")
    os.environ[_INDUCTOR_ENV] = path
    # multiprocessing's exit hook runs in a pool's worker processes too (they skip atexit), and
    # in the main process at exit.
    multiprocessing.util.Finalize(None, shutil.rmtree, (path,), {"ignore_errors": True}, 0)
