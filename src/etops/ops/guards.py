"""Guard constructors, each written once: ``constructor(argument names ...)``
returns a guard ``guard(bound, info)`` that raises TypeError / ValueError /
IndexError / ZeroDivisionError naming the argument (``info.name`` is the operator).
A guard passes silently over arguments of the wrong kind (not a tensor, not an
int): the argument conversion that follows reports those, naming the argument.
"""

from __future__ import annotations

import math

import torch

from .. import out_shapes, tensors
from ..errors import SchemaError, refusing

FLOATING = (torch.float16, torch.float32, torch.float64)
COMPLEX = (torch.complex64, torch.complex128)

#: dtypes ExecuTorch's quantized kernels take, with their value range
QUANT_RANGES = {
    torch.uint8: (0, 255),
    torch.int8: (-128, 127),
    torch.int16: (-32768, 32767),
    torch.uint16: (0, 65535),
    torch.int32: (-(2**31), 2**31 - 1),
}


def shape_dtype(value):
    """(shape, torch dtype) of a tensor-like argument (torch tensor or DLPack
    producer); None for anything else."""
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype
    if hasattr(value, "__dlpack__") and not isinstance(value, type):
        try:
            t = tensors.from_dlpack(value)
        except Exception:  # noqa: BLE001 - the call path reports it
            return None
        return tuple(t.shape), t.dtype
    return None


def numel(shape) -> int:
    return math.prod(shape)


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def min_dim(name: str, low: int):
    """`name` has at least `low` dims."""

    def guard(bound, info):
        m = shape_dtype(bound.get(name))
        if m is not None and len(m[0]) < low:
            raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' has {len(m[0])} dims; the kernel needs at least {low}")

    return guard


def exact_dim(ndim: int, *names: str):
    """Each of `names` has exactly `ndim` dims."""

    def guard(bound, info):
        for name in names:
            m = shape_dtype(bound.get(name))
            if m is not None and len(m[0]) != ndim:
                raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' must be a {ndim}-D tensor, got {len(m[0])} dims")

    return guard


def nonempty(name: str = "self"):
    """`name` has at least one element."""

    def guard(bound, info):
        m = shape_dtype(bound.get(name))
        if m is not None and numel(m[0]) == 0:
            raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' is empty; ExecuTorch's kernel aborts on empty inputs")

    return guard


def dtype_in(name: str, dtypes, described: str):
    """`name` is a tensor of one of `dtypes` (`described` words them)."""

    def guard(bound, info):
        m = shape_dtype(bound.get(name))
        if m is not None and m[1] not in dtypes:
            raise refusing(TypeError, f"{name}", f"{info.name}: argument '{name}' must be a {described} tensor, got {m[1]}")

    return guard


def not_bool(*names: str, why: str):
    """None of `names` is a bool tensor or a Python bool (`why`: torch's reason)."""

    def guard(bound, info):
        for name in names:
            value = bound.get(name)
            m = shape_dtype(value)
            if isinstance(value, bool) or (m is not None and m[1] == torch.bool):
                raise refusing(TypeError, f"{name}", f"{info.name}: argument '{name}' is a bool; {why}")

    return guard


def castable_out(out: str, *inputs: str):
    """The dtype torch's type promotion gives `inputs` (tensors or Python numbers)
    can be cast to out `out`'s dtype (torch's castability rule)."""

    def guard(bound, info):
        o = shape_dtype(bound.get(out))
        values = [tensors.as_torch(bound.get(n)) for n in inputs]
        if o is None or not all(isinstance(v, (torch.Tensor, bool, int, float, complex)) for v in values):
            return
        try:
            result = torch.result_type(*values)
        except (TypeError, RuntimeError):
            return  # torch refuses the inputs themselves: the call path reports it
        if not torch.can_cast(result, o[1]):
            raise refusing(TypeError, f"{out}", f"{info.name}: argument '{out}' has dtype {o[1]}, which the result type {result} cannot be cast to")

    return guard


def alpha_fits_result(alpha: str, *inputs: str):
    """torch's rule for a multiplier `alpha` of the promoted result of `inputs`
    (tensors or Python numbers), checked by its CPU kernel and not by its meta
    kernel: a bool alpha only for a bool result, a floating alpha only for a
    floating or complex result."""

    def guard(bound, info):
        value = bound.get(alpha)
        values = [tensors.as_torch(bound.get(n)) for n in inputs]
        if not isinstance(value, (bool, float, complex)) or not all(isinstance(v, (torch.Tensor, bool, int, float, complex)) for v in values):
            return
        try:
            result = torch.result_type(*values)
        except (TypeError, RuntimeError):
            return  # torch refuses the inputs themselves: the call path reports it
        if isinstance(value, bool) and result != torch.bool:
            raise TypeError(f"{info.name}: argument '{alpha}' is a bool, which torch takes only for a bool result (here {result})")
        if not isinstance(value, bool) and not (result.is_floating_point or result.is_complex):
            raise TypeError(f"{info.name}: argument '{alpha}' is a {type(value).__name__}, which torch does not take "
                            f"for an integral result (here {result})")

    return guard


def floating(name: str = "self"):
    return dtype_in(name, FLOATING, "floating point")


def complex_(name: str = "self"):
    return dtype_in(name, COMPLEX, "complex")


def dim_in_range(name: str = "self", dim_name: str = "dim", scalar_has_one_dim: bool = True):
    """0 <= dim < ndim (a 0-d tensor counts as 1-d unless `scalar_has_one_dim` is
    False): for kernels that call size(dim) before normalizing a negative dim."""

    def guard(bound, info):
        m, dim = shape_dtype(bound.get(name)), bound.get(dim_name)
        if m is None or not _int(dim):
            return
        ndim = max(len(m[0]), 1) if scalar_has_one_dim else len(m[0])
        if not 0 <= dim < ndim:
            raise refusing(IndexError, f"{dim_name}", f"{info.name}: argument '{dim_name}' is {dim}; ExecuTorch's kernel needs 0 <= {dim_name} < {ndim} (negative dims abort it)")

    return guard


def dim_valid(name: str, dim_name: str):
    """-ndim <= dim < ndim."""

    def guard(bound, info):
        m, dim = shape_dtype(bound.get(name)), bound.get(dim_name)
        if m is None or not _int(dim):
            return
        ndim = max(len(m[0]), 1)
        if not -ndim <= dim < ndim:
            raise refusing(IndexError, f"{dim_name}", f"{info.name}: argument '{dim_name}' is {dim}, out of range for {len(m[0])} dims")

    return guard


def is_empty(name: str = "self"):
    """A predicate (not a guard): `name` is a tensor with no elements."""

    def empty(bound):
        m = shape_dtype(bound.get(name))
        return m is not None and numel(m[0]) == 0

    return empty


def divisor_nonzero(name: str = "b", dividend: str = "a"):
    """An integer division's divisor `name` is not an integer zero (SIGFPE)."""

    def guard(bound, info):
        a, b = bound.get(dividend), bound.get(name)
        if isinstance(a, int) and _int(b) and b == 0:
            raise refusing(ZeroDivisionError, f"{name}", f"{info.name}: argument '{name}' is an integer zero")

    return guard


def arange_length():
    """step != 0 and the length (end - start) / step fits ExecuTorch's int32 sizes."""

    def guard(bound, info):
        start, end, step = bound.get("start", 0), bound.get("end"), bound.get("step", 1)
        if not all(isinstance(v, (int, float)) for v in (start, end, step)):
            return  # tensors, None ...: the call path reports the type
        if step == 0:
            raise refusing(ValueError, "step", f"{info.name}: argument 'step' must be nonzero")
        try:
            length = math.ceil((end - start) / step)
        except (OverflowError, ValueError, ZeroDivisionError):
            length = math.inf
        if not length < 2**31 - 1:
            name = "step" if "step" in bound else "end"
            raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' gives {float(length):.3g} elements (start={start!r}, end={end!r}, step={step!r}); ExecuTorch sizes are int32")

    return guard


def mask_indices(name: str = "self", indices_name: str = "indices"):
    """bool / uint8 mask indices cover no more dims than `name` has."""

    def guard(bound, info):
        m, indices = shape_dtype(bound.get(name)), bound.get(indices_name)
        if m is None or not isinstance(indices, (list, tuple)):
            return
        covered = 0
        for i, index in enumerate(indices):
            im = shape_dtype(index)
            mask = im is not None and im[1] in (torch.bool, torch.uint8)
            covered += len(im[0]) if mask else 1
            if mask and covered > len(m[0]):
                raise refusing(IndexError, f"{indices_name}", f"{info.name}: argument '{indices_name}' has too many indices for '{name}' of dimension {len(m[0])} (indices[{i}] of shape {list(im[0])} reaches dim {covered})")

    return guard


def same_dtype_and_shape(first: str, *others: str):
    """Each of `others` has the dtype, numel and rank (unless one element) of `first`."""

    def guard(bound, info):
        ref = shape_dtype(bound.get(first))
        if ref is None:
            return
        for name in others:
            m = shape_dtype(bound.get(name))
            if m is None:
                continue
            if m[1] != ref[1]:
                raise refusing(TypeError, f"{name}", f"{info.name}: argument '{name}' has dtype {m[1]}, argument '{first}' {ref[1]}; the kernel needs the same dtype")
            if numel(m[0]) != numel(ref[0]) or (numel(m[0]) != 1 and len(m[0]) != len(ref[0])):
                raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' has shape {list(m[0])}, argument '{first}' {list(ref[0])}; the kernel needs the same shape")

    return guard


def quant_range(dtype_name: str = "dtype", qmin: str = "quant_min", qmax: str = "quant_max"):
    """A dtype argument the quantized kernels support, and quant_min / quant_max
    within its range."""

    def guard(bound, info):
        dtype = bound.get(dtype_name)
        if not isinstance(dtype, torch.dtype):
            return
        if dtype not in QUANT_RANGES:
            raise refusing(TypeError, f"{dtype_name}", f"{info.name}: argument '{dtype_name}' is {dtype}; the kernel supports {', '.join(str(d) for d in QUANT_RANGES)}")
        low, high = QUANT_RANGES[dtype]
        lo, hi = bound.get(qmin), bound.get(qmax)
        if isinstance(lo, int) and lo < low:
            raise refusing(ValueError, f"{qmin}", f"{info.name}: argument '{qmin}' is {lo}, below {dtype}'s {low}")
        if isinstance(hi, int) and hi > high:
            raise refusing(ValueError, f"{qmax}", f"{info.name}: argument '{qmax}' is {hi}, above {dtype}'s {high}")

    return guard


def ordered(low: str, high: str, strict: bool):
    """Integer arguments low <= high (low < high when `strict`)."""

    def guard(bound, info):
        lo, hi = bound.get(low), bound.get(high)
        if isinstance(lo, int) and isinstance(hi, int) and (lo >= hi if strict else lo > hi):
            word = "less than" if strict else "at most"
            raise refusing(ValueError, f"{low}", f"{info.name}: argument '{low}' ({lo}) must be {word} '{high}' ({hi})")

    return guard


def dtype_equals_argument(name: str, *dtype_names: str):
    """Tensor `name` has the dtype the first given of `dtype_names` says."""

    def guard(bound, info):
        m = shape_dtype(bound.get(name))
        given = [n for n in dtype_names if isinstance(bound.get(n), torch.dtype)]
        if m is not None and given and m[1] != bound[given[0]]:
            raise refusing(TypeError, f"{name}", f"{info.name}: argument '{name}' has dtype {m[1]}, argument '{given[0]}' says {bound[given[0]]}")

    return guard


def torch_meta_accepts():
    """torch's meta kernel accepts the call (what it refuses stays for the kernel to
    report), and each given out has the rank of the result (ExecuTorch cannot
    change a tensor's rank and aborts)."""

    def guard(bound, info):
        try:
            specs = out_shapes.infer_outs(info, bound)
        except SchemaError:
            return
        for name, spec in specs.items():
            m = shape_dtype(bound.get(name))
            if m is not None and spec is not None and not isinstance(spec, list) and len(m[0]) != len(spec[0]):
                raise refusing(ValueError, f"{name}", f"{info.name}: argument '{name}' has {len(m[0])} dims, the result has {len(spec[0])}; ExecuTorch's kernel cannot change an out's rank")

    return guard
