"""The exception for a kernel call that failed, made from the bridge's report of it
(etops._native's CallFailure: its kind, code, message, the site of the check that
failed, the fault). Used by the call path (slow_path) and delegates. Core module:
imports errors only."""

from __future__ import annotations

from typing import Any

from .errors import KernelAborted, KernelCrashed, KernelError


def failure_site(failure: Any) -> str:
    """``file:line`` of a failed call's last error or fatal message (the check that
    failed), or "" (`failure`: the bridge's CallFailure)."""
    return f"{failure.file}:{failure.line}" if failure.file else ""


def failure_origin(failure: Any) -> str:
    """``file:line`` of a failed call's first error or fatal message (the check that
    failed first) when it is not `failure_site`'s (an outer check reported an inner
    one's failure), else ""."""
    origin = f"{failure.origin_file}:{failure.origin_line}" if failure.origin_file else ""
    return origin if origin != failure_site(failure) else ""


def kernel_failure(error_type: type, op: str, failure: Any, site_of: Any = None, outs: tuple[str, ...] = (),
                   **extra: Any) -> KernelError:
    """The exception for a failed call of `op` as the bridge reports it (`failure`:
    a CallFailure of etops._native, chosen by its ``kind``): KernelAborted when
    ExecuTorch aborted, KernelCrashed when the kernel faulted on the calling thread
    (`site_of(address)`, when given, places the address among the call's tensors:
    (argument, where, offset) or None; `outs`: the out arguments the caller gave),
    else `error_type` (KernelError, or a
    delegate's DelegateError, given `extra` keywords)."""
    if failure.kind == "aborted":
        return KernelAborted(op, failure.code, failure.name, failure.message, failure_site(failure),
                             origin=failure_origin(failure))
    if failure.kind == "crashed" and failure.fault is not None:
        return KernelCrashed.in_process(op, failure.fault, failure.message, site_of, outs)
    return error_type(op, failure.code, failure.name, failure.message, site=failure_site(failure),
                      origin=failure_origin(failure), **extra)
