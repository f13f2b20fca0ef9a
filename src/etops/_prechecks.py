"""Argument checks for the few kernels that abort or crash the process, instead of
failing, on inputs their schema allows. Each check raises a Python exception naming
the argument; the C call path runs it before the kernel (only for these kernels).

Every entry is a finding about ExecuTorch worth reporting upstream.
"""

from __future__ import annotations

import math

import torch


def _check_sym_size(bound: dict) -> None:
    # prim op: ET_CHECKs 0 <= dim < self.dim() (negative dims abort too)
    self, dim = bound["self"], bound["dim"]
    if not isinstance(self, torch.Tensor) and not isinstance(getattr(self, "shape", None), tuple):
        return  # not a tensor: the argument conversion that follows says so, naming 'self'
    if isinstance(dim, bool) or not isinstance(dim, int):
        return  # the conversion raises the TypeError naming 'dim'
    ndim = self.dim() if isinstance(self, torch.Tensor) else len(self.shape)
    if not 0 <= dim < ndim:
        raise IndexError(f"aten::sym_size.int: argument 'dim' is {dim!r}; ExecuTorch's kernel needs 0 <= dim < {ndim}")


def _check_int_divisor(op: str):
    def check(bound: dict) -> None:
        # prim op: integer division by zero raises SIGFPE inside the kernel
        a, b = bound["a"], bound["b"]
        if isinstance(a, int) and isinstance(b, int) and not isinstance(b, bool) and b == 0:
            raise ZeroDivisionError(f"{op}: argument 'b' is an integer zero")

    return check


#: operator name -> check(bound arguments)
PRECHECKS = {
    "aten::sym_size.int": _check_sym_size,
    "executorch_prim::floordiv.Scalar": _check_int_divisor("executorch_prim::floordiv.Scalar"),
    "executorch_prim::floordiv.int": _check_int_divisor("executorch_prim::floordiv.int"),
    "executorch_prim::mod.Scalar": _check_int_divisor("executorch_prim::mod.Scalar"),
    "executorch_prim::mod.int": _check_int_divisor("executorch_prim::mod.int"),
}


# ---- found by the fuzzer (etops.fuzz, issue 8) --------------------------------------
# Each check below turns an ExecuTorch abort (ET_CHECK / assert in the kernel)
# into a Python exception naming the argument; the reproducers are in
# etops/fuzz/findings.py and tests/reliability/test_aborts.py.


def _meta(value):
    """(shape, torch dtype) of a tensor-like argument; None for anything else (the
    argument conversion that follows reports those, naming the argument)."""
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype
    if hasattr(value, "__dlpack__") and not isinstance(value, type):
        try:
            t = torch.from_dlpack(value)
        except Exception:  # noqa: BLE001 - the call path reports it
            return None
        return tuple(t.shape), t.dtype
    return None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _check_min_dim(op: str, minimum: dict):
    """Arguments that must have at least some dims (the kernel calls size(0)...
    before checking the rank, which aborts)."""

    def check(bound: dict) -> None:
        for name, low in minimum.items():
            m = _meta(bound.get(name))
            if m is not None and len(m[0]) < low:
                raise ValueError(f"{op}: argument '{name}' has {len(m[0])} dims; the kernel needs at least {low}")

    return check


def _check_exact_dim(op: str, names: tuple, ndim: int):
    def check(bound: dict) -> None:
        for name in names:
            m = _meta(bound.get(name))
            if m is not None and len(m[0]) != ndim:
                raise ValueError(f"{op}: argument '{name}' must be a {ndim}-D tensor, got {len(m[0])} dims")

    return check


def _check_nonempty(op: str, name: str = "self"):
    def check(bound: dict) -> None:
        m = _meta(bound.get(name))
        if m is not None and _numel(m[0]) == 0:
            raise ValueError(f"{op}: argument '{name}' is empty; ExecuTorch's kernel aborts on empty inputs")

    return check


def _check_real_float(op: str, name: str = "self"):
    def check(bound: dict) -> None:
        m = _meta(bound.get(name))
        if m is not None and m[1] not in (torch.float16, torch.float32, torch.float64):
            raise TypeError(f"{op}: argument '{name}' must be a floating point tensor, got {m[1]}")

    return check


def _check_complex(op: str, name: str = "self"):
    def check(bound: dict) -> None:
        m = _meta(bound.get(name))
        if m is not None and m[1] not in (torch.complex64, torch.complex128):
            raise TypeError(f"{op}: argument '{name}' must be a complex tensor, got {m[1]}")

    return check


def _check_quantized_add(bound: dict) -> None:
    # ET_CHECK_MSG in quantized_add_out: same numel, same rank (unless all have
    # one element) and same dtype for a, b and out
    op = "quantized_decomposed::add.out"
    metas = {n: _meta(bound.get(n)) for n in ("a", "b", "out")}
    metas = {n: m for n, m in metas.items() if m is not None}
    if "a" not in metas:
        return
    shape_a, dtype_a = metas["a"]
    for name in ("b", "out"):
        if name not in metas:
            continue
        shape, dtype = metas[name]
        if dtype != dtype_a:
            raise TypeError(f"{op}: argument '{name}' has dtype {dtype}, argument 'a' {dtype_a}; the kernel needs the same dtype")
        if _numel(shape) != _numel(shape_a) or (_numel(shape) != 1 and len(shape) != len(shape_a)):
            raise ValueError(f"{op}: argument '{name}' has shape {list(shape)}, argument 'a' {list(shape_a)}; the kernel needs the same shape")


def _check_log_softmax(bound: dict) -> None:
    # the optimized kernel divides by the size of the reduced dim: SIGFPE when it is 0
    op = "aten::_log_softmax.out"
    m, dim = _meta(bound.get("self")), bound.get("dim")
    if m is None or isinstance(dim, bool) or not isinstance(dim, int):
        return
    shape = m[0]
    ndim = max(len(shape), 1)
    if -ndim <= dim < ndim:
        size = shape[dim] if shape else 1
        if size == 0:
            raise ValueError(f"{op}: argument 'self' has size 0 at dim {dim}; ExecuTorch's kernel divides by it (SIGFPE)")


def _check_dim_in_range(op: str, name: str = "self", dim_name: str = "dim"):
    """The kernel calls size(dim) before normalizing a negative dim: ET's size()
    asserts 0 <= dim < ndim and aborts."""

    def check(bound: dict) -> None:
        m, dim = _meta(bound.get(name)), bound.get(dim_name)
        if m is None or isinstance(dim, bool) or not isinstance(dim, int):
            return
        ndim = len(m[0])
        if not 0 <= dim < max(ndim, 1):
            raise IndexError(f"{op}: argument '{dim_name}' is {dim}; ExecuTorch's kernel needs 0 <= {dim_name} < {max(ndim, 1)} (negative dims abort it)")

    return check


def _check_dim_valid(op: str, name: str, dim_name: str):
    """-ndim <= dim < ndim: the kernel normalizes an out-of-range negative dim into
    another negative one and ET's size() aborts on it."""

    def check(bound: dict) -> None:
        m, dim = _meta(bound.get(name)), bound.get(dim_name)
        if m is None or isinstance(dim, bool) or not isinstance(dim, int):
            return
        ndim = max(len(m[0]), 1)
        if not -ndim <= dim < ndim:
            raise IndexError(f"{op}: argument '{dim_name}' is {dim}, out of range for {len(m[0])} dims")

    return check


def _check_arange(op: str):
    """compute_arange_out_size() ET_CHECKs numel >= 0: a length beyond int32 (tiny
    step, huge end) aborts."""

    def check(bound: dict) -> None:
        start, end, step = bound.get("start", 0), bound.get("end"), bound.get("step", 1)
        values = (start, end, step)
        if not all(isinstance(v, (int, float)) for v in values):
            return  # tensors, None ...: the call path reports the type
        if step == 0:
            raise ValueError(f"{op}: argument 'step' must be nonzero")
        try:
            length = math.ceil((end - start) / step)
        except (OverflowError, ValueError, ZeroDivisionError):
            length = math.inf
        if not length < 2**31 - 1:
            name = "step" if "step" in bound else "end"
            raise ValueError(f"{op}: argument '{name}' gives {float(length):.3g} elements (start={start!r}, end={end!r}, step={step!r}); ExecuTorch sizes are int32")

    return check


def _check_mask_indices(op: str):
    """check_mask_indices() (advanced_index_util.cpp) reads self.size(d) for every
    dim a bool / uint8 mask index covers before checking that self has that dim:
    masks covering more dims than self has abort."""

    def check(bound: dict) -> None:
        m, indices = _meta(bound.get("self")), bound.get("indices")
        if m is None or not isinstance(indices, (list, tuple)):
            return  # the call path reports the types
        covered = 0
        for i, index in enumerate(indices):
            im = _meta(index)
            mask = im is not None and im[1] in (torch.bool, torch.uint8)
            covered += len(im[0]) if mask else 1
            if mask and covered > len(m[0]):
                raise IndexError(f"{op}: argument 'indices' has too many indices for 'self' of dimension {len(m[0])} (indices[{i}] of shape {list(im[0])} reaches dim {covered})")

    return check


def _all(*checks):
    def check(bound: dict) -> None:
        for c in checks:
            c(bound)

    return check


PRECHECKS.update(
    {
        "aten::_fft_r2c.out": _check_real_float("aten::_fft_r2c.out"),
        "aten::_fft_c2r.out": _check_complex("aten::_fft_c2r.out"),
        "aten::_log_softmax.out": _check_log_softmax,
        "aten::narrow_copy.out": _check_dim_in_range("aten::narrow_copy.out"),
        "aten::arange.out": _check_arange("aten::arange.out"),
        "aten::arange.start_out": _check_arange("aten::arange.start_out"),
        "aten::amax.out": _check_nonempty("aten::amax.out"),
        "aten::amin.out": _check_nonempty("aten::amin.out"),
        "aten::bmm.out": _check_exact_dim("aten::bmm.out", ("self", "mat2"), 3),
        "aten::native_group_norm.out": _check_min_dim("aten::native_group_norm.out", {"input": 2}),
        "aten::unfold_copy.out": _all(_check_min_dim("aten::unfold_copy.out", {"self": 1}), _check_dim_valid("aten::unfold_copy.out", "self", "dimension")),
        "quantized_decomposed::add.out": _check_quantized_add,
        "aten::index.Tensor_out": _check_mask_indices("aten::index.Tensor_out"),
        "aten::index_put.out": _check_mask_indices("aten::index_put.out"),
    }
)


# ExecuTorch's quantized kernels (kernels/quantized/cpu) validate their arguments
# with ET_CHECK_MSG: any invalid argument aborts the process. Before they run, etops
# checks the call against torch's own shape rules for the op (its meta kernel), the
# rank of every given out (their resize_tensor failure is an ET_CHECK too) and the
# dtype and value rules of the ET_CHECKs themselves.

_Q_DTYPES = {
    torch.uint8: (0, 255),
    torch.int8: (-128, 127),
    torch.int16: (-32768, 32767),
    torch.uint16: (0, 65535),
    torch.int32: (-(2**31), 2**31 - 1),
}


def _kernel_info(op: str):
    from .registry import registry

    return registry().get_kernel(op)._info


def _check_with_torch(op: str, bound: dict) -> None:
    """torch's meta kernel accepts the call, and each given out has the rank of
    the result (ExecuTorch cannot change a tensor's rank and aborts)."""
    from .errors import SchemaError
    from .out_shapes import infer_outs

    info = _kernel_info(op)
    try:
        specs = infer_outs(info, bound)
    except SchemaError:
        return
    for name, spec in specs.items():
        m = _meta(bound.get(name))
        if m is not None and spec is not None and not isinstance(spec, list) and len(m[0]) != len(spec[0]):
            raise ValueError(f"{op}: argument '{name}' has {len(m[0])} dims, the result has {len(spec[0])}; ExecuTorch's kernel cannot change an out's rank")


def _check_quant_range(op: str, dtype, bound: dict, qmin: str = "quant_min", qmax: str = "quant_max") -> None:
    if dtype not in _Q_DTYPES:
        raise TypeError(f"{op}: argument 'dtype' is {dtype}; the kernel supports {', '.join(str(d) for d in _Q_DTYPES)}")
    low, high = _Q_DTYPES[dtype]
    lo, hi = bound.get(qmin), bound.get(qmax)
    if isinstance(lo, int) and lo < low:
        raise ValueError(f"{op}: argument '{qmin}' is {lo}, below {dtype}'s {low}")
    if isinstance(hi, int) and hi > high:
        raise ValueError(f"{op}: argument '{qmax}' is {hi}, above {dtype}'s {high}")


def _check_quantize(op: str):
    def check(bound: dict) -> None:
        m = _meta(bound.get("input"))
        if m is not None and m[1] not in (torch.float16, torch.float32, torch.float64, torch.bfloat16):
            raise TypeError(f"{op}: argument 'input' must be a floating point tensor, got {m[1]}")
        dtype = bound.get("dtype")
        if isinstance(dtype, torch.dtype):
            _check_quant_range(op, dtype, bound)
            out = _meta(bound.get("out"))
            if out is not None and out[1] != dtype:
                raise TypeError(f"{op}: argument 'out' has dtype {out[1]}, argument 'dtype' says {dtype}")
        _check_with_torch(op, bound)

    return check


def _check_dequantize(op: str):
    def check(bound: dict) -> None:
        m, dtype = _meta(bound.get("input")), bound.get("dtype")
        if m is not None:
            if m[1] not in _Q_DTYPES:
                raise TypeError(f"{op}: argument 'input' has dtype {m[1]}; the kernel supports {', '.join(str(d) for d in _Q_DTYPES)}")
            if isinstance(dtype, torch.dtype) and m[1] != dtype:
                raise TypeError(f"{op}: argument 'input' has dtype {m[1]}, argument 'dtype' says {dtype}")
        lo, hi = bound.get("quant_min"), bound.get("quant_max")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            raise ValueError(f"{op}: argument 'quant_min' ({lo}) is greater than 'quant_max' ({hi})")
        out, out_dtype = _meta(bound.get("out")), bound.get("out_dtype", bound.get("output_dtype"))
        if out is not None and isinstance(out_dtype, torch.dtype) and out[1] != out_dtype:
            raise TypeError(f"{op}: argument 'out' has dtype {out[1]}, the output dtype argument says {out_dtype}")
        _check_with_torch(op, bound)

    return check


def _check_choose_qparams(op: str):
    def check(bound: dict) -> None:
        lo, hi = bound.get("quant_min"), bound.get("quant_max")
        if isinstance(lo, int) and isinstance(hi, int) and not lo < hi:
            raise ValueError(f"{op}: argument 'quant_min' ({lo}) must be less than 'quant_max' ({hi})")
        m = _meta(bound.get("input"))
        if m is not None and m[1] != torch.float32:
            raise TypeError(f"{op}: argument 'input' must be a float32 tensor, got {m[1]}")
        for name, dtype in (("scale_out", torch.float64), ("zero_point_out", torch.int64)):
            out = _meta(bound.get(name))
            if out is not None and out[1] != dtype:
                raise TypeError(f"{op}: argument '{name}' must be a {dtype} tensor, got {out[1]}")
        if m is not None and len(m[0]) == 0 and "per_token" in op:
            raise ValueError(f"{op}: argument 'input' must have at least 1 dim")
        _check_with_torch(op, bound)

    return check


def _check_embedding(op: str):
    def check(bound: dict) -> None:
        w, s, idx = _meta(bound.get("weight")), _meta(bound.get("weight_scales")), bound.get("indices")
        if w is not None and len(w[0]) != 2:
            raise ValueError(f"{op}: argument 'weight' must be 2-D, got {len(w[0])} dims")
        if s is not None and len(s[0]) not in (1, 2):
            raise ValueError(f"{op}: argument 'weight_scales' must be 1-D or 2-D, got {len(s[0])} dims")
        if w is not None and s is not None and s[0][0] != w[0][0]:
            raise ValueError(f"{op}: argument 'weight_scales' has {s[0][0]} rows, 'weight' {w[0][0]}")
        if w is not None and s is not None and len(s[0]) == 2 and (s[0][1] == 0 or w[0][1] % s[0][1]):
            raise ValueError(f"{op}: argument 'weight_scales' has {s[0][1]} groups, which do not divide weight.size(1)={w[0][1]}")
        zp = _meta(bound.get("weight_zero_points"))
        if zp is not None and s is not None and zp[0] != s[0]:
            raise ValueError(f"{op}: argument 'weight_zero_points' has shape {list(zp[0])}, 'weight_scales' {list(s[0])}")
        if isinstance(idx, torch.Tensor) and w is not None and idx.numel():
            if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
                raise TypeError(f"{op}: argument 'indices' must be an integer tensor, got {idx.dtype}")
            rows = w[0][0] * (1 if "byte" in op else 1)
            if int(idx.min()) < 0 or int(idx.max()) >= rows:
                raise IndexError(f"{op}: argument 'indices' has values outside [0, {rows})")
        _check_with_torch(op, bound)

    return check


def _check_token_input(op: str, inner):
    def check(bound: dict) -> None:
        m = _meta(bound.get("input"))
        if m is not None and len(m[0]) == 0:
            raise ValueError(f"{op}: argument 'input' must have at least 1 dim (the kernel reads input.size(input.dim() - 1))")
        inner(bound)

    return check


PRECHECKS.update(
    {
        "quantized_decomposed::add.out": _all(_check_quantized_add, lambda b: _check_with_torch("quantized_decomposed::add.out", b)),
        "quantized_decomposed::quantize_per_tensor.out": _check_quantize("quantized_decomposed::quantize_per_tensor.out"),
        "quantized_decomposed::quantize_per_tensor.Tensor_out": _check_quantize("quantized_decomposed::quantize_per_tensor.Tensor_out"),
        "quantized_decomposed::quantize_per_channel.out": _check_quantize("quantized_decomposed::quantize_per_channel.out"),
        "quantized_decomposed::quantize_per_token.out": _check_token_input("quantized_decomposed::quantize_per_token.out", _check_quantize("quantized_decomposed::quantize_per_token.out")),
        "quantized_decomposed::dequantize_per_tensor.out": _check_dequantize("quantized_decomposed::dequantize_per_tensor.out"),
        "quantized_decomposed::dequantize_per_tensor.Tensor_out": _check_dequantize("quantized_decomposed::dequantize_per_tensor.Tensor_out"),
        "quantized_decomposed::dequantize_per_channel.out": _check_dequantize("quantized_decomposed::dequantize_per_channel.out"),
        "quantized_decomposed::dequantize_per_token.out": _check_token_input("quantized_decomposed::dequantize_per_token.out", _check_dequantize("quantized_decomposed::dequantize_per_token.out")),
        "quantized_decomposed::choose_qparams.Tensor_out": _check_choose_qparams("quantized_decomposed::choose_qparams.Tensor_out"),
        "quantized_decomposed::choose_qparams_per_token_asymmetric.out": _check_choose_qparams("quantized_decomposed::choose_qparams_per_token_asymmetric.out"),
        **{
            f"quantized_decomposed::{name}": _check_embedding(f"quantized_decomposed::{name}")
            for name in (
                "embedding_byte.out",
                "embedding_byte.dtype_out",
                "embedding_2bit.out",
                "embedding_2bit.dtype_out",
                "embedding_4bit.out",
                "embedding_4bit.dtype_out",
            )
        },
    }
)
