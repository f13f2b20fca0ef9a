"""Rules of ExecuTorch's quantized kernels (quantized_decomposed::, kernels/quantized/cpu).

They validate their arguments with ET_CHECK_MSG: any invalid argument aborts the
process. Every one first has its call checked against torch's meta kernel and the
rank of each given out (a failed resize_tensor is an ET_CHECK too), after the dtype
and value rules of the ET_CHECKs themselves. The findings were found by the fuzzer
with 0-dim float inputs, the first thing Hypothesis shrinks to.
"""

from __future__ import annotations

import torch

from . import footprints as fp
from . import guards as g
from .cases import case, tensor, value
from .parts import Direct, Finding, Footprint, Judging, Safety
from .rules import Rule
from ..errors import refusing

_NS = "quantized_decomposed::"
_EMBEDDINGS = tuple(f"{_NS}embedding_{bits}.{overload}" for bits in ("byte", "2bit", "4bit") for overload in ("out", "dtype_out"))
_QUANTIZE = tuple(f"{_NS}{n}" for n in ("quantize_per_tensor.out", "quantize_per_tensor.Tensor_out", "quantize_per_channel.out", "quantize_per_token.out"))
_DEQUANTIZE = tuple(f"{_NS}{n}" for n in ("dequantize_per_tensor.out", "dequantize_per_tensor.Tensor_out", "dequantize_per_channel.out", "dequantize_per_token.out"))
_CHOOSE = (f"{_NS}choose_qparams.Tensor_out", f"{_NS}choose_qparams_per_token_asymmetric.out")
_PER_TOKEN = (f"{_NS}quantize_per_token.out", f"{_NS}dequantize_per_token.out", f"{_NS}choose_qparams_per_token_asymmetric.out")
_RESIZE_ABORT = "resize_tensor(out) failed: Attempted to change the tensor rank which is immutable (ET_CHECK)"
_QT = [("quant_min", value(-128)), ("quant_max", value(127)), ("dtype", value("torch.float32"))]
_EMB = [("weight", tensor(())), ("weight_scales", tensor(())), ("weight_zero_points", value(None)), ("weight_quant_min", value(-128)),
        ("weight_quant_max", value(127)), ("indices", tensor((), "int64", values="index"))]


def _finding(op, summary, argument, args, abort, outs=("out",), memory=False):
    return Finding(op, summary, argument, case(op, args, outs), abort, memory=memory)


def _embedding_tables(bound, info):
    """weight_scales (1-D or 2-D, one row per weight row, groups dividing the
    columns), zero points shaped like the scales, indices integer (their range is
    the footprint's check)."""
    op, w, s = info.name, g.shape_dtype(bound.get("weight")), g.shape_dtype(bound.get("weight_scales"))
    if s is not None and len(s[0]) not in (1, 2):
        raise refusing(ValueError, "weight_scales", f"{op}: argument 'weight_scales' must be 1-D or 2-D, got {len(s[0])} dims")
    if w is not None and s is not None and s[0][0] != w[0][0]:
        raise refusing(ValueError, "weight_scales", f"{op}: argument 'weight_scales' has {s[0][0]} rows, 'weight' {w[0][0]}")
    if w is not None and s is not None and len(s[0]) == 2 and (s[0][1] == 0 or w[0][1] % s[0][1]):
        raise refusing(ValueError, "weight_scales", f"{op}: argument 'weight_scales' has {s[0][1]} groups, which do not divide weight.size(1)={w[0][1]}")
    zp = g.shape_dtype(bound.get("weight_zero_points"))
    if zp is not None and s is not None and zp[0] != s[0]:
        raise refusing(ValueError, "weight_zero_points", f"{op}: argument 'weight_zero_points' has shape {list(zp[0])}, 'weight_scales' {list(s[0])}")
    idx = bound.get("indices")
    if isinstance(idx, torch.Tensor) and w is not None and idx.numel():
        if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
            raise refusing(TypeError, "indices", f"{op}: argument 'indices' must be an integer tensor, got {idx.dtype}")


def _add_ranges(bound, info):
    """quantized add.out ET_CHECKs 0 <= quant_min <= quant_max <= 255 for a, b and out."""
    for side in ("a", "b", "out"):
        lo, hi = bound.get(f"{side}_quant_min"), bound.get(f"{side}_quant_max")
        if isinstance(lo, int) and isinstance(hi, int) and not 0 <= lo <= hi <= 255:
            raise refusing(ValueError, f"{side}_quant_min", f"{info.name}: arguments '{side}_quant_min'={lo} and '{side}_quant_max'={hi} must satisfy "
                           "0 <= quant_min <= quant_max <= 255 (the kernel is uint8 only)")


RULES = [
    # per-token kernels read input.size(input.dim() - 1)
    Rule(_PER_TOKEN[:2], direct=Direct(guards=(g.min_dim("input", 1),))),
    # quantize_per_channel_out() (quantize_per_token calls it) ET_CHECKs Double scales and Long zero points
    Rule((f"{_NS}quantize_per_channel.out", f"{_NS}quantize_per_token.out"), direct=Direct(guards=(
        g.dtype_in("scales", (torch.float64,), "torch.float64"), g.dtype_in("zero_points", (torch.int64,), "torch.int64"),
    )), judging=Judging(findings=(
        _finding(f"{_NS}quantize_per_token.out", "quantize_per_token.out aborts on scales that are not float64 (etops fuzz --guard)", "scales",
                 [("input", tensor((1,), "bfloat16")), ("scales", tensor((1,), "int8")), ("zero_points", tensor((1,), "int64", values="index")),
                  ("quant_min", value(-8)), ("quant_max", value(127)), ("dtype", value("torch.int32"))],
                 "quantize_per_channel_out(): assert failed (scale.scalar_type() == ScalarType::Double)"),
        _finding(f"{_NS}quantize_per_token.out", "quantize_per_token.out aborts on float32 scales (torch's reference accepts them)", "scales",
                 [("input", tensor((2, 4))), ("scales", tensor((2, 1))), ("zero_points", tensor((2, 1), "int64", values="index"))] + _QT[:2]
                 + [("dtype", value("torch.int8"))], "quantize_per_channel_out(): scale.scalar_type() is not double type (ET_CHECK)"),
    ))),
    Rule(_QUANTIZE, direct=Direct(guards=(
        g.dtype_in("input", g.FLOATING + (torch.bfloat16,), "floating point"), g.quant_range("dtype"), g.dtype_equals_argument("out", "dtype"),
    )), judging=Judging(findings=(
        _finding(f"{_NS}quantize_per_tensor.out", "quantize_per_tensor.out aborts on a float dtype argument and a 0-dim out", "dtype",
                 [("input", tensor(())), ("scale", value(0.0)), ("zero_point", value(0))] + _QT, _RESIZE_ABORT),
        _finding(f"{_NS}quantize_per_token.out", "quantize_per_token.out reads the last dim of a 0-dim input", "input",
                 [("input", tensor(())), ("scales", tensor(())), ("zero_points", tensor((), "int64", values="index"))] + _QT,
                 "size(): Dimension out of range (0-dim input)"),
    ))),
    Rule(_DEQUANTIZE, direct=Direct(guards=(
        g.dtype_in("input", tuple(g.QUANT_RANGES), "quantized (" + ", ".join(str(d) for d in g.QUANT_RANGES) + ")"),
        g.dtype_equals_argument("input", "dtype"), g.ordered("quant_min", "quant_max", strict=False),
        g.dtype_equals_argument("out", "out_dtype", "output_dtype"),
    )), judging=Judging(findings=(
        _finding(f"{_NS}dequantize_per_tensor.out", "dequantize_per_tensor.out aborts on a float input and a 0-dim out", "input",
                 [("input", tensor(())), ("scale", value(0.0)), ("zero_point", value(0))] + _QT, _RESIZE_ABORT),
        _finding(f"{_NS}dequantize_per_tensor.Tensor_out", "dequantize_per_tensor.Tensor_out aborts on a float input", "input",
                 [("input", tensor(())), ("scale", tensor(())), ("zero_point", tensor((), "int64", values="index"))] + _QT,
                 "check_dequantize_per_tensor_args(): input dtype not supported (ET_CHECK)"),
        _finding(f"{_NS}dequantize_per_channel.out", "dequantize_per_channel.out aborts on a float input", "input",
                 [("input", tensor(())), ("scales", tensor(())), ("zero_points", value(None)), ("axis", value(0))] + _QT,
                 "check_dequantize_per_tensor_args() / axis checks (ET_CHECK)"),
    ))),
    # choose_qparams.Tensor_out reads the min and max of its input: an empty one faults (SIGSEGV; torch refuses it too)
    Rule(_CHOOSE[:1], safety=Safety(guards=(g.nonempty("input"),)), judging=Judging(findings=(
        _finding(f"{_NS}choose_qparams.Tensor_out", "choose_qparams.Tensor_out reads past an empty input (SIGSEGV, etops fuzz --guard)", "input",
                 [("input", tensor((0, 0, 1, 0, 0))), ("quant_min", value(-128)), ("quant_max", value(127)), ("eps", value(0.001)),
                  ("dtype", value("torch.float32"))],
                 "SIGSEGV reading the min and max of an empty input", outs=("scale_out", "zero_point_out"), memory=True),
    ))),
    Rule(_CHOOSE, direct=Direct(guards=(
        g.ordered("quant_min", "quant_max", strict=True), g.dtype_in("input", (torch.float32,), "float32"),
        g.dtype_in("scale_out", (torch.float64,), "torch.float64"), g.dtype_in("zero_point_out", (torch.int64,), "torch.int64"),
    )), judging=Judging(findings=(
        _finding(f"{_NS}choose_qparams.Tensor_out", "choose_qparams.Tensor_out aborts on a float32 scale_out", "scale_out",
                 [("input", tensor(())), ("quant_min", value(-128)), ("quant_max", value(127)), ("eps", value(1e-5)), ("dtype", value("torch.float32"))],
                 "check_quantize_per_tensor_args(): Expected scale to be Double tensor (ET_CHECK)", outs=("scale_out", "zero_point_out")),
    ))),
    Rule(_PER_TOKEN[2:], direct=Direct(guards=(g.min_dim("input", 1),))),
    Rule(_EMBEDDINGS, direct=Direct(guards=(g.exact_dim(2, "weight"), _embedding_tables)), judging=Judging(findings=tuple(
        _finding(op, f"{op.split('::')[1]} reads the size of a 0-dim weight before checking its rank", "weight", _EMB,
                 "size(): Dimension out of range (weight must be 2-D)")
        for op in _EMBEDDINGS if op != f"{_NS}embedding_byte.out"
    ))),
    # the rows read are the indices' values: each in [0, weight.size(0)) on every call (a
    # negative one is read before weight: the kernel does not wrap it as torch's reference does)
    Rule(_EMBEDDINGS, footprint=Footprint(("indices",), (fp.indices_in_dim(
        "indices", "weight", 0, why="the kernel would read outside 'weight' (it checks no index, and wraps no negative one as torch's reference does)"),))),
    # ET_CHECK_MSG in quantized_add_out: same numel, rank and dtype for a, b and out
    Rule((f"{_NS}add.out",), direct=Direct(guards=(_add_ranges, g.same_dtype_and_shape("a", "b", "out"))), judging=Judging(findings=(
        _finding(f"{_NS}add.out", "quantized add.out aborts unless a, b and out have the same numel, rank and dtype", "out",
                 [("a", tensor(())), ("a_scale", value(0.0)), ("a_zero_point", value(0)), ("a_quant_min", value(0)), ("a_quant_max", value(0)),
                  ("b", tensor(())), ("b_scale", value(0.0)), ("b_zero_point", value(0)), ("b_quant_min", value(0)), ("b_quant_max", value(0)),
                  ("out_scale", value(0.0)), ("out_zero_point", value(0)), ("out_quant_min", value(0)), ("out_quant_max", value(0))],
                 "quantized_add_out(): a, b and out must have the same numel, rank and dtype"),
        _finding(f"{_NS}add.out", "quantized add.out aborts on int8 quantization ranges (it is uint8 only)", "a_quant_min",
                 [("a", tensor((2,), "int8")), ("a_scale", value(0.1)), ("a_zero_point", value(0)), ("a_quant_min", value(-128)),
                  ("a_quant_max", value(127)), ("b", tensor((2,), "int8")), ("b_scale", value(0.1)), ("b_zero_point", value(0)),
                  ("b_quant_min", value(-128)), ("b_quant_max", value(127)), ("out_scale", value(0.1)), ("out_zero_point", value(0)),
                  ("out_quant_min", value(-128)), ("out_quant_max", value(127))],
                 "quantized_add_out(): invalid quant_min/quant_max for input tensor a (ET_CHECK)"),
    ))),
    # last for every one: torch's meta kernel accepts the call and the outs' ranks match
    Rule((f"{_NS}add.out",) + _QUANTIZE + _DEQUANTIZE + _CHOOSE + _EMBEDDINGS, direct=Direct(guards=(g.torch_meta_accepts(),))),
]
