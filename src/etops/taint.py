"""What a trapped fault leaves behind, and how the user clears it.

A fault etops trapped (etops.KernelCrashed) abandoned the kernel's frames; what they
held stays held. The marks are kept in C (``_native/fault_state.c``), decided from
the fault's program counter, never from a message:

- every kernel that faulted runs its later calls guarded (``etops.guard``): its own
  locks cannot be seen, and a guarded call that blocks is a GuardTimeout, not a
  hang of this process;
- a fault whose program counter was in the C library, the dynamic loader or the
  C++ allocator *taints* the process: every later kernel call runs guarded (a
  malloc arena lock it left held is released first, _native/fault_state.c).

Both last until ``etops.clear_taint()``. Core: imports ``_native`` only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import _native

#: Fault.site -> why a fault there taints the process
SITE_REASONS = {
    "libc": ("its program counter was inside the C library (libc.so.6): a fault in malloc or free leaves the "
             "allocator's arena lock held (etops released it) and its heap possibly inconsistent"),
    "loader": "its program counter was inside the dynamic loader (ld-linux), whose lock may stay held",
    "allocator": ("its program counter was inside the C++ allocator (libstdc++'s operator new or delete, over the "
                  "C library's malloc): its heap may be inconsistent, its lock held (etops released it)"),
}

#: what the user can do about a taint, in every message that reports one
WHAT_TO_DO = ("every later kernel call runs guarded (in etops' guard process) until etops.clear_taint(); "
              "restarting the process is the only way to be sure")


def site_reason(site: str) -> str:
    """Why a fault at `site` (Fault.site) taints the process, or "" (the kernel's code)."""
    return SITE_REASONS.get(site, "")


class Taint(NamedTuple):
    """The process's taint (``etops.taint()``): kernel `op` faulted at `site`
    ("libc", "loader", "allocator"); `why` says what that leaves
    broken; `released_locks` counts the malloc arena locks the fault left held,
    which etops released so that this process could go on allocating."""

    op: str
    site: str
    why: str
    released_locks: int


def taint() -> Taint | None:
    """The process's taint, or None: since a kernel faulted in code every call
    shares, every kernel call runs guarded until clear_taint()."""
    state = _native.taint_state()
    if state is None:
        return None
    site, op, released = state
    return Taint(op, site, site_reason(site), released)


def clear_taint() -> None:
    """Lets calls run in this process again: clears the process's taint and the
    mark of every kernel that faulted (their calls ran guarded). Call it once you
    know the process sound, e.g. the fault came from a kernel you have fixed and
    re-registered; what the fault left held or corrupt stays so."""
    _native.clear_taint()


def kernel_faulted(kernel: Any) -> bool:
    """Whether `kernel` (a kernel object) faulted since the last clear_taint(), so
    that its calls run guarded."""
    if not isinstance(kernel, _native.Kernel):
        raise TypeError(f"etops.kernel_faulted: argument 'kernel' must be a kernel object, not {type(kernel).__name__}")
    return _native.kernel_faulted(kernel)


def taint_message(kernel: Any) -> str:
    """Why a call of `kernel` cannot run in this process: the process's taint, or
    the kernel's own earlier fault."""
    state = taint()
    if state is not None:
        return f"the process is tainted since {state.op} faulted: {state.why}; {WHAT_TO_DO}"
    name = getattr(getattr(kernel, "_info", None), "name", "the kernel")
    return f"{name} faulted before (its own locks may be held): its calls run guarded until etops.clear_taint()"
