"""etops.guard.call: bind the call, size its outs here, run it guarded in a child
per guard side, map a fault back to the argument, copy the outs back."""

from __future__ import annotations

import os
import pickle
import signal as signals
import struct

import torch

from ..errors import KernelCrashed
from ..out_shapes import allocate, as_torch
from ..plan import F_MUTABLE, F_OUT, K_RETURN_SLOT, K_TENSOR, K_TENSOR_LIST, K_OPT_TENSOR_LIST
from ..registry import registry
from .buffers import GuardedBuffer

#: the fault record guard_signals.c writes: magic, signo, is_write, si_code, address
_REPORT = struct.Struct("=4siiiQ")
_SIDES = ("after", "before")


def call(op, *args, **kwargs):
    """Runs `op` (a kernel object from the registry, or an operator name) on these
    arguments guarded (see the package doc). Returns what `op(*args, **kwargs)`
    returns; raises etops.KernelCrashed when the kernel faults or dies, and the
    kernel's own exceptions (KernelError, argument errors) as an unguarded call
    does."""
    kernel = registry().get_kernel(op) if isinstance(op, str) else op
    info = getattr(kernel, "_info", None)
    if info is None or not hasattr(info, "bind"):
        raise TypeError(f"etops.guard.call: argument 'op' must be a registered kernel or its name, not {type(op).__name__}")
    bound = info.bind(args, kwargs)
    outs = _sized_outs(info, bound)
    return _deliver(info, bound, outs, _run_in_child(kernel, info, {**bound, **outs}))


def _sized_outs(info, bound: dict) -> dict:
    """The outs the child computes into: the given ones, and where an out is missing
    or of another shape than torch gives it, one allocated here as the unguarded call
    would (the results are copied into the caller's outs, resized, afterwards)."""
    outs = {n: bound[n] for n in info.out_names() if bound.get(n) is not None}
    try:
        specs = info.out_specs(bound)
    except Exception:  # noqa: BLE001 - no functional: the given outs go as they are
        if len(outs) < len(info.out_names()):
            raise
        return outs
    for n in info.out_names():
        given, spec = outs.get(n), specs.get(n)
        if given is None or (isinstance(given, torch.Tensor) and spec is not None and not isinstance(spec, list)
                             and tuple(given.shape) != tuple(spec[0])):
            outs[n] = allocate(spec)  # guarded memory cannot grow: the child gets an out of torch's shape
    return outs


def _arguments(info):
    """(name, kind, flags) of each schema argument the child may place in guarded memory."""
    return [(e.name, e.kind, e.flags) for e in info._require_plan().args if e.kind != K_RETURN_SLOT]


def _guarded(value, label, writable, side, placed):
    """`value` with every tensor in it copied into guarded memory (recorded in `placed`)."""
    if isinstance(value, (list, tuple)):
        return [None if v is None else _guarded(v, f"{label}[{i}]", writable, side, placed) for i, v in enumerate(value)]
    t = as_torch(value)
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
        return value  # not a CPU tensor: the call path refuses it, naming the argument
    t = t.contiguous() if t.layout == torch.strided else t
    buffer = GuardedBuffer(t.numel() * t.element_size(), side)
    guarded = buffer.tensor_like(t)
    placed.append((label, buffer, writable))
    return guarded


def _child(kernel, info, bound: dict, report_fd: int) -> None:
    """In the child: install the fault reporter, then per guard side guard every
    tensor (the layout goes to the parent first) and call; send the last run's
    outcome (pickled) to the parent. Never returns."""
    from .. import _native

    try:
        _native.guard_signals(report_fd)
        for side in _SIDES:  # the same call twice, from the caller's values each time
            placed = []  # type: ignore[var-annotated]
            call_args = {}
            for name, kind, flags in _arguments(info):
                value = bound.get(name)
                if kind in (K_TENSOR, K_TENSOR_LIST, K_OPT_TENSOR_LIST) and value is not None:
                    value = _guarded(value, name, bool(flags & (F_OUT | F_MUTABLE)), side, placed)
                call_args[name] = value
            layout = [(label, b.guard_start, b.guard_end, b.data_start, b.data_end, b.side) for label, b, _w in placed]
            os.write(report_fd, b"L" + _framed(pickle.dumps(layout)))
            for _label, buffer, writable in placed:
                if not writable:
                    buffer.make_read_only()
            result = kernel(**{n: v for n, v in call_args.items() if not (n in info.out_names() and v is None)})
        written = {n: _clone(call_args[n]) for n in info.out_names()}
        mutated = {name: _clone(call_args[name]) for name, kind, flags in _arguments(info) if flags & F_MUTABLE}
        payload = ("ok", written, mutated, _returned(result, call_args, info))
    except BaseException as exc:  # noqa: BLE001 - the parent re-raises it
        try:
            payload = ("raised", exc)  # type: ignore[assignment]
            pickle.dumps(payload)
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            payload = ("raised", RuntimeError(f"{type(exc).__name__}: {exc}"))  # type: ignore[assignment]
    try:
        os.write(report_fd, b"P" + _framed(pickle.dumps(payload)))
    finally:
        os._exit(0)


def _framed(data: bytes) -> bytes:
    return struct.pack("=Q", len(data)) + data


def _clone(value):
    if isinstance(value, (list, tuple)):
        return [_clone(v) for v in value]
    return value.clone() if isinstance(value, torch.Tensor) else value


def _returned(result, call_args, info):
    """The result with each out tensor replaced by ("out", name) (the parent gives
    back its own out objects) and everything else as a value."""
    by_id = {id(call_args[n]): n for n in info.out_names() if call_args.get(n) is not None}

    def one(v):
        if isinstance(v, torch.Tensor) and id(v) in by_id:
            return ("out", by_id[id(v)])
        if isinstance(v, list) and id(v) in by_id:
            return ("out", by_id[id(v)])
        return ("value", _clone(v))

    if isinstance(result, tuple):
        return ("tuple", [one(v) for v in result])
    return one(result)


def _read_all(fd: int) -> bytes:
    chunks = []  # type: ignore[var-annotated]
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _run_in_child(kernel, info, bound: dict):
    """The guarded runs in one child: its ("ok", written, mutated, returned) or its
    exception raised here; KernelCrashed when it died (mapped with the layout of
    the run that died)."""
    report_r, report_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(report_r)
        os.close(err_r)
        os.dup2(err_w, 2)
        _child(kernel, info, bound, report_w)
    os.close(report_w)
    os.close(err_w)
    data = _read_all(report_r)
    log = _read_all(err_r).decode("utf-8", "replace")
    os.close(report_r)
    os.close(err_r)
    _, status = os.waitpid(pid, 0)
    layout, payload, fault, rest = [], None, None, data
    while rest:
        tag = rest[:1]
        if tag in (b"L", b"P"):
            (n,) = struct.unpack_from("=Q", rest, 1)
            body, rest = rest[9:9 + n], rest[9 + n:]
            if tag == b"L":
                layout = pickle.loads(body)
            else:
                payload = pickle.loads(body)
        elif rest[:4] == b"ETGF":
            fault, rest = _REPORT.unpack_from(rest), rest[_REPORT.size:]
        else:
            break
    if payload is not None:
        if payload[0] == "raised":
            raise payload[1]
        return payload
    raise _crash(info.name, status, fault, layout, log)


def _crash(op: str, status: int, fault, layout, log: str) -> KernelCrashed:
    """KernelCrashed for a child that died: the argument and access a fault record
    points at, or the signal and the child's last log lines."""
    if fault is not None:
        _magic, signo, is_write, _code, address = fault
        name = _signal_name(signo)
        access = None if is_write < 0 else ("write" if is_write else "read")
        for label, guard_start, guard_end, data_start, data_end, side in layout:
            if guard_start <= address < guard_end:
                where = "past the end" if side == "after" else "before the start"
                offset = address - data_end if side == "after" else data_start - address
                return KernelCrashed(op, name, label, access, where, offset, log)
            if data_start <= address < data_end:
                return KernelCrashed(op, name, label, access or "write", "inside a read-only input", address - data_start, log)
        return KernelCrashed(op, name, None, access, None, None, log)
    signo = -status if os.WIFSIGNALED(status) is False else os.WTERMSIG(status)
    return KernelCrashed(op, _signal_name(signo) if signo > 0 else f"exit status {os.WEXITSTATUS(status)}", log=log)


def _signal_name(signo: int) -> str:
    try:
        return signals.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def _deliver(info, bound: dict, outs: dict, payload):
    """Copies the child's outs and mutated arguments into the caller's tensors and
    builds the result as an unguarded call would."""
    _status, written, mutated, returned = payload
    for name, values in written.items():
        target = bound.get(name) if bound.get(name) is not None else outs[name]
        _copy_into(target, values)
        outs[name] = target
    for name, values in mutated.items():
        if bound.get(name) is not None:
            _copy_into(bound[name], values)

    def one(entry):
        kind, v = entry
        return outs[v] if kind == "out" else v

    if returned[0] == "tuple":
        return tuple(one(e) for e in returned[1])
    return one(returned)


def _copy_into(target, values):
    if isinstance(target, (list, tuple)):
        for t, v in zip(target, values):
            if t is not None:
                _copy_into(t, v)
        return
    t = as_torch(target)
    if not isinstance(t, torch.Tensor):
        return
    if tuple(t.shape) != tuple(values.shape):
        t.resize_(values.shape)
    t.copy_(values)
