"""Input constraints of the operators no OpInfo sample reaches: the sibling of
the rules table that says how the conformance sweep makes their inputs
(etops.conformance.references.aten reads it).

Each ``InputConstraints`` names the operator and either an OpInfo whose samples
are converted (``opinfo``: ``bitwise_and.Scalar_out`` takes the samples of
``bitwise_and`` with the tensor ``other`` turned into a Python number) or none
(inputs generated from the schema by the reference module, within ``ranks``).
Per argument: ``scalar`` is the argument made a number, kept within
``scalar_range`` (shift amounts below the bit width, nonzero divisors);
``positive`` the tensors whose values must be > 0 (variances); ``invalid`` the
(argument, what is wrong) pairs of the invalid samples a generator makes.
Imports the standard library only.
"""

from __future__ import annotations

import dataclasses

_INTEGRAL = ("int64", "int32", "uint8", "bool")
_FLOATING = ("float32", "float64", "float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class InputConstraints:
    op: str
    dtypes: tuple
    opinfo: str | None = None
    scalar: str | None = None
    scalar_range: tuple | None = None
    nonzero: bool = False
    ranks: tuple | None = None
    positive: tuple = ()
    invalid: tuple = ()

    def __post_init__(self):
        if self.scalar_range is not None and not (len(self.scalar_range) == 2 and self.scalar_range[0] <= self.scalar_range[1]):
            raise ValueError(f"InputConstraints({self.op}): argument 'scalar_range' must be (low, high) with low <= high")


INPUTS = {c.op: c for c in (
    InputConstraints("aten::bitwise_and.Scalar_out", _INTEGRAL, "bitwise_and", scalar="other"),
    InputConstraints("aten::bitwise_or.Scalar_out", _INTEGRAL, "bitwise_or", scalar="other"),
    InputConstraints("aten::bitwise_xor.Scalar_out", _INTEGRAL, "bitwise_xor", scalar="other"),
    # shifting by the bit width or more is undefined in C: amounts in [0, 8) hold for every integral dtype
    InputConstraints("aten::bitwise_left_shift.Tensor_Scalar_out", _INTEGRAL[:3], "bitwise_left_shift", scalar="other", scalar_range=(0, 7)),
    InputConstraints("aten::bitwise_right_shift.Tensor_Scalar_out", _INTEGRAL[:3], "bitwise_right_shift", scalar="other", scalar_range=(0, 7)),
    InputConstraints("aten::fmod.Scalar_out", ("float32", "float64", "int64", "int32"), "fmod", scalar="other", nonzero=True,
                     invalid=(("other", "an integer zero divisor"),)),
    InputConstraints("aten::div.Scalar_mode_out", ("float32", "float64", "int64"), "div.floor_rounding", scalar="other", nonzero=True),
    InputConstraints("aten::pow.Scalar_out", ("float32", "float64", "int64"), "pow", scalar="self", scalar_range=(-3, 3)),
    InputConstraints("aten::linear.out", _FLOATING[:3], "nn.functional.linear"),
    InputConstraints("aten::upsample_bilinear2d.vec_out", ("float32", "float64"), "nn.functional.interpolate.bilinear"),
    InputConstraints("aten::upsample_nearest2d.vec_out", ("float32", "float64", "uint8"), "nn.functional.interpolate.nearest"),
    InputConstraints("aten::var.out", _FLOATING[:2], "var"),
    InputConstraints("aten::copy.out", ("float32", "int64", "bool", "float16"), ranks=(0, 3), invalid=(("src", "a shape that does not broadcast to self"),)),
    InputConstraints("aten::fill.Tensor_out", ("float32", "int64", "bool"), ranks=(0, 3), invalid=(("value", "a tensor with more than 0 dims"),)),
    InputConstraints("aten::index_put_", ("float32", "int64"), ranks=(1, 3)),
    InputConstraints("aten::native_dropout.out", ("float32",), ranks=(1, 3)),
    InputConstraints("aten::sym_numel", ("float32",), ranks=(0, 4)),
    InputConstraints("aten::sym_size.int", ("float32",), ranks=(1, 4), invalid=(("dim", "a dim out of range"),)),
    InputConstraints("aten::_native_batch_norm_legit_no_training.out", ("float32", "float64"), ranks=(2, 4), positive=("running_var",)),
    InputConstraints("aten::convolution_backward.out", ("float32", "float64"), ranks=(3, 4)),
)}


def input_constraints(op: str) -> InputConstraints | None:
    """The input constraints of `op`, or None when OpInfo's samples reach it."""
    if not isinstance(op, str):
        raise TypeError(f"input_constraints: argument 'op' must be an operator name string, got {type(op).__name__}")
    return INPUTS.get(op)
