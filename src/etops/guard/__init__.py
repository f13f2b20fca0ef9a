"""Guarded calls: one kernel call in the guard process (a forked child of this
process that serves guarded calls until one kills it), every tensor argument in
memory between two inaccessible guard regions (a mebibyte each, or the tensor's size),
its data flush against the one after it (then, in a second run, starting right
after the one before it), every input the schema does not mark mutable mapped
read-only. A kernel that reads or writes outside its tensors faults at the access;
the child reports the signal and address, and the call raises etops.KernelCrashed
naming the kernel, the argument, read or write, and how far outside the buffer. A
fault farther than a page from any buffer's data is placed by an attribution run
(attribute.py: the call again, guard regions reaching twice past the fault), or
else given relative to every tensor argument. A clean call returns what an
unguarded call returns, its outs copied back into the caller's.

    etops.guard.call(reg.aten.add.out, a, b, out=c)
    etops.guard.call("aten::add.out", a, b)
    etops.guard.guard_pid()   # the guard process's pid (None before the first call)
    etops.guard.reset()       # end it; the next guarded call forks a new one
    etops.guard.set_timeout(seconds)  # how long a call may take (None: no limit)

The guard process is a snapshot of this process at its fork, forked anew when the
registry changes or a kernel object made after it is called (server.py). It runs
torch single-threaded; a call it does not answer in time (set_timeout), or during
which it stops using CPU time, raises etops.GuardTimeout, and Ctrl-C during a call
raises KeyboardInterrupt: either way the guard process is killed, never orphaned.

In a process forked to be thrown away, ``here.enter()`` runs guarded calls in that
process: the same guarded memory and two runs, no round trip; a fault the guard
stopped (or one that touches no memory) raises the KernelCrashed the guard process
would give, any other ends that process.

Files: call.py (the call: outs, results back), here.py (guarded calls in a
throwaway process), attribute.py (a fault to its
argument, attribution runs), server.py (the guard process's lifetime), child.py
(what the guard process runs), buffers.py (guarded memory), wire.py (what crosses
the pipes), hooks.py (other tools' calls).

Extension: imports the core only (the registry, the kernel's info, errors).
"""

from __future__ import annotations

from ..errors import GuardTimeout
from .call import call
from .server import guard_pid, reset, set_timeout

__all__ = ["GuardTimeout", "call", "guard_pid", "reset", "set_timeout"]
