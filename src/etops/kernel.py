"""What a kernel object knows about itself (KernelInfo) and the slow path of its call.

The callable is the C ``Kernel`` (``etops._native``): its fast path handles a call
with correctly sized outs alone. Whatever else happens goes to ``SlowPath``: outs
to allocate (shapes inferred with torch's meta kernels), outs the kernel refused
(resize as torch's out= does, then call again), outs the kernel shrank, a kernel
failure (KernelError), no kernel for the tensors' key (NoMatchingKernelError).
Attributes the C object lacks (``_schema``, ``kernels``, ``explain`` ...) are
looked up on its KernelInfo.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
from dataclasses import dataclass

import torch

from . import _native, dtypes
from ._plan import F_OUT, K_ENUM, K_OPT_TENSOR_LIST, K_RETURN_SLOT, K_TENSOR, K_TENSOR_LIST, Plan
from ._prechecks import PRECHECKS
from .errors import KernelError, NoMatchingKernelError, SchemaError
from .schemas import split_name, torch_overload


@dataclass(frozen=True)
class RegisteredKernel:
    """One entry of ExecuTorch's registry for an operator."""

    key: str | None  #: ExecuTorch's kernel key string; None for the fallback kernel
    tensors: tuple[tuple[str, tuple[int, ...]], ...] | None  #: (dtype, dim order) per tensor argument
    library: str  #: the shared library whose code this kernel is
    address: int

    def describe(self) -> str:
        if self.tensors is None:
            return "fallback"
        return ", ".join(f"{dtype} dim_order={list(order)}" for dtype, order in self.tensors)


def decode_key(key: str | None):
    """'v1/6;0,1|4;0' -> (('float32', (0, 1)), ('int64', (0,))); None for a fallback."""
    if key is None:
        return None
    _, _, body = key.partition("/")
    tensors = []
    for part in filter(None, body.split("|")):
        dtype, _, order = part.partition(";")
        tensors.append((dtypes.dtype_name(int(dtype)), tuple(int(d) for d in order.split(",") if d != "")))
    return tuple(tensors)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_libdl = ctypes.CDLL(None)
_libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]


def library_of(address: int) -> str:
    """Path of the shared library that holds the code at `address`."""
    info = _DlInfo()
    if _libdl.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.dli_fname:
        return info.dli_fname.decode()
    return "<unknown>"


class KernelInfo:
    """Describes one operator of ExecuTorch's registry: name, schema, registered
    kernels and where they come from. Shared by the C kernel object (as ``_info``)."""

    #: what a failed call raises (a delegate's info raises DelegateError)
    error_type = KernelError

    def __init__(self, name: str, schema, schema_source: str, plan: Plan | None, plan_error: str | None):
        self.name = name
        self.namespace, self.op, self.overload = split_name(name)
        self._schema = schema
        self.schema_source = schema_source
        self._plan = plan
        self._plan_error = plan_error
        self._functional = None

    # ---- introspection -------------------------------------------------------------

    @property
    def callable(self) -> bool:
        """Whether etops can call this kernel (it needs a schema it can plan)."""
        return self._plan is not None

    @property
    def kernels(self) -> list[RegisteredKernel]:
        """Every kernel registered under this name, in registration order."""
        out = []
        for name, key, address in _native.registered_kernels():
            if name == self.name:
                out.append(RegisteredKernel(key, decode_key(key), library_of(address), address))
        return out

    @property
    def library(self) -> str:
        """The library that registered this operator (of its first kernel)."""
        kernels = self.kernels
        return kernels[0].library if kernels else "<not registered>"

    def __repr__(self) -> str:
        lines = [f"ExecuTorch kernel {self.name}"]
        lines.append(f"  schema:  {self._schema if self._schema is not None else '(unknown) ' + self.schema_source}")
        if self._plan_error:
            lines.append(f"  not callable: {self._plan_error}")
        for k in self.kernels:
            lines.append(f"  kernel:  {k.describe()}  [{k.library.rsplit('/', 1)[-1]}]")
        return "\n".join(lines)

    # ---- binding (slow path only; the fast path binds in C) -------------------------

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """Schema argument name -> value (defaults filled, missing outs as None)."""
        plan = self._require_plan()
        names = [a[0] for a in plan.args if a[1] != K_RETURN_SLOT]
        bound = dict(zip(names, args))
        bound.update(kwargs)
        for entry in plan.args:
            name, kind, flags, default = entry[0], entry[1], entry[2], entry[3]
            if kind == K_RETURN_SLOT or name in bound:
                continue
            bound[name] = default if flags & 8 else None
        return {n: bound[n] for n in names}

    def _require_plan(self) -> Plan:
        if self._plan is None:
            raise SchemaError(f"{self.name} cannot be called: {self._plan_error}")
        return self._plan

    # ---- kernel selection ----------------------------------------------------------

    def tensor_metas(self, args: tuple, kwargs: dict) -> list[tuple[str, int, tuple[int, ...]]]:
        """(slot, ExecuTorch dtype, dim order) of every Tensor on the kernel's stack,
        in the order ExecuTorch builds the kernel key from: the Tensor arguments,
        then each return that is an out (ExecuTorch passes the out a second time)."""
        plan = self._require_plan()
        bound = self.bind(args, kwargs)
        names = [entry[0] for entry in plan.args]
        metas = []
        for name, kind, _flags, _default, extra, _n in plan.args:
            if kind == K_RETURN_SLOT and isinstance(extra, int):
                name, kind = names[extra], K_TENSOR
                label = f"return ({name})"
            else:
                label = name
            value = bound.get(name)
            if kind == K_TENSOR and value is not None:
                dtype, order, _dense = _native.tensor_meta(value, self.name, label)
                metas.append((label, dtype, tuple(order)))
        return metas

    def explain(self, *args, **kwargs) -> str:
        """Which registered kernel a call with these arguments would run, and why
        (or why none matches)."""
        metas = self.tensor_metas(args, kwargs)
        pairs = [(dtype, order) for _, dtype, order in metas]
        key = _native.make_key(pairs) if pairs else "(no tensors)"
        lines = [f"{self.name} called with:"]
        for name, dtype, order in metas:
            lines.append(f"  {name}: {dtypes.dtype_name(dtype)}, dim order {list(order)}")
        lines.append(f"kernel key: {key}")
        registered = self.kernels
        exact = [k for k in registered if k.key == key]
        fallback = [k for k in registered if k.key is None]
        if exact:
            lines.append(f"runs: the kernel registered for exactly this key, from {exact[0].library}")
        elif fallback:
            why = "no kernel is registered for this key" if len(registered) > 1 else "it is the only kernel"
            lines.append(f"runs: the fallback kernel ({why}), from {fallback[0].library}")
        else:
            lines.append("runs: nothing - no kernel matches this key and there is no fallback kernel")
        if len(registered) > 1 or not fallback:
            lines.append("registered kernels:")
            lines.extend(f"  {k.key or 'fallback'}: {k.describe()}" for k in registered)
        return "\n".join(lines)

    # ---- outs ----------------------------------------------------------------------

    def out_names(self) -> tuple[str, ...]:
        return self._require_plan().out_names

    def out_specs(self, bound: dict) -> dict:
        """What the outs of a call with these arguments must be (see infer_outs)."""
        return infer_outs(self, bound)

    def precheck(self, bound: dict) -> None:
        """Refuses arguments the kernel is known to abort on (_prechecks.py)."""
        PRECHECKS[self.name](bound)

    def functional_overload(self):
        """torch's functional counterpart of this out variant (same non-out
        arguments, no outs), used to infer out shapes; None if there is none."""
        if self._functional is not None:
            return self._functional or None
        found = False
        overload = torch_overload(self.name)
        if overload is not None:
            plan = self._require_plan()
            del plan
            wanted = [(a.name, str(a.real_type)) for a in self._schema.arguments if not a.is_out]
            packet = getattr(getattr(torch.ops, self.namespace), self.op)
            for name in sorted(packet.overloads(), key=lambda n: (n != "default", n)):
                candidate = getattr(packet, name)
                schema = candidate._schema
                if any(a.is_out for a in schema.arguments):
                    continue
                if [(a.name, str(a.real_type)) for a in schema.arguments] == wanted:
                    found = candidate
                    break
        self._functional = found
        return found or None


def _python_scalar(value):
    """numpy scalars (np.float32(1.5)) as the Python numbers torch's parser takes;
    a 0-d array stays a tensor."""
    if (
        not isinstance(value, (torch.Tensor, bool, int, float, complex))
        and type(value).__name__ != "ndarray"
        and getattr(value, "shape", None) == ()
        and hasattr(value, "item")
    ):
        return value.item()
    return value


def _to_meta(value):
    value = _python_scalar(value)
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(v) for v in value)
    if hasattr(value, "__dlpack__") and not isinstance(value, type):
        return _to_meta(torch.from_dlpack(value))
    return value


def _as_torch(value):
    value = _python_scalar(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_torch(v) for v in value)
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dlpack__"):
        return value
    return torch.from_dlpack(value)


#: Ops whose output shape depends on the data: out shape upper bounds, so the
#: kernel can shrink the out to the real size (ExecuTorch never grows a tensor).
def _upper_bound_nonzero(bound):
    x = _as_torch(bound["self"])
    return {"out": ((x.numel(), x.dim()), torch.int64)}


def _upper_bound_masked_select(bound):
    x, mask = _as_torch(bound["self"]), _as_torch(bound["mask"])
    try:
        shape = torch.broadcast_shapes(x.shape, mask.shape)
    except RuntimeError as exc:
        raise ValueError(f"aten::masked_select.out: argument 'mask' of shape {tuple(mask.shape)} does not broadcast with 'self' of shape {tuple(x.shape)}") from exc
    return {"out": ((shape.numel(),), x.dtype)}


DATA_DEPENDENT = {
    "aten::nonzero.out": _upper_bound_nonzero,
    "aten::masked_select.out": _upper_bound_masked_select,
}


def _split_call(info: KernelInfo, bound: dict):
    """Positional and keyword arguments for torch's overload from a bound dict."""
    schema = info._schema
    positional, keywords = [], {}
    for arg in schema.arguments:
        if arg.name not in bound:
            continue
        if arg.kwarg_only:
            keywords[arg.name] = bound[arg.name]
        else:
            positional.append(bound[arg.name])
    return positional, keywords


def _signature(value):
    """A hashable summary of an argument for the out-shape cache: tensors by shape,
    stride and dtype, everything else by value."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), value.stride(), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if hasattr(value, "__dlpack__"):
        return _signature(torch.from_dlpack(value))
    hash(value)
    return value


_OUT_CACHE_SIZE = 256


def infer_outs(info: KernelInfo, bound: dict) -> dict:
    """out name -> (shape, dtype, stride or None) or list of those for tensor-list
    outs, from torch's meta kernels (cached per argument signature); data-dependent
    ops get an upper bound. None for an out torch's functional does not compute
    (it returns None for it: convolution_backward's output_mask), which the kernel
    leaves alone too."""
    if info.name in DATA_DEPENDENT:
        return _infer_outs_uncached(info, bound)
    outs = set(info.out_names())
    try:
        key = tuple(_signature(v) for n, v in bound.items() if n not in outs)
    except TypeError:
        return _infer_outs_uncached(info, bound)
    cache = info.__dict__.setdefault("_out_cache", {})
    found = cache.get(key)
    if found is None:
        found = _infer_outs_uncached(info, bound)
        if len(cache) >= _OUT_CACHE_SIZE:
            cache.clear()
        cache[key] = found
    return found


def _infer_outs_uncached(info: KernelInfo, bound: dict) -> dict:
    if info.name in DATA_DEPENDENT:
        return {n: (tuple(s), d, None) for n, (s, d) in DATA_DEPENDENT[info.name](bound).items()}
    functional = info.functional_overload()
    if functional is None:
        raise SchemaError(f"{info.name}: etops cannot infer the out shapes (torch has no functional variant); pass the outs")
    inputs = {n: _to_meta(v) for n, v in bound.items() if n not in info.out_names()}
    positional = [inputs[a.name] for a in functional._schema.arguments if not a.kwarg_only]
    keywords = {a.name: inputs[a.name] for a in functional._schema.arguments if a.kwarg_only}
    try:
        result = functional(*positional, **keywords)
    except Exception as meta_exc:  # noqa: BLE001
        # Meta kernels cannot size data-dependent outputs (boolean-mask indexing,
        # unique, ...): ask ATen on the real inputs. Invalid arguments fail there too.
        real = {n: _as_torch(v) for n, v in bound.items() if n not in info.out_names()}
        positional = [real[a.name] for a in functional._schema.arguments if not a.kwarg_only]
        keywords = {a.name: real[a.name] for a in functional._schema.arguments if a.kwarg_only}
        try:
            result = functional(*positional, **keywords)
        except Exception as exc:  # noqa: BLE001 - torch refused the arguments themselves
            raise ValueError(f"{info.name}: invalid arguments (torch's shape check says: {exc})") from meta_exc
    names = info.out_names()
    if len(names) == 1:
        results = [result]
    else:
        results = list(result)
    out = {}
    for name, value in zip(names, results):
        if value is None:
            out[name] = None
        elif isinstance(value, (list, tuple)):
            out[name] = [(tuple(v.shape), v.dtype, tuple(v.stride())) for v in value]
        else:
            out[name] = (tuple(value.shape), value.dtype, tuple(value.stride()))
    return out


def _allocate(spec):
    if spec is None:  # an out the kernel will not write: it still needs a tensor
        return torch.empty(0)
    if isinstance(spec, list):
        return [_allocate(s) for s in spec]
    shape, dtype, stride = spec
    if stride is not None:
        return torch.empty_strided(shape, stride, dtype=dtype)
    return torch.empty(shape, dtype=dtype)


def memory_span(t: torch.Tensor, shape=None) -> tuple[int, int, int]:
    """(storage address, first byte, end byte) of what `t` covers, or would cover
    once resized to `shape` (contiguously, from its storage offset)."""
    size = t.element_size()
    first = t.storage_offset() * size
    if shape is not None:
        extent = torch.Size(shape).numel()
    else:
        extent = 0 if t.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return t.untyped_storage().data_ptr(), first, first + extent * size


def overlaps(a: torch.Tensor, b: torch.Tensor, a_shape=None) -> bool:
    """Whether `a` (or `a` once resized to `a_shape`) and `b` are the same tensor or
    share bytes of one storage."""
    if a is b:
        return True
    address, first, end = memory_span(a, a_shape)
    b_address, b_first, b_end = memory_span(b)
    return address == b_address and address != 0 and first < b_end and b_first < end


_INT32_MAX = 2**31 - 1


def _check_resizes(info: KernelInfo, bound: dict, resizes) -> None:
    """Raises ValueError naming the out, before any out is touched, when an out to
    resize is not a torch.Tensor; would get a shape an ExecuTorch tensor cannot
    have (more than MAX_DIM dims, sizes or contiguous strides beyond int32: the
    retried call would refuse it, the out already changed); or is an input or
    shares memory with one (resizing it would change the input under the retried
    call; torch refuses such calls too: "some elements of the input tensor and the
    written-to tensor refer to a single memory location")."""
    outs = set(info.out_names())
    inputs = []
    for name, value in bound.items():
        if name in outs:
            continue
        for i, t in enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]:
            if isinstance(t, torch.Tensor):
                inputs.append((name if i is None else f"{name}[{i}]", t))
    for label, out, shape in resizes:
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{label}' has shape {tuple(out.shape)}, the result needs {tuple(shape)}, and only a torch.Tensor out can be resized")
        if len(shape) > _native.MAX_DIM:
            raise ValueError(f"{info.name}: out argument '{label}' would be resized to {len(shape)} dims; ExecuTorch supports at most {_native.MAX_DIM}")
        stride = 1
        for size in reversed(shape):
            if size > _INT32_MAX or stride > _INT32_MAX:
                raise ValueError(f"{info.name}: out argument '{label}' would be resized to {list(shape)}, beyond ExecuTorch's int32 sizes and strides")
            stride *= max(size, 1)
        for name, t in inputs:
            if overlaps(out, t, shape):
                raise ValueError(
                    f"{info.name}: out argument '{label}' shares memory with argument '{name}' and must be resized "
                    f"from {list(out.shape)} to {list(shape)}, which would change '{name}' too; "
                    f"pass an out that does not alias '{name}' (or a clone of '{name}')"
                )


def _resize_like_torch(info: KernelInfo, out, shape) -> None:
    """Resizes `out` (a tensor of another shape; _check_resizes) to `shape` the
    way torch's out= does (warning when it held elements)."""
    if out.numel() != 0 and id(out) not in _quiet_ids():
        _warn_resized(info, out.shape, shape)
    _quiet_ids().add(id(out))
    memory_format = torch.channels_last if out.dim() == 4 and len(shape) == 4 and out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous() else torch.contiguous_format
    out.resize_(shape, memory_format=memory_format)


#: ids of outs etops itself allocated or already warned about, during one call on
#: this thread: the kernel shrinking them is no news to the user.
_quiet = threading.local()


def _quiet_ids() -> set:
    ids = getattr(_quiet, "ids", None)
    if ids is None:
        ids = _quiet.ids = set()
    return ids


def handled_in_this_call(obj) -> bool:
    """Whether `obj` is an out etops allocated, or resized, in the call running on
    this thread (checked already, or fresh: a check of it again is redundant)."""
    return id(obj) in _quiet_ids()


def _warn_resized(info: KernelInfo, old_shape, new_shape) -> None:
    warnings.warn(
        f"{info.name}: an output with one or more elements was resized since it had shape {list(old_shape)}, "
        f"which does not match the required output shape {list(new_shape)}. This behavior is deprecated in torch; "
        "pass an out of the right shape or an empty tensor.",
        UserWarning,
        stacklevel=4,
    )


class SlowPath:
    """The Python half of a kernel call; the C fast path calls these methods."""

    def allocate_and_call(self, kernel, args, kwargs, _extra):
        info: KernelInfo = kernel._info
        bound = info.bind(args, kwargs)
        specs = info.out_specs(bound)
        outs = {}
        for name in info.out_names():
            given = bound.get(name)
            outs[name] = given if given is not None else _allocate(specs[name])
        # outs torch's functional does not compute come back as None, as torch's do
        unused = [outs[n] for n in info.out_names() if bound.get(n) is None and specs[n] is None]
        quiet = _quiet_ids()
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
        info: KernelInfo = kernel._info
        info.precheck(info.bind(args, kwargs))

    def failed(self, kernel, args, kwargs, extra):
        """The kernel failed: when outs of the wrong size explain it, resize them as
        torch does and call again; otherwise raise KernelError. (The error is never
        bound to a local: a traceback -> frame -> error cycle would keep the
        arguments alive until the garbage collector runs.)"""
        info: KernelInfo = kernel._info
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
            elif info.name in DATA_DEPENDENT:  # .shape: the out may be a numpy array (_check_resizes refuses it)
                if torch.Size(out.shape).numel() < torch.Size(spec[0]).numel() or len(out.shape) != len(spec[0]):
                    resizes.append((name, out, spec[0]))
            else:
                resizes.append((name, out, spec[0]))
        resizes = [(label, out, tuple(shape)) for label, out, shape in resizes if tuple(out.shape) != tuple(shape)]
        if not resizes:
            raise info.error_type(info.name, *extra[:2], extra[2])
        _check_resizes(info, bound, resizes)
        for _, out, shape in resizes:
            _resize_like_torch(info, out, shape)
        try:
            return kernel(*args, **kwargs)
        finally:
            _quiet_ids().clear()

    def resized(self, kernel, obj, sizes, _has_data, name="out"):
        """The kernel shrank out argument `name` in place (within its storage):
        mirror it in torch."""
        info: KernelInfo = kernel._info
        if not isinstance(obj, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{name}' is a {type(obj).__name__}, which the kernel resized to {list(sizes)}; pass a torch.Tensor out to have it resized")
        if obj.numel() != 0 and id(obj) not in _quiet_ids():
            _warn_resized(info, obj.shape, sizes)
        memory_format = torch.channels_last if obj.dim() == 4 and obj.is_contiguous(memory_format=torch.channels_last) and not obj.is_contiguous() else torch.contiguous_format
        obj.resize_(sizes, memory_format=memory_format)

    def no_kernel(self, kernel, args, kwargs, _extra):
        info: KernelInfo = kernel._info
        raise NoMatchingKernelError(info.explain(*args, **kwargs))


SLOW_PATH = SlowPath()


class UncallableKernel:
    """Stands for a registered operator etops cannot call (no schema it can plan):
    inspectable like a kernel, raises SchemaError when called."""

    def __init__(self, info: KernelInfo):
        self._info = info
        self.name = info.name

    def __getattr__(self, attr):
        return getattr(self._info, attr)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(dir(self._info)))

    def __repr__(self) -> str:
        return repr(self._info)

    def __call__(self, *args, **kwargs):
        self._info._require_plan()


def make_kernel(name: str, schema, schema_source: str):
    """The kernel object for `name`: the C Kernel when the schema can be planned,
    else an UncallableKernel that says why."""
    from ._plan import build_plan

    plan, error = None, None
    if schema is None:
        error = schema_source
    else:
        try:
            plan = build_plan(name, schema)
        except SchemaError as exc:
            error = str(exc).split(": ", 1)[-1]
    info = KernelInfo(name, schema, schema_source, plan, error)
    if plan is None:
        return UncallableKernel(info)
    return _native.Kernel(name, plan.args, plan.returns, info, SLOW_PATH, precheck=name in PRECHECKS)


__all__ = ["KernelInfo", "RegisteredKernel", "SlowPath", "UncallableKernel", "decode_key", "infer_outs", "library_of", "make_kernel"]
