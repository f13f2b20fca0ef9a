"""``python -m etops``: the command line (etops.cli)."""

import sys

from .cli import main

sys.exit(main())
