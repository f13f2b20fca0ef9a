"""The command line's usage error: what the parser and the commands raise for a
mistake on the command line, printed as one line with exit code 2 (never raised
to a user's code). Imports nothing of etops."""

from __future__ import annotations

#: The exit code of a usage or build error.
EXIT_ERROR = 2


class UsageError(Exception):
    """A mistake on the command line (one line, exit code 2)."""
