"""The command line's usage error: what the parser and the commands raise for a
mistake on the command line, printed as one line with exit code 2 (never raised
to a user's code), and the run of a subcommand that turns every failure into that
one line. Imports nothing of etops."""

from __future__ import annotations

import sys
from typing import Any, Callable

#: The exit code of a usage or build error.
EXIT_ERROR = 2


class UsageError(Exception):
    """A mistake on the command line (one line, exit code 2)."""


def run_command(parser: Any, run: Callable[[Any], int], argv: list[str]) -> int:
    """Parses `argv` with `parser` and returns ``run(args)``'s exit code: a usage
    mistake, or any exception `run` raises, is one line on stderr and EXIT_ERROR
    (``--debug`` adds the traceback); Ctrl-C is 130."""
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"etops: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return run(args)
    except KeyboardInterrupt:
        print("etops: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, exit code 2
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
        lines = str(exc).strip().splitlines()
        print(f"etops: error: {lines[0] if lines else type(exc).__name__}", file=sys.stderr)
        return EXIT_ERROR
