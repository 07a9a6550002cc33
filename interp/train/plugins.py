"""The plugin loader, re-exported from its owner :mod:`interp.io.plugins` (this path keeps working
for code that imports it from here)."""

from interp.io.plugins import *  # noqa: F403
from interp.io.plugins import __all__  # noqa: F401
from interp.io.rundir import recorded_plugins  # noqa: F401
