"""What tests about forked processes ask of one: whether it is gone. A module of
its own, not conftest (see fresh_python's note)."""

from __future__ import annotations

import os


def gone(pid: int) -> bool:
    """Whether process `pid` no longer exists (killed and reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
