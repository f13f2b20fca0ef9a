"""Rules of the aten:: (portable and optimized) kernels: guards against the aborts
the fuzzer found, upper bounds of data-dependent outs, comparison kinds."""

from __future__ import annotations

import torch

from .. import tensors
from ..compare import METADATA, TIES
from . import footprints as fp
from . import guards as g
from . import normalizers as n
from .cases import case, tensor, value
from .parts import Direct, Finding, Footprint, InputConstraints, Judging, LayoutFinding, Safety, Sizing
from .rules import Rule
from ..errors import refusing

_SIZE_ABORT = "size(): Dimension out of range (0-dim input)"


def _finding(op, summary, argument, args, abort, outs=("out",), computes=False, memory=False):
    return Finding(op, summary, argument, case(op, args, outs), abort, computes, memory)


def _upper_bound_nonzero(bound):
    x = tensors.as_torch(bound["self"])
    return {"out": ((x.numel(), x.dim()), torch.int64)}


def _upper_bound_masked_select(bound):
    x, mask = tensors.as_torch(bound["self"]), tensors.as_torch(bound["mask"])
    try:
        shape = torch.broadcast_shapes(x.shape, mask.shape)
    except RuntimeError as exc:
        raise refusing(ValueError, "mask", f"aten::masked_select.out: argument 'mask' of shape {tuple(mask.shape)} does not broadcast with 'self' of shape {tuple(x.shape)}") from exc
    return {"out": ((shape.numel(),), x.dtype)}


_FFT_ABORT = "toComplexType(): Unknown Complex ScalarType for 4 (integer input)"
_EMPTY_REDUCTION = "MapReduceOverDimListPlan(): in.numel() > 0, Input tensor must be nonempty"
_MASK_ABORT = "check_mask_indices(): size() out of range (a bool mask index with more dims than self)"

def _pool_indices_in_range(bound, info):
    """Every value of `indices` addresses an element of one plane of `self` (the
    kernel adds grad_output there without a bounds check; torch does not check)."""
    idx, src = bound.get("indices"), tensors.as_torch(bound.get("self"))
    if not isinstance(idx, torch.Tensor) or not isinstance(src, torch.Tensor) or not idx.numel() or src.dim() < 2:
        return
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise refusing(TypeError, "indices", f"{info.name}: argument 'indices' must be an integer tensor, got {idx.dtype}")
    plane = src.shape[-1] * src.shape[-2]
    low, high = int(idx.min()), int(idx.max())
    if low < 0 or high >= plane:
        raise refusing(IndexError, "indices", f"{info.name}: argument 'indices' has values in [{low}, {high}], outside [0, {plane}) "
                         f"(one {src.shape[-2]}x{src.shape[-1]} plane of 'self'); the kernel would write outside 'grad_input'")



def _wrong(channels_last: int = 0, permuted: int = 0) -> tuple:
    """LayoutFindings from the mismatching cases the dim-order sweeps found."""
    found = []
    if channels_last:
        found.append(LayoutFinding("channels-last", f"{channels_last} mismatching cases in make conformance-dim-orders"))
    if permuted:
        found.append(LayoutFinding("permuted", f"{permuted} mismatching cases in make conformance-dim-orders"))
    return tuple(found)


#: Kernels computing wrong values, with no error, on a layout (ExecuTorch 1.5.1;
#: `make conformance-dim-orders`, `etops check --dim-order-axis`; docs/layouts.md):
#: the number of mismatching cases per layout. A direct call passing a tensor of
#: such a layout as it is warns once per kernel and layout; explain says it. The
#: dim-order axis lists the kernels it finds silently wrong that are missing here.
_WRONG_LAYOUTS = {
    "aten::_log_softmax.out": _wrong(channels_last=165),
    "aten::constant_pad_nd.out": _wrong(channels_last=334),
    "aten::gather.out": _wrong(channels_last=72, permuted=284),
    "aten::glu.out": _wrong(channels_last=49),
    "aten::max_pool2d_with_indices_backward.grad_input": _wrong(channels_last=145),
    "aten::replication_pad1d.out": _wrong(permuted=22),
    "aten::replication_pad2d.out": _wrong(channels_last=77, permuted=99),
    "aten::replication_pad3d.out": _wrong(channels_last=22, permuted=22),
    "aten::scatter.value_out": _wrong(channels_last=2, permuted=2),
    "aten::scatter.src_out": _wrong(permuted=60),
    "aten::unsqueeze_copy.out": _wrong(channels_last=163, permuted=6990),
    "aten::bmm.out": _wrong(channels_last=2, permuted=1883),
    "aten::mm.out": _wrong(permuted=1592),
    "aten::nonzero.out": _wrong(permuted=68),
    "aten::narrow_copy.out": _wrong(permuted=39),
    "aten::pixel_unshuffle.out": _wrong(permuted=24),
    "aten::native_layer_norm.out": _wrong(permuted=18),
    "aten::_upsample_bilinear2d_aa.out": _wrong(permuted=8),
}

_INTEGRAL = ("int64", "int32", "uint8", "bool")
_FLOATING = ("float32", "float64", "float16", "bfloat16")


def _inputs(op, *args, **kwargs) -> Rule:
    """The declaration of `op`'s input constraints (InputConstraints' arguments)."""
    return Rule((op,), judging=Judging(inputs=InputConstraints(*args, **kwargs)))


#: how the conformance sweep makes the inputs of the operators no OpInfo sample
#: reaches (etops.conformance.references.aten): converted OpInfo samples, or
#: generated from the schema
_INPUTS = [
    _inputs("aten::bitwise_and.Scalar_out", _INTEGRAL, "bitwise_and", scalar="other"),
    _inputs("aten::bitwise_or.Scalar_out", _INTEGRAL, "bitwise_or", scalar="other"),
    _inputs("aten::bitwise_xor.Scalar_out", _INTEGRAL, "bitwise_xor", scalar="other"),
    # shifting by the bit width or more is undefined in C: amounts in [0, 8) hold for every integral dtype
    _inputs("aten::bitwise_left_shift.Tensor_Scalar_out", _INTEGRAL[:3], "bitwise_left_shift", scalar="other", scalar_range=(0, 7)),
    _inputs("aten::bitwise_right_shift.Tensor_Scalar_out", _INTEGRAL[:3], "bitwise_right_shift", scalar="other", scalar_range=(0, 7)),
    _inputs("aten::fmod.Scalar_out", ("float32", "float64", "int64", "int32"), "fmod", scalar="other", nonzero=True,
             invalid=(("other", "an integer zero divisor"),)),
    _inputs("aten::div.Scalar_mode_out", ("float32", "float64", "int64"), "div.floor_rounding", scalar="other", nonzero=True),
    _inputs("aten::pow.Scalar_out", ("float32", "float64", "int64"), "pow", scalar="self", scalar_range=(-3, 3)),
    _inputs("aten::linear.out", _FLOATING[:3], "nn.functional.linear"),
    _inputs("aten::upsample_bilinear2d.vec_out", ("float32", "float64"), "nn.functional.interpolate.bilinear"),
    _inputs("aten::upsample_nearest2d.vec_out", ("float32", "float64", "uint8"), "nn.functional.interpolate.nearest"),
    _inputs("aten::var.out", _FLOATING[:2], "var"),
    _inputs("aten::copy.out", ("float32", "int64", "bool", "float16"), ranks=(0, 3), invalid=(("src", "a shape that does not broadcast to self"),)),
    _inputs("aten::fill.Tensor_out", ("float32", "int64", "bool"), ranks=(0, 3), invalid=(("value", "a tensor with more than 0 dims"),)),
    _inputs("aten::index_put_", ("float32", "int64"), ranks=(1, 3)),
    _inputs("aten::native_dropout.out", ("float32",), ranks=(1, 3)),
    _inputs("aten::sym_numel", ("float32",), ranks=(0, 4)),
    _inputs("aten::sym_size.int", ("float32",), ranks=(1, 4), invalid=(("dim", "a dim out of range"),)),
    _inputs("aten::_native_batch_norm_legit_no_training.out", ("float32", "float64"), ranks=(2, 4), positive=("running_var",)),
    _inputs("aten::convolution_backward.out", ("float32", "float64"), ranks=(3, 4)),
]


#: an out sized from the data is never STATIC: the kernel's resize refuses to grow it
#: past its memory, and etops resizes it and calls again
_RESIZED = "its out is sized from the data, never STATIC: ExecuTorch's resize refuses to grow it past its memory (etops resizes and calls again)"
_INDEX_IN_DIM = (fp.indices_in_dim("index", "self", "dim"),)

#: kernels whose footprint (out sizes, positions read and written) depends on tensor
#: values: their checks run before every call (tests/reliability/test_footprints.py
#: finds them from the schemas: a new one fails it until it is declared here)
_FOOTPRINTS = [
    Rule(("aten::gather.out", "aten::index_select.out", "aten::scatter.src_out", "aten::scatter.value_out", "aten::scatter_add.out"),
         footprint=Footprint(("index",), _INDEX_IN_DIM)),
    Rule(("aten::embedding.out",), footprint=Footprint(("indices",), (fp.indices_in_dim("indices", "weight", 0),))),
    Rule(("aten::index.Tensor_out",), footprint=Footprint(("indices",), (fp.tensor_indices("self", "indices"),),
                                                         bounded=f"a bool mask's count: {_RESIZED}")),
    Rule(("aten::index_put.out", "aten::index_put_"),
         footprint=Footprint(("indices", "values"), (fp.tensor_indices("self", "indices"), fp.values_fit_indexing("self", "indices", "values")))),
    Rule(("aten::repeat_interleave.Tensor_out",), footprint=Footprint(("repeats",), (fp.repeats_fit("repeats", "output_size"),),
                                                                     bounded=f"a valid sum: {_RESIZED}")),
    Rule(("aten::masked_scatter.out",), footprint=Footprint(("mask", "source"), (fp.mask_count_within("mask", "source", "self"),))),
    Rule(("aten::nonzero.out",), footprint=Footprint(("self",), bounded=_RESIZED)),
    Rule(("aten::masked_select.out",), footprint=Footprint(("mask",), bounded=_RESIZED)),
    Rule(("aten::grid_sampler_2d.out",), footprint=Footprint(("grid",), bounded=(
        "the kernel bounds-checks or clips every position it reads (non-finite and huge grid values included); torch refuses no grid value"))),
    Rule(("aten::max_pool2d_with_indices_backward.grad_input",), footprint=Footprint(("indices",), bounded=(
        "the safety guard refusing indices beyond a plane of self (torch accepts them; the kernel writes outside grad_input)"))),
]


RULES = [
    # found by the conformance sweep's shrinking (double free), then by etops.guard.call:
    # "read past the end of argument 'grad_input'"
    Rule(("aten::max_pool2d_with_indices_backward.grad_input",), safety=Safety(guards=(_pool_indices_in_range,)), judging=Judging(findings=(
        _finding("aten::max_pool2d_with_indices_backward.grad_input",
                 "max_pool2d_with_indices_backward.grad_input writes outside grad_input for indices beyond a plane of self",
                 "indices",
                 [("grad_output", tensor((1, 1, 1, 1))), ("self", tensor((1, 1, 2, 2))), ("kernel_size", value([2, 2])),
                  ("stride", value([2, 2])), ("padding", value([0, 0])), ("dilation", value([1, 1])), ("ceil_mode", value(False)),
                  ("indices", tensor((1, 1, 1, 1), "int64", values="oob_high"))],
                 "heap corruption (double free or corruption) / SIGSEGV past the end of grad_input", outs=("grad_input",), memory=True),
    ))),
    Rule(("aten::_fft_r2c.out",), direct=Direct(guards=(g.floating("self"),)), judging=Judging(findings=(
        _finding("aten::_fft_r2c.out", "_fft_r2c.out aborts on an integer input instead of failing", "self",
                 [("self", tensor((0, 0, 0, 0, 0), "int64")), ("dim", value([0])), ("normalization", value(0)), ("onesided", value(True))], _FFT_ABORT),
    ))),
    Rule(("aten::_fft_c2r.out",), direct=Direct(guards=(g.complex_("self"),)), judging=Judging(findings=(
        _finding("aten::_fft_c2r.out", "_fft_c2r.out aborts on an integer input instead of failing", "self",
                 [("self", tensor((0,), "int64")), ("dim", value([0])), ("normalization", value(0)), ("last_dim_size", value(1))], _FFT_ABORT),
    ))),
    # an empty input has nothing to compute; the optimized kernel divides by its empty dim
    Rule(("aten::_log_softmax.out",), safety=Safety(no_work=g.is_empty("self")), judging=Judging(findings=(
        _finding("aten::_log_softmax.out", "the optimized _log_softmax.out divides by the size of an empty reduced dim", "self",
                 [("self", tensor((0,))), ("dim", value(-1)), ("half_to_float", value(False))], "SIGFPE: integer division by zero on an empty input",
                 outs=(), computes=True, memory=True),
    ))),
    Rule(("aten::narrow_copy.out",), direct=Direct(normalize=(n.nonnegative_dim("self", "dim"),), guards=(g.dim_in_range("self", "dim"),)), judging=Judging(findings=(
        _finding("aten::narrow_copy.out", "narrow_copy.out passes a negative dim to size() unnormalized", "dim",
                 [("self", tensor((0,))), ("dim", value(-1)), ("start", value(0)), ("length", value(0))],
                 "size(): Dimension out of range (a negative dim is passed to size() unnormalized)", computes=True),
    ))),
    Rule(("aten::arange.out", "aten::arange.start_out"), direct=Direct(guards=(g.arange_length(),)), judging=Judging(findings=(
        _finding("aten::arange.start_out", "arange.start_out aborts when the length overflows int32 instead of failing", "step",
                 [("start", value(0)), ("end", value(1)), ("step", value(3.614981244061654e-210))],
                 "compute_arange_out_size(): numel >= 0 (the length overflows int32)"),
    ))),
    Rule(("aten::amax.out", "aten::amin.out"), direct=Direct(guards=(g.nonempty("self"),)), judging=Judging(findings=tuple(
        _finding(op, f"{op.split('::')[1]} aborts on an empty input instead of failing", "self",
                 [("self", tensor((0, 0))), ("dim", value([0]))], _EMPTY_REDUCTION)
        for op in ("aten::amax.out", "aten::amin.out")
    ))),
    Rule(("aten::bmm.out",), direct=Direct(guards=(g.exact_dim(3, "self", "mat2"),)), judging=Judging(findings=(
        _finding("aten::bmm.out", "bmm.out reads size(0) of a 0-dim input before checking its rank", "self",
                 [("self", tensor(())), ("mat2", tensor(()))], _SIZE_ABORT),
    ))),
    Rule(("aten::native_group_norm.out",), direct=Direct(guards=(g.min_dim("input", 2),)), judging=Judging(findings=(
        _finding("aten::native_group_norm.out", "native_group_norm.out reads the size of a 0-dim input before checking its rank", "input",
                 [("input", tensor(())), ("weight", value(None)), ("bias", value(None)), ("N", value(0)), ("C", value(0)),
                  ("HxW", value(0)), ("group", value(0)), ("eps", value(1e-5))], _SIZE_ABORT, outs=("out0", "out1", "out2")),
    ))),
    Rule(("aten::unfold_copy.out",), direct=Direct(guards=(g.min_dim("self", 1), g.dim_valid("self", "dimension"))), judging=Judging(findings=(
        _finding("aten::unfold_copy.out", "unfold_copy.out reads the size of a 0-dim input before checking its rank", "self",
                 [("self", tensor(())), ("dimension", value(0)), ("size", value(0)), ("step", value(0))], _SIZE_ABORT),
        _finding("aten::unfold_copy.out", "unfold_copy.out normalizes an out-of-range negative dim into another negative one", "dimension",
                 [("self", tensor((0, 0, 0))), ("dimension", value(-4)), ("size", value(0)), ("step", value(0))],
                 "size(): Dimension out of range (dimension -4 of a 3-d tensor normalized to -1)"),
    ))),
    Rule(("aten::index.Tensor_out", "aten::index_put.out"), direct=Direct(guards=(g.mask_indices("self", "indices"),)), judging=Judging(findings=tuple(
        _finding(op, f"{op.split('::')[1]} reads sizes of dims a bool mask index covers beyond self's rank", "indices",
                 [("self", tensor((3,))), ("indices", ("L", [tensor((3, 0, 0, 0), "bool")]))] + extra, _MASK_ABORT)
        for op, extra in (("aten::index.Tensor_out", []), ("aten::index_put.out", [("values", tensor(())), ("accumulate", value(False))]))
    ))),
    # found by adversarial calls under glibc's malloc checking
    # torch reduces a 0-dim tensor over dim 0 (or -1); the kernel aborts on size(0) of it
    Rule(("aten::sum.IntList_out",), direct=Direct(normalize=(n.scalar_dims_as_none("self", "dim"),)), judging=Judging(findings=(
        _finding("aten::sum.IntList_out", "sum.IntList_out aborts on a 0-dim input with dim=[0] instead of reducing it", "dim",
                 [("self", tensor(())), ("dim", value([0])), ("keepdim", value(False))], _SIZE_ABORT, computes=True),
    ))),
    # torch's sub refuses bools (sub_check) in its CPU kernel, not in its meta kernel
    Rule(("aten::sub.out", "aten::sub.Scalar_out", "aten::rsub.Scalar_out"), torch_checks=(
        g.not_bool("self", "other", why="torch does not subtract bools (use ~ or logical_xor)"),
    )),
    # torch's alpha_check (bool alpha, floating alpha) is in its CPU kernels, not their meta kernels
    Rule(("aten::add.out", "aten::sub.out", "aten::add.Scalar_out", "aten::sub.Scalar_out", "aten::rsub.Scalar_out"),
         torch_checks=(g.alpha_fits_result("alpha", "self", "other"),)),
    # torch's meta of add/sub.Scalar_out fails on its alpha (torch_checks.py): castability checked here
    Rule(("aten::add.Scalar_out", "aten::sub.Scalar_out"), torch_checks=(g.castable_out("out", "self", "other"),)),
    Rule(("aten::div.out",), torch_checks=(g.castable_out("out", "self", "other"),), judging=Judging(findings=(
        _finding("aten::div.out", "div.out writes a complex result into a real out without checking castability", "out",
                 [("self", tensor((4,), "complex64")), ("other", tensor((4,)))],
                 "returns success and writes complex values past the end of a float32 out (heap corruption)", memory=True),
    ))),
    Rule(("aten::embedding.out",), direct=Direct(guards=(g.dtype_in("indices", (torch.int64, torch.int32), "int64 or int32"),)), judging=Judging(findings=(
        _finding("aten::embedding.out", "embedding.out asserts on non-integer indices instead of failing", "indices",
                 [("weight", tensor((5, 3))), ("indices", tensor((2,)))],
                 "assert failed (ix_type == ScalarType::Long || ix_type == ScalarType::Int)"),
    ))),
    # data-dependent out shapes: upper bounds the kernel shrinks the out to
    Rule(("aten::nonzero.out",), sizing=Sizing(upper_bound=_upper_bound_nonzero)),
    Rule(("aten::masked_select.out",), sizing=Sizing(upper_bound=_upper_bound_masked_select)),
    # data-dependent out shapes without a bound: ATen sizes them on the real inputs
    # (bool-mask indices; repeats without output_size)
    Rule(("aten::index.Tensor_out", "aten::repeat_interleave.Tensor_out"), sizing=Sizing(sized_from_data=True)),
    # random outputs: only shape and dtype compare
    Rule(("aten::rand.out", "aten::randn.out", "aten::native_dropout.out"), judging=Judging(compare=METADATA)),
    # uninitialized outputs, every namespace and overload (the conformance sweep asks
    # for torch's functional overloads too)
    Rule(("*::empty.*", "*::empty_like.*", "*::empty_strided.*", "*::new_empty.*", "*::new_empty_strided.*", "*::_empty_dim_order.*"),
         judging=Judging(compare=METADATA)),
    # etops.fuzz.sequences: torch skips its checks for an empty index; the kernel then
    # calls size() with the index's dims and aborts. Nothing to compute: only sized.
    Rule(("aten::gather.out",), direct=Direct(no_work=g.is_empty("index")), judging=Judging(findings=(
        _finding("aten::gather.out", "gather.out aborts on an empty index of another rank than self", "index",
                 [("self", tensor((1, 1, 0, 1))), ("dim", value(-3)), ("index", tensor((0, 3, 0), "int64", values="index"))],
                 "size(): Dimension out of range (an empty index with fewer dims than self)", computes=True),
    ))),
    # etops check --dim-orders: topk computes wrong values and corrupts the heap on a
    # channels-last or permuted input (free(): invalid pointer under glibc's malloc check)
    Rule(("aten::topk.values",), safety=Safety(contiguous_only=True)),
    # kernels silently wrong on a layout (below)
    *(Rule((name,), judging=Judging(wrong_layouts=found)) for name, found in sorted(_WRONG_LAYOUTS.items())),
    # index outputs where any index of equal values is right
    Rule(("aten::topk.values", "aten::max.dim_max", "aten::min.dim_min", "aten::argmax.out", "aten::argmin.out",
          "aten::max_pool2d_with_indices.out"), judging=Judging(compare=TIES)),
    *_INPUTS,
    *_FOOTPRINTS,
]
