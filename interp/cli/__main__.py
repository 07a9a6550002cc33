"""``python -m interp.cli``: the ``induction-cliff`` command."""

import sys

from interp.cli import main

sys.exit(main())
