"""The memory-limit tests' growth: a process that touches GROWTH bytes and holds them
for at most HOLD seconds (a task process past its limit is killed long before)."""

from __future__ import annotations

import time

GROWTH = 192 << 20
HOLD = 20.0


def grow_and_hold() -> int:
    """Grows this process's resident memory by GROWTH bytes and holds them HOLD seconds;
    the bytes held."""
    held = bytearray(GROWTH)
    for at in range(0, len(held), 4096):
        held[at] = 1
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return len(held)
