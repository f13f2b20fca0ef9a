"""The slow path of a kernel call: everything the C fast path hands to Python.

The C ``Kernel`` (``etops._native``) runs a call with correctly sized outs alone.
It calls these methods of ``SLOW_PATH`` for the rest: outs to allocate (shapes from
``out_shapes``), a kernel failure that outs of the wrong size explain (resize as
torch's out= does, then call again; ``resize``), outs the kernel shrank, a kernel
failure (KernelError), no kernel for the tensors' key (NoMatchingKernelError), and
the pre-call guard of kernels known to abort. ``kernel._info`` (a KernelInfo, or a
delegate's DelegateInfo) says what the kernel's outs are.
"""

from __future__ import annotations

import torch

from .errors import NoMatchingKernelError, SchemaError
from .out_shapes import allocate, is_data_dependent
from .resize import check_resizes, kept_memory_format, quiet_ids, resize_like_torch, warn_resized


class SlowPath:
    """The Python half of a kernel call; the C fast path calls these methods."""

    def allocate_and_call(self, kernel, args, kwargs, _extra):
        info = kernel._info
        bound = info.bind(args, kwargs)
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
            result = kernel(*args, **{**kwargs, **outs})
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

    def precheck(self, kernel, args, kwargs, _extra):
        """Runs the check of a kernel known to abort on some inputs (_prechecks.py)."""
        info = kernel._info
        info.precheck(info.bind(args, kwargs))

    def failed(self, kernel, args, kwargs, extra):
        """The kernel failed: when outs of the wrong size explain it, resize them as
        torch does and call again; otherwise raise KernelError. (The error is never
        bound to a local: a traceback -> frame -> error cycle would keep the
        arguments alive until the garbage collector runs.)"""
        info = kernel._info
        if not info.out_names():
            raise info.error_type(info.name, *extra[:2], extra[2])
        bound = info.bind(args, kwargs)
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
            return kernel(*args, **kwargs)
        finally:
            quiet_ids().clear()

    def resized(self, kernel, obj, sizes, _has_data, name="out"):
        """The kernel shrank out argument `name` in place (within its storage):
        mirror it in torch."""
        info = kernel._info
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{name}' is a {type(obj).__name__}, which the kernel resized to {list(sizes)}; pass a torch.Tensor out to have it resized")
        if obj.numel() != 0 and id(obj) not in quiet_ids():
            warn_resized(info, obj.shape, sizes)
        obj.resize_(sizes, memory_format=kept_memory_format(obj, sizes))

    def no_kernel(self, kernel, args, kwargs, _extra):
        info = kernel._info
        raise NoMatchingKernelError(info.explain(*args, **kwargs))


SLOW_PATH = SlowPath()
