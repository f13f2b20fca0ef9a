"""``python -m etops.conformance [check] ...``: the same as ``python -m etops check``."""

import sys

from .cli import main

sys.exit(main())
