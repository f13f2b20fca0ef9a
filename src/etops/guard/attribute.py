"""Which tensor argument a guarded call's fault belongs to: the guard process's
fault record placed among the buffers of the run that died (crash_site measures
the distance, as for in-process faults). A fault within a page of a buffer's data
is that buffer's. Any other (farther into a guard region, where another buffer's
longer overrun may have crossed into it, or in no buffer at all) is placed by an
attribution run: the call run again in a new guard process with guard regions
reaching twice past the fault, so that the access lands in its own buffer's guard
region; failing that, the address is given relative to every tensor argument."""

from __future__ import annotations

import os
import signal as signals

from ..crash_site import NULL_PAGE_BYTES, is_stack_overflow, locate_in, relative
from ..errors import GuardTimeout, KernelCrashed
from ..process_end import signal_name
from . import server
from .buffers import DEFAULT_REACH, MAX_REACH, PAGE, pages

_MEMORY_SIGNALS = (signals.SIGSEGV, signals.SIGBUS)


def crash(kernel, info, bound: dict, died: server.Died) -> KernelCrashed:
    """KernelCrashed for a guard process that died during the call on `bound`: the
    argument, access, direction and distance its fault record points at (after an
    attribution run when needed), or the signal and the child's last log lines."""
    op, log = info.name, died.log
    if died.fault is None:
        signo = os.WTERMSIG(died.status) if os.WIFSIGNALED(died.status) else -1
        return KernelCrashed(op, signal_name(signo) if signo > 0 else f"exit status {os.WEXITSTATUS(died.status)}", log=log)
    signo, is_write, _code, address, stack_pointer = died.fault
    if signo in _MEMORY_SIGNALS and is_stack_overflow(address, stack_pointer):  # the stack's end, no argument's
        return KernelCrashed(op, signal_name(signo), None, _access(is_write), "stack overflow", None, log)
    placed = _without_attribution_run(op, signo, is_write, address, died.layout, log)
    if placed is not None:
        return placed
    name, access = signal_name(signo), _access(is_write)
    reach = attribution_reach(address, died.layout)
    if reach is not None:
        try:
            again = server.run(kernel, info, bound, reach)
        except GuardTimeout:
            again = None
        if isinstance(again, server.Died) and again.fault is not None and again.fault[0] in _MEMORY_SIGNALS:
            site = in_buffer(again.fault[3], again.layout, within=None)
            if site is not None:
                return _named(op, name, _access(again.fault[1]), site, again.log)
            died, address, access = again, again.fault[3], _access(again.fault[1])
    return _relative(op, name, access, address, died)


def placed_here(op: str, fault: KernelCrashed, layout: list) -> KernelCrashed | None:
    """For a fault the call path trapped in a process running guarded calls itself
    (etops.guard.here; `fault` carries the address, `layout` is the run's): the
    KernelCrashed the guard process's death would give, when no attribution run is
    needed (the access was stopped before it changed anything); None otherwise."""
    if fault.address is None or fault.where == "stack overflow":  # not a trapped fault, or no argument's: as raised
        return fault
    signo = getattr(signals, fault.signal, None)
    if signo is None:
        return None
    is_write = {"write": 1, "read": 0}.get(fault.access, -1)  # type: ignore[arg-type]
    return _without_attribution_run(op, int(signo), is_write, fault.address, layout, fault.log)


def _without_attribution_run(op: str, signo: int, is_write: int, address: int, layout: list,
                             log: str) -> KernelCrashed | None:
    """KernelCrashed for a fault that touched no memory (not SIGSEGV or SIGBUS), went
    through a null pointer, or lies within a page of one buffer's data (or inside a
    read-only input); None for one only an attribution run places."""
    name, access = signal_name(signo), _access(is_write)
    if signo not in _MEMORY_SIGNALS or address < NULL_PAGE_BYTES:  # no address of any argument's
        return KernelCrashed(op, name, None, access, None, None, log)
    site = in_buffer(address, layout, within=PAGE)
    return _named(op, name, access, site, log) if site is not None else None


def in_buffer(address: int, layout: list, within: int | None):
    """(label, where, offset) when `address` lies in one buffer's mapping of
    `layout` (its guard regions, or its read-only pages) and, outside its data, less
    than `within` bytes from it (None: anywhere in the mapping); None otherwise."""
    for label, map_start, map_end, data_start, data_end, _reach in layout:
        if map_start <= address < map_end:
            site = relative(address, [(label, data_start, data_end)])[0]
            return site if site[1] == "inside" or within is None or site[2] < within else None
    return None


def attribution_reach(address: int, layout: list) -> int | None:
    """The guard regions' reach for an attribution run of a fault at `address` in
    `layout`: twice its distance from the farthest buffer, and a page (at least the
    default reach), so that the access, whichever buffer it overran, lands in that
    buffer's own guard region; None when it is too far from every buffer for any
    reach."""
    distances = [offset for _label, _where, offset in relative(address, _extents(layout))]
    if not distances or distances[0] >= MAX_REACH:
        return None
    return pages(min(MAX_REACH, max(DEFAULT_REACH, 2 * (max(distances) + PAGE))))


def _extents(layout: list):
    return [(label, data_start, data_end) for label, _ms, _me, data_start, data_end, _reach in layout]


def _named(op: str, name: str, access, site, log: str) -> KernelCrashed:
    label, where, offset = site
    if where == "inside":  # a write into an input the schema does not let the kernel write
        return KernelCrashed(op, name, label, access or "write", "inside a read-only input", offset, log)
    return KernelCrashed(op, name, label, access, where, offset, log)


def _relative(op: str, name: str, access, address: int, died: server.Died) -> KernelCrashed:
    """KernelCrashed naming the tensor argument nearest to a fault no guard region
    explains, the message giving the address relative to every one."""
    extents = _extents(died.layout)
    nearest = locate_in(address, extents)
    if nearest is None:
        return KernelCrashed(op, name, None, access, None, None, died.log)
    every = ", ".join(f"'{label}' {offset} bytes {where if where != 'inside' else 'into it'}"
                      for label, where, offset in relative(address, extents))
    detail = (f"the address is in no guard region even with guard regions reaching past it; the nearest tensor "
              f"argument is named; relative to every tensor argument: {every}")
    return KernelCrashed(op, name, nearest[0], access, nearest[1], nearest[2], died.log, detail=detail)


def _access(is_write: int):
    return None if is_write < 0 else ("write" if is_write else "read")
