"""Guarded calls in this process, for a process forked to run them and be thrown
away (``etops dev``'s task processes, etops/dev/task_processes.py).

After ``enter()``, etops.guard.call places every tensor argument in guarded memory
here and runs the call twice, exactly as the guard process does (child.py), but
without the round trip to it: no pickling, no pipes. A fault inside the kernel call
is trapped (etops' fault trap) and judged here, with the run's layout:

- one the guard process would name at once (a guard region within a page of an
  argument's data, a write into a read-only input), one that touches no memory
  (SIGFPE, SIGILL) and one through a null pointer stopped the access before it
  changed anything: the call raises the KernelCrashed the guard process's death
  would have given (attribute.py), and this process goes on with its next call;
- any other (an address no guard region explains, which a wild write may have
  preceded) and every fatal signal outside a kernel call end this process at once,
  never with a Python exception in a process whose memory a kernel may have
  written; whoever forked it runs the call again through the guard process, which
  places the address (attribute.py's attribution run).

Never enter it in a process that is not to die with the kernel.
"""

from __future__ import annotations

import os
import signal as signals

from .. import _native

_active = False


def enter() -> None:
    """From now on guarded calls run in this process, a fault in a kernel call is
    judged as the module doc says, and any other fatal signal ends the process (exit
    status 128 + the signal). torch runs single-threaded: the forking process's
    OpenMP thread team does not survive the fork."""
    import warnings

    import torch

    from ..crash_site import MemoryMayBeCorruptWarning

    global _active
    torch.set_num_threads(1)
    _native.trap_guarded_here(os.open(os.devnull, os.O_WRONLY))
    # a fault that may have written outside ends this process (_trapped): no warning to give
    warnings.simplefilter("ignore", MemoryMayBeCorruptWarning)
    _active = True


def active() -> bool:
    """Whether guarded calls run in this process (enter() was called)."""
    return _active


def run(kernel, info, bound: dict, reach: int | None = None):
    """The outcome of one guarded call run here: ("ok", written, mutated, returned)
    or ("raised", exception), as the guard process reports it (child.run_guarded)."""
    from .child import run_guarded

    return run_guarded(kernel, info, bound, None, reach, trapped=_trapped)


def _trapped(info, fault, layout: list):
    """The KernelCrashed the guard process's death would give for `fault` (a
    KernelCrashed the call path trapped, with its address) in a run laid out as
    `layout`; ends this process when that needs an attribution run."""
    from . import attribute

    crashed = attribute.placed_here(info.name, fault, layout)
    if crashed is None:
        os._exit(128 + getattr(signals, fault.signal, signals.SIGSEGV))
    return crashed
