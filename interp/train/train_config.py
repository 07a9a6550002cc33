"""The training config, re-exported from its owner :mod:`interp.config.train_config` (this path
keeps working for code that imports it from here)."""

from interp.config.train_config import *  # noqa: F403
from interp.config.train_config import __all__  # noqa: F401
