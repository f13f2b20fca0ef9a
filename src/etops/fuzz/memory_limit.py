"""A fuzz worker's address space, bounded: a case asking for a huge tensor fails
with an allocation error instead of swapping the machine. Imports the standard
library only."""

from __future__ import annotations

import os

#: address space a worker may grow by: a case asking for a huge tensor fails with
#: an allocation error instead of swapping the machine
MEMORY_HEADROOM = 3 << 30


def limit_memory() -> None:
    """This process may grow by MEMORY_HEADROOM bytes from now (RLIMIT_AS); nothing
    where the limit cannot be read or set."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = vm + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, ImportError):
        pass
