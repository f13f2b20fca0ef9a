"""Guarded calls in this process, for a process forked to run them and be thrown
away (``etops dev``'s task processes, etops/dev/task_processes.py).

After ``enter()``, etops.guard.call places every tensor argument in guarded memory
here and runs the call twice, exactly as the guard process does (child.py), but
without the round trip to it: no pickling, no pipes. A fault at a guard region (or
anywhere) ends this process at once through the guard process's fault reporter
(guard_signals), never with a Python exception in a process whose memory a kernel
may have written; whoever forked it runs the call again through the guard process,
which names the argument (attribute.py). Never enter it in a process that is not
to die with the kernel.
"""

from __future__ import annotations

import os

from .. import _native

_active = False


def enter() -> None:
    """From now on guarded calls run in this process, and a fault ends it (exit
    status 128 + the signal). torch runs single-threaded: the forking process's
    OpenMP thread team does not survive the fork."""
    import torch

    global _active
    torch.set_num_threads(1)
    _native.guard_signals(os.open(os.devnull, os.O_WRONLY))
    _active = True


def active() -> bool:
    """Whether guarded calls run in this process (enter() was called)."""
    return _active


def run(kernel, info, bound: dict, reach: int | None = None):
    """The outcome of one guarded call run here: ("ok", written, mutated, returned)
    or ("raised", exception), as the guard process reports it (child.run_guarded)."""
    from .child import run_guarded

    return run_guarded(kernel, info, bound, None, reach)
