"""The guard process's side of guarded calls: it places every tensor argument in
guarded memory, runs the call once per guard side, and sends the outcome.

The guard process is a fork of the caller (etops/guard/server.py). Its first call
comes from its own memory (the fork's copy of the caller's arguments); the next
ones arrive over the request pipe. Before each run it sends the run's layout
(where each argument's buffer and guard regions lie), so that when a fault kills it
the caller can map the address back to the argument. A request may ask for guard
regions of a given reach (an attribution run, etops/guard/attribute.py)."""

from __future__ import annotations

import os
import pickle

import torch

from .. import _native
from ..errors import KernelCrashed
from ..tensors import as_torch
from ..plan import F_MUTABLE, F_OUT, K_OPT_TENSOR_LIST, K_TENSOR, K_TENSOR_LIST
from .buffers import GuardedBuffer
from ..layouts import layout_is_preserved
from .wire import dense_in_any_order, dense_layout, dumps, frame, read_exact, read_frame_body, write_all

#: the guard sides of a call, run in this order
SIDES = ("after", "before")
_TENSOR_KINDS = (K_TENSOR, K_TENSOR_LIST, K_OPT_TENSOR_LIST)


def arguments(info):
    """(name, kind, flags) of each schema argument the guard process may place in guarded memory."""
    return info._require_plan().arguments


def _guarded(value, label, writable, side, placed, reach):
    """`value` with every tensor in it copied into guarded memory (recorded in `placed`)."""
    if isinstance(value, (list, tuple)):
        return [None if v is None else _guarded(v, f"{label}[{i}]", writable, side, placed, reach) for i, v in enumerate(value)]
    t = value if type(value) is torch.Tensor else as_torch(value)
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        return value  # not a CPU tensor: the call path refuses it, naming the argument
    if t.layout == torch.strided and not (dense_in_any_order(t) if layout_is_preserved() else dense_layout(t)):
        t = t.contiguous()  # as the unguarded call path gives it to the kernel in this layout mode
    buffer = GuardedBuffer(t.numel() * t.element_size(), side, reach)
    guarded = buffer.tensor_like(t)
    placed.append((label, buffer, writable))
    return guarded


def _clone(value):
    if isinstance(value, (list, tuple)):
        return [_clone(v) for v in value]
    return value.clone() if isinstance(value, torch.Tensor) else value


def _returned(result, call_args, info):
    """The result with each out replaced by ("out", name) (the caller gives back its
    own out objects) and everything else as ("value", v)."""
    by_id = {id(call_args[n]): n for n in info.out_names() if call_args.get(n) is not None}

    def one(v):
        if isinstance(v, (torch.Tensor, list)) and id(v) in by_id:
            return ("out", by_id[id(v)])
        return ("value", _clone(v))

    if isinstance(result, tuple):
        return ("tuple", [one(v) for v in result])
    return one(result)


def run_guarded(kernel, info, bound: dict, report_fd: int | None, reach: int | None = None, trapped=None):
    """The call on `bound` once per guard side, every tensor between guard regions
    of `reach` bytes (None: buffers.py's default), each run's layout sent to
    `report_fd` first (None: not sent, here.py's calls),
    the inputs not marked mutable read-only: ("ok", written outs, mutated arguments,
    the result) of the last run, or ("raised", exception). `trapped(info, fault,
    layout)`: for calls run in a process that traps faults (here.py), the exception
    to raise for a KernelCrashed the call path trapped in a run laid out as `layout`."""
    every: list = []  # the buffers of both runs, released once the outcome is made
    schema_args, out_names = arguments(info), info.out_names()
    try:
        for side in SIDES:  # the same call twice, from the caller's values each time
            placed = []  # type: ignore[var-annotated]
            every.append(placed)
            call_args = {}
            for name, kind, flags in schema_args:
                value = bound.get(name)
                if value is not None and kind in _TENSOR_KINDS:
                    value = _guarded(value, name, bool(flags & (F_OUT | F_MUTABLE)), side, placed, reach)
                call_args[name] = value
            if report_fd is not None:  # where each buffer lies, for the caller to place a fault
                layout = [b.record(label) for label, b, _w in placed]
                write_all(report_fd, frame(b"L", pickle.dumps(layout)))
            for _label, buffer, writable in placed:
                if not writable:
                    buffer.make_read_only()
            result = kernel(**{n: v for n, v in call_args.items() if v is not None or n not in out_names})
        written = {n: _clone(call_args[n]) for n in out_names}
        mutated = {name: _clone(call_args[name]) for name, _kind, flags in schema_args if flags & F_MUTABLE}
        return ("ok", written, mutated, _returned(result, call_args, info))
    except BaseException as exc:  # noqa: BLE001 - the caller re-raises it
        if trapped is not None and isinstance(exc, KernelCrashed) and every:
            exc = trapped(info, exc, [b.record(label) for label, b, _w in every[-1]])
        return ("raised", exc)
    finally:  # what the outcome holds are copies: the mappings serve the next call
        for placed in every:
            for _label, buffer, _w in placed:
                buffer.release()


def _send_outcome(report_fd: int, payload) -> None:
    try:
        body = dumps(payload)
    except Exception as exc:  # noqa: BLE001 - an exception or value that does not pickle
        detail = payload[1] if payload[0] == "raised" else exc
        body = dumps(("raised", RuntimeError(f"{type(detail).__name__}: {detail}")))
    write_all(report_fd, frame(b"P", body))


def serve(kernels: dict, first, request_fd: int, report_fd: int, preserve_layouts: bool) -> None:
    """The guard process's loop: install the fault reporter, run `first`
    ((kernel, info, bound, reach)), then each request (kernel id, bound arguments,
    layout mode, reach) from `request_fd` with the kernels of `kernels` (id -> kernel object),
    until the caller closes the pipe. Never returns."""
    try:
        # torch single-threaded: the caller's OpenMP thread team did not survive the
        # fork, and libgomp would wait for it forever (a copy of 40k elements does)
        torch.set_num_threads(1)
        _native.guard_signals(report_fd)
        kernel, info, bound, reach = first
        while True:
            _native.set_layout_preserve(preserve_layouts)
            _send_outcome(report_fd, run_guarded(kernel, info, bound, report_fd, reach))
            del kernel, info, bound
            if read_exact(request_fd, 1) != b"C":
                break
            body = read_frame_body(request_fd)
            if body is None:
                break
            kernel_id, bound, preserve_layouts, reach = pickle.loads(body)
            kernel = kernels[kernel_id]
            info = kernel._info
    finally:
        os._exit(0)
