"""The commands of ``induction-cliff``, one module each, listed here in the order ``--help``
shows them.

A command module declares::

    NAME = "quanta"                      # what the user types
    HELP = "one line: what it does"      # the command list and the command's description
    EPILOG = "example:\\n  induction-cliff quanta runs/q"   # or a function returning the text

    def add_arguments(parser): ...       # its positionals (RUN_DIR, PATH, ...) and options
    def run(args) -> int: ...            # calls the library; returns the exit status

Adding a command is one such module and its name in :data:`COMMANDS`. Errors are raised as
``ValueError`` (exit 2) or the run-directory errors (exit 3); ``interp.cli.main`` prints them as
one ``error: ...`` line.
"""

COMMANDS = (
    "train",
    "measures",
    "transition",
    "fit",
    "forecast",
    "figures",
    "quanta",
    "report",
    "import_weights",
    "evaluate",
    "sweep",
    "sweep_summary",
    "llc",
    "reproduce",
    "presets",
    "listing",
    "demo",
    "notebooks",
)
