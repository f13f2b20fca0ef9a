"""Guarded calls: one kernel call in a forked child of this process, every tensor
argument in memory that ends flush against an inaccessible guard page (then, in a
second run, starts right after one), every input the schema does not mark mutable
mapped read-only. A kernel that reads or writes outside its tensors faults at the
access; the child reports the signal and address, and the call raises
etops.KernelCrashed naming the kernel, the argument, read or write, and how far
outside the buffer. A clean call returns what an unguarded call returns, its outs
copied back into the caller's.

    etops.guard.call(reg.aten.add.out, a, b, out=c)
    etops.guard.call("aten::add.out", a, b)

Extension: imports the core only (the registry, the kernel's info, errors).
"""

from __future__ import annotations

from .call import call

__all__ = ["call"]
