"""``python -m bcg.cli``: the ``bcg`` command."""

import sys

from bcg.cli import main

sys.exit(main())
