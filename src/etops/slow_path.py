"""The slow path of a kernel call: everything the C fast path hands to Python.

The C ``Kernel`` (``etops._native``) runs a call with correctly sized outs alone.
For the rest it calls the entries of ``SLOW_PATH``, a ``_native.SlowPathTable``:
the typed interface between C and Python, one named callable per hand-off
(kernel_internal.h's SlowEntry says what each takes and answers), built here from
``SlowPath``'s methods and never looked up by name during a call. A check that made
the call itself answers ``Handled(result)``. The hand-offs: outs to allocate (shapes from
``out_shapes``), a kernel failure that outs of the wrong size explain (resize as
torch's out= does, then call again; ``resize``), outs the kernel shrank, a kernel
failure (KernelError), no kernel for the tensors' key (NoMatchingKernelError), and
the pre-call guard of kernels known to abort, a delegate's tensor that does not
match its spec. ``kernel._info`` (a KernelInfo, or a delegate's DelegateInfo)
answers the questions listed by ``SlowPathInfo``.

The C call hands every method the arguments it already bound (``values``: one item
per plan argument, in plan order, defaults filled, missing outs as None), so
nothing here binds a call again; a call made again passes them by keyword.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import torch

from .crash_site import locate, warn_once_if_corrupt
from . import _native, hooks
from ._native import Handled
from .call_failure import kernel_failure
from .errors import NoMatchingKernelError, SchemaError, TaintedError
from .out_shapes import allocate, allocated_strides, is_data_dependent, outs_as_result
from .tensors import as_torch
from .overlaps import refuse_overlaps, snapshot
from .taint import taint_message
from .resize import check_resizes, handled_in_this_call, kept_memory_format, quiet_ids, resize_like_torch, warn_resized


class SlowPathInfo(Protocol):
    """What the slow path needs from a kernel's info object (``kernel._info``):
    ``KernelInfo`` (etops.kernel) and ``DelegateInfo`` (etops.delegate.load)."""

    name: str  #: the operator name, in every error
    error_type: type  #: what a failed call raises (kernel_failure): KernelError(name, code, error name, log, site=)
    entry: Any  #: the operator's entry in the policy table (etops.ops): its sizing part says what sizes the outs

    def arg_names(self) -> tuple[str, ...]:
        """The plan's argument names, in plan order (what C's bound values follow)."""

    def out_names(self) -> tuple[str, ...]:
        """The out arguments, in schema order."""

    def out_specs(self, bound: dict) -> dict:
        """out name -> (shape, dtype, stride or None), a list of those, or None
        (an out the kernel leaves alone), for a call with these arguments."""

    def precheck(self, bound: dict) -> dict | None:
        """Before every call of a kernel the rules table guards or normalizes:
        the normalized arguments to call again with, or None once the guards
        accepted (a refusal raises, naming the argument)."""

    def nothing_to_compute(self, bound: dict) -> bool:
        """Whether the call only sizes its outs (the kernel is not called)."""

    def refuse_footprint(self, bound: dict, argument: str) -> None:
        """The C path found a value of index `argument` outside the dim it indexes
        (the rules table's footprint checks): raises, naming the argument."""

    def validate(self, bound: dict, meta_checked: bool = False) -> dict | None:
        """torch's checks of a call with a new argument signature (its meta kernel's
        unless `meta_checked`, then the rules table's): raises what torch refuses
        (the kernel never sees it); returns the given outs torch would resize (out
        name -> shape), empty when none, None when torch could not check the out
        shapes (no meta kernel)."""

    def explain_mismatch(self, bound: dict) -> None:
        """A tensor differs from its spec (a delegate's input or output) or an out
        may overlap an input: raises the error naming the argument, or returns
        when the call may go on (an out torch's out= would resize)."""

    def describe_call(self, bound: dict) -> str:
        """Which kernel a call with these arguments runs, or why none matches."""


def bound_arguments(info: SlowPathInfo, values: tuple) -> dict:
    """Argument name -> value from the values C bound (plan order)."""
    return dict(zip(info.arg_names(), values))


class _CallState(threading.local):
    """The state of the calls running on one thread (each thread its own: two
    threads calling one kernel never see each other's nested calls)."""

    def __init__(self):
        #: per nested allocate_and_call: ids of the outs it allocated (all of them), or empty
        self.allocated: list[set[int]] = []
        #: ids of the kernels whose call runs again after etops resized its outs
        #: (innermost last): a kernel that fails on the shapes etops gave it is not
        #: resized again (its shape and torch's disagree: the KernelError is the
        #: answer, not a resize loop)
        self.resizing: list[int] = []


_STATE = _CallState()

#: failures (CallFailure.kind) after which a kernel is never called again with
#: resized outs: an abort (the kernel stopped midway), and a call the bridge refused
#: before anything ran (its arguments, not the outs' sizes, are at fault)
_NEVER_AGAIN = frozenset({"aborted", "refused"})


def _resized_by_torch(info, bound: dict) -> dict:
    """The given outs whose shape differs from the one torch's functional gives them
    (out name -> shape, a list for tensor-list outs): torch's out= resizes those
    before computing. Empty when the shapes match or the functional cannot say
    (then torch's meta kernel of the out variant tells, in validate)."""
    if is_data_dependent(info):
        return {}
    try:
        specs = info.out_specs(bound)
    except Exception:  # noqa: BLE001 - no functional, or refused: validate reports it
        return {}
    resizes: dict[str, Any] = {}
    for name in info.out_names():
        given, spec = bound.get(name), specs.get(name)
        if given is None or spec is None:
            continue
        if isinstance(spec, list):
            shapes = [s[0] if s is not None else None for s in spec]
            if isinstance(given, (list, tuple)) and len(given) == len(shapes) and any(
                    s is not None and tuple(as_torch(g).shape) != tuple(s) for g, s in zip(given, shapes)):
                resizes[name] = [tuple(s) if s is not None else None for s in shapes]
        elif hasattr(as_torch(given), "shape") and tuple(as_torch(given).shape) != tuple(spec[0]):
            resizes[name] = tuple(spec[0])
    return resizes


def _with_shapes(bound: dict, resizes: dict) -> dict:
    """`bound` with the outs in `resizes` replaced by meta tensors of their new
    shapes (same dtypes), for torch's checks before any real out changes."""
    if not resizes:
        return bound

    def meta(out, shape):
        t = as_torch(out)
        return torch.empty(shape, dtype=t.dtype, device="meta") if shape is not None else t

    changed = {}
    for name, shape in resizes.items():
        value = bound[name]
        changed[name] = [meta(o, s) for o, s in zip(value, shape)] if isinstance(value, (list, tuple)) else meta(value, shape)
    return {**bound, **changed}


def _resize_then_call(info, kernel, bound: dict, resizes):
    """Resizes the outs of `resizes` ((label, out, shape), checked by check_resizes)
    as torch's out= does, warning once per out, and calls the kernel with them."""
    check_resizes(info, bound, resizes)
    for _, out, shape in resizes:
        resize_like_torch(info, out, shape)
    resizing = _STATE.resizing
    resizing.append(id(kernel))
    try:
        return kernel(**bound)
    finally:
        resizing.pop()
        quiet_ids().clear()


class SlowPath:
    """The Python half of a kernel call: one method per entry of the C call's
    SlowPathTable (``table_of`` builds the table from an instance)."""

    def allocate_and_call(self, kernel, values, _extra):
        info: SlowPathInfo = kernel._info
        bound = bound_arguments(info, values)
        specs = info.out_specs(bound)
        outs = {}
        for name in info.out_names():
            given = bound.get(name)
            outs[name] = given if given is not None else allocate(specs[name])
        # outs torch's functional does not compute come back as None, as torch's do
        unused = [outs[n] for n in info.out_names() if bound.get(n) is None and specs[n] is None]
        quiet = quiet_ids()
        mine = {id(t) for v in outs.values() for t in (v if isinstance(v, list) else [v])}
        allocated = {id(outs[n]) for n in info.out_names() if bound.get(n) is None}
        quiet |= mine
        nested = _STATE.allocated
        nested.append(allocated if len(allocated) == len(info.out_names()) else set())
        try:
            result = kernel(**{**bound, **outs})
        finally:
            quiet -= mine
            nested.pop()
        if result is None:  # `-> ()` with a tensor-list out: give back what was allocated
            result = outs_as_result(info, outs)
        if not unused:
            return result
        if isinstance(result, tuple):
            return tuple(None if any(r is u for u in unused) else r for r in result)
        return None if any(result is u for u in unused) else result

    def outs_to_remember(self, kernel, values, _extra):
        """After allocate_and_call made a call without outs: what it allocated, for
        the C kernel to allocate itself on the next calls of the same input
        signature: one (shape, strides, dtype) per out in schema order; None when
        this signature's outs are not one tensor each (an out torch's functional
        does not compute, a tensor list); False when no call of this kernel has
        out shapes its signature fixes (they depend on the data)."""
        info: SlowPathInfo = kernel._info
        if is_data_dependent(info):
            return False
        specs = info.out_specs(bound_arguments(info, values))
        remembered = []
        for name in info.out_names():
            spec = specs.get(name)
            if not isinstance(spec, tuple):
                return None
            shape, dtype, stride = spec
            remembered.append((tuple(shape), allocated_strides(shape, stride), dtype))
        return tuple(remembered)

    def precheck(self, kernel, values, _extra) -> Handled | None:
        """Before every call of a kernel with guards or normalizers: None when the
        call may go on, or Handled(result) of the call made here with the
        normalized arguments (the C path returns that result)."""
        info: SlowPathInfo = kernel._info
        bound = bound_arguments(info, values)
        normalized = info.precheck(bound)
        if normalized is not None:
            outs = set(info.out_names())
            return Handled(kernel(**{n: v for n, v in normalized.items() if not (n in outs and v is None)}))
        if info.nothing_to_compute(bound):
            return Handled(self._sized_outs(info, bound))
        return None

    def footprint_refused(self, kernel, values, argument):
        """The C path found an index argument's value outside the dim it indexes
        (kernel_footprint.c): raises the footprint check's refusal."""
        info: SlowPathInfo = kernel._info
        info.refuse_footprint(bound_arguments(info, values), argument)

    @staticmethod
    def _sized_outs(info, bound):
        """The outs of a call with nothing to compute, sized as torch sizes them
        (missing ones allocated, given ones checked by torch, then resized): the
        out, or a tuple of them."""
        specs = info.out_specs(bound)  # torch's functional on meta: refuses what torch refuses
        given = {n: bound[n] for n in info.out_names() if bound.get(n) is not None}
        if given:
            info.validate(bound)  # the given outs' dtypes, as torch checks them
        outs = []
        for name in info.out_names():
            out = given.get(name)
            if out is None:
                out = allocate(specs[name])
            elif tuple(out.shape) != tuple(specs[name][0]):
                resize_like_torch(info, out, specs[name][0])
            outs.append(out)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def validate(self, kernel, values, _extra) -> Handled | bool:
        """torch's checks of a call whose argument signature is new to the kernel
        (its meta kernel is skipped for the call allocate_and_call makes with outs sized by
        torch's functional, which checked the same arguments): raises what torch
        refuses; True when the outs may go STATIC, False when not, Handled(result)
        when outs torch's out= resizes were resized and the call made here."""
        info: SlowPathInfo = kernel._info
        bound = bound_arguments(info, values)
        nested = _STATE.allocated
        sized = bool(nested and nested[-1] and all(id(bound[n]) in nested[-1] for n in info.out_names()))
        resizes = {} if sized else _resized_by_torch(info, bound)
        # torch's checks see the outs as torch's out= would have resized them; the
        # caller's outs change only once every check passed
        more = info.validate(_with_shapes(bound, resizes), meta_checked=sized)
        # torch's out= (meta, with the outs' dtypes) has the last word over the
        # functional's shapes (arange(3.1) into an int64 out: 3 elements, not 4)
        resizes = {**resizes, **(more or {})}
        # torch's out= resizes these outs first: so does etops, then calls again
        listed = []
        for name, shape in resizes.items():
            if isinstance(bound[name], (list, tuple)):
                listed += [(f"{name}[{i}]", o, tuple(w)) for i, (o, w) in enumerate(zip(bound[name], shape))
                           if w is not None and tuple(as_torch(o).shape) != tuple(w)]
            elif tuple(as_torch(bound[name]).shape) != tuple(shape):
                listed.append((name, bound[name], tuple(shape)))
        if not listed:
            # True: torch fixed every out's shape (its meta kernel, or the functional
            # that sized them) and the data cannot change it, so the kernel gets the
            # outs as STATIC tensors, as a program exported with static shapes does;
            # False: DYNAMIC_BOUND, the kernel may shrink them (etops mirrors it)
            return more is not None and not is_data_dependent(info)
        return Handled(_resize_then_call(info, kernel, bound, listed))

    def explain_mismatch(self, kernel, values, _extra):
        """A tensor does not match the kernel's spec (delegates): raise, naming the
        argument, or accept the call (an out to be resized)."""
        info: SlowPathInfo = kernel._info
        info.explain_mismatch(bound_arguments(info, values))

    def overlaps(self, kernel, values, flags):
        """Tensors of a call whose memory meets (the C path compared their byte
        ranges; `flags`: the plan's per argument): raises what torch refuses, naming
        both arguments; returns the full aliases torch allows, (written, input)
        argument index pairs with whether the input must be read from a snapshot
        (`snapshot`), for the C kernel to remember."""
        info: SlowPathInfo = kernel._info
        return refuse_overlaps(info, info.arg_names(), values, flags)

    def snapshot(self, value) -> torch.Tensor:
        """A copy of input `value` in its own layout, which the kernel reads while
        it writes an out in `value`'s memory (overlaps.snapshot)."""
        return snapshot(value)

    def outs_allocated(self, kernel, values, _extra) -> bool:
        """Whether every out of the call is one etops allocated for it (a call
        without out=, an etops.edge op): a tensor requiring grad is then no out=
        call torch would refuse, only a result without a grad_fn."""
        info: SlowPathInfo = kernel._info
        bound = bound_arguments(info, values)
        outs = [bound.get(n) for n in info.out_names()]
        items = [t for o in outs for t in (o if isinstance(o, (list, tuple)) else [o])]
        return bool(items) and all(t is not None and handled_in_this_call(t) for t in items)

    def failed(self, kernel, values, failure):
        """The kernel failed (`failure`: the bridge's CallFailure): when outs of the
        wrong size explain it, resize them as torch does and call again; otherwise
        raise KernelError. (The error is never bound to a local: a traceback ->
        frame -> error cycle would keep the arguments alive until the garbage
        collector runs.)"""
        info: SlowPathInfo = kernel._info
        if failure.kind == "crashed":  # a trapped fault: never called again; the address placed among the tensors
            bound = bound_arguments(info, values)
            given = tuple(n for n in info.out_names() if bound.get(n) is not None)
            raise warn_once_if_corrupt(kernel_failure(info.error_type, info.name, failure, outs=given,
                                                      site_of=lambda address: locate(address, bound)))
        if not info.out_names() or failure.kind in _NEVER_AGAIN:
            raise kernel_failure(info.error_type, info.name, failure)
        bound = bound_arguments(info, values)
        try:
            specs = info.out_specs(bound)
        except (SchemaError, ValueError):
            raise kernel_failure(info.error_type, info.name, failure) from None
        if id(kernel) in _STATE.resizing:
            raise kernel_failure(info.error_type, info.name, failure)
        resizes = []  # (label, out, shape) of every out of the wrong size
        for name in info.out_names():
            out, spec = bound[name], specs.get(name)
            if spec is None:
                continue
            if isinstance(out, (list, tuple)):
                if isinstance(spec, list) and len(spec) == len(out):
                    resizes += [(f"{name}[{i}]", o, s[0]) for i, (o, s) in enumerate(zip(out, spec))]
            elif is_data_dependent(info):  # .shape: the out may be a numpy array (_check_resizes refuses it)
                if torch.Size(out.shape).numel() < torch.Size(spec[0]).numel() or len(out.shape) != len(spec[0]):
                    resizes.append((name, out, spec[0]))
            else:
                resizes.append((name, out, spec[0]))
        resizes = [(label, out, tuple(shape)) for label, out, shape in resizes if tuple(out.shape) != tuple(shape)]
        if not resizes:
            raise kernel_failure(info.error_type, info.name, failure)
        return _resize_then_call(info, kernel, bound, resizes)

    def resized(self, kernel, obj, sizes, _has_data, name="out"):
        """The kernel shrank out argument `name` in place (within its storage):
        mirror it in torch."""
        info: SlowPathInfo = kernel._info
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{name}' is a {type(obj).__name__}, which the kernel resized to {list(sizes)}; pass a torch.Tensor out to have it resized")
        if obj.numel() != 0 and id(obj) not in quiet_ids():
            warn_resized(info, obj.shape, sizes)
        obj.resize_(sizes, memory_format=kept_memory_format(obj, sizes))

    def guarded(self, kernel, values, is_delegate):
        """The kernel faulted before, or the process is tainted (etops.taint):
        the call runs in the guard process (etops.guard.call), which a fault or
        a deadlock cannot take this process down with; a delegate (`is_delegate`),
        which the guard process cannot run (its backend was initialised here), is
        refused, saying why."""
        info: SlowPathInfo = kernel._info
        if is_delegate:
            raise TaintedError(f"{info.name} cannot run: {taint_message(kernel)}; a delegate cannot run guarded")
        bound = bound_arguments(info, values)
        return hooks.extension("guard").call(kernel, **bound)

    def no_kernel(self, kernel, values, _extra):
        info: SlowPathInfo = kernel._info
        raise NoMatchingKernelError(info.describe_call(bound_arguments(info, values)))


def table_of(slow_path: SlowPath) -> _native.SlowPathTable:
    """The C call's table of hand-offs: `slow_path`'s method of each entry
    (``_native.SLOW_PATH_ENTRIES``), every one required."""
    return _native.SlowPathTable(**{name: getattr(slow_path, name) for name in _native.SLOW_PATH_ENTRIES})


#: What every Kernel of the registry and every delegate calls.
SLOW_PATH = table_of(SlowPath())
