"""``python -m etops.fuzz`` (also ``etops fuzz``): the campaign of etops.fuzz.campaign."""

import sys

from .campaign import main

if __name__ == "__main__":
    sys.exit(main())
