"""The slow path of a kernel call: everything the C fast path hands to Python.

The C ``Kernel`` (``etops._native``) runs a call with correctly sized outs alone.
It calls these methods of ``SLOW_PATH`` for the rest: outs to allocate (shapes from
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

from typing import Protocol

import torch

from .errors import NoMatchingKernelError, SchemaError
from .out_shapes import allocate, is_data_dependent
from .resize import check_resizes, kept_memory_format, quiet_ids, resize_like_torch, warn_resized


class SlowPathInfo(Protocol):
    """What the slow path needs from a kernel's info object (``kernel._info``):
    ``KernelInfo`` (etops.kernel) and ``DelegateInfo`` (etops.delegate.load)."""

    name: str  #: the operator name, in every error
    error_type: type  #: what a failed call raises: KernelError(name, code, error name, log)

    def arg_names(self) -> tuple[str, ...]:
        """The plan's argument names, in plan order (what C's bound values follow)."""

    def out_names(self) -> tuple[str, ...]:
        """The out arguments, in schema order."""

    def out_specs(self, bound: dict) -> dict:
        """out name -> (shape, dtype, stride or None), a list of those, or None
        (an out the kernel leaves alone), for a call with these arguments."""

    def precheck(self, bound: dict) -> None:
        """The guard before every call of a kernel known to abort on some inputs:
        raises the error naming the argument."""

    def explain_mismatch(self, bound: dict) -> None:
        """A tensor differs from its spec (a delegate's input or output) or an out
        may overlap an input: raises the error naming the argument, or returns
        when the call may go on (an out torch's out= would resize)."""

    def describe_call(self, bound: dict) -> str:
        """Which kernel a call with these arguments runs, or why none matches."""


def bound_arguments(info: SlowPathInfo, values: tuple) -> dict:
    """Argument name -> value from the values C bound (plan order)."""
    return dict(zip(info.arg_names(), values))


class SlowPath:
    """The Python half of a kernel call; the C fast path calls these methods."""

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
        quiet |= mine
        try:
            result = kernel(**{**bound, **outs})
        finally:
            quiet -= mine
        if result is None:  # `-> ()` with a tensor-list out: give back what was allocated
            values = [outs[n] for n in info.out_names()]
            result = values[0] if len(values) == 1 else tuple(values)
        if not unused:
            return result
        if isinstance(result, tuple):
            return tuple(None if any(r is u for u in unused) else r for r in result)
        return None if any(result is u for u in unused) else result

    def precheck(self, kernel, values, _extra):
        """Runs the guard of a kernel known to abort on some inputs (before the call)."""
        info: SlowPathInfo = kernel._info
        info.precheck(bound_arguments(info, values))

    def explain_mismatch(self, kernel, values, _extra):
        """A tensor does not match the kernel's spec (delegates): raise, naming the
        argument, or accept the call (an out to be resized)."""
        info: SlowPathInfo = kernel._info
        info.explain_mismatch(bound_arguments(info, values))

    def failed(self, kernel, values, extra):
        """The kernel failed: when outs of the wrong size explain it, resize them as
        torch does and call again; otherwise raise KernelError. (The error is never
        bound to a local: a traceback -> frame -> error cycle would keep the
        arguments alive until the garbage collector runs.)"""
        info: SlowPathInfo = kernel._info
        if not info.out_names():
            raise info.error_type(info.name, *extra[:2], extra[2])
        bound = bound_arguments(info, values)
        try:
            specs = info.out_specs(bound)
        except (SchemaError, ValueError):
            raise info.error_type(info.name, *extra[:2], extra[2]) from None
        resizes = []  # (label, out, shape) of every out of the wrong size
        for name in info.out_names():
            out, spec = bound[name], specs.get(name)
            if spec is None:
                continue
            if isinstance(out, (list, tuple)):
                if isinstance(spec, list) and len(spec) == len(out):
                    resizes += [(f"{name}[{i}]", o, s[0]) for i, (o, s) in enumerate(zip(out, spec))]
            elif is_data_dependent(info.name):  # .shape: the out may be a numpy array (_check_resizes refuses it)
                if torch.Size(out.shape).numel() < torch.Size(spec[0]).numel() or len(out.shape) != len(spec[0]):
                    resizes.append((name, out, spec[0]))
            else:
                resizes.append((name, out, spec[0]))
        resizes = [(label, out, tuple(shape)) for label, out, shape in resizes if tuple(out.shape) != tuple(shape)]
        if not resizes:
            raise info.error_type(info.name, *extra[:2], extra[2])
        check_resizes(info, bound, resizes)
        for _, out, shape in resizes:
            resize_like_torch(info, out, shape)
        try:
            return kernel(**bound)
        finally:
            quiet_ids().clear()

    def resized(self, kernel, obj, sizes, _has_data, name="out"):
        """The kernel shrank out argument `name` in place (within its storage):
        mirror it in torch."""
        info: SlowPathInfo = kernel._info
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{name}' is a {type(obj).__name__}, which the kernel resized to {list(sizes)}; pass a torch.Tensor out to have it resized")
        if obj.numel() != 0 and id(obj) not in quiet_ids():
            warn_resized(info, obj.shape, sizes)
        obj.resize_(sizes, memory_format=kept_memory_format(obj, sizes))

    def no_kernel(self, kernel, values, _extra):
        info: SlowPathInfo = kernel._info
        raise NoMatchingKernelError(info.describe_call(bound_arguments(info, values)))


SLOW_PATH = SlowPath()
