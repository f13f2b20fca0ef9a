"""The constraint table of generated cases: per operator family, what an operator's
schema does not say about the inputs the case generator (etops.conformance.generated)
should make. Beside the rules table (etops.ops.rules), read by the generator only.

Most operators need no entry: the generator derives their arguments from the schema
(tensors, Scalars, dims, flags) and torch's tags (``pointwise``: the tensors
broadcast together), and ATen's meta kernel says which generated tuples are valid
(an invalid one becomes a refusal case). An entry says what derivation gets wrong
or misses: the family of shapes (``matmul``: (m, k) @ (k, n)), arguments to fix or
to choose from, the value classes that matter most for the operator (large
magnitudes for exp / softmax / log-sum-exp; accumulator overflow for sums), or
that no case can be generated (``skip``: why).

Core module: imports the standard library only.
"""

from __future__ import annotations

import dataclasses

from ..errors import refusing

#: shape families the generator knows: "auto" (pointwise broadcasting when torch tags
#: the op pointwise, else every tensor of one shape), "matmul" ((m, k) @ (k, n), a
#: batch in front for bmm), "reduction" (the first tensor's dims; other tensors
#: shaped as it)
FAMILIES = ("auto", "matmul", "reduction")


@dataclasses.dataclass(frozen=True)
class Generation:
    """How generated cases of an operator are made beyond its schema.

    `family`: one of FAMILIES; `fixed`: argument -> the value every case gives it;
    `choices`: argument -> values a case picks from (a key's random choice);
    `emphasis`: value classes generated on a few shapes with many elements at every
    dtype that admits them (names of etops.conformance.generated.classes.VALUE_CLASSES),
    before the pairwise rows; `dtypes`: the dtype names the cases' tensors take
    (None: the promotion lattice's); `wrapped_dims`: dims are given in [0, rank) as
    the internal operators take them (their CPU kernels do not wrap a negative
    one); `skip`: why no case is generated (None: cases are)."""

    family: str = "auto"
    fixed: tuple = ()
    choices: tuple = ()
    emphasis: tuple = ()
    dtypes: tuple | None = None
    wrapped_dims: bool = False
    skip: str | None = None

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise refusing(ValueError, "family", f"Generation: argument 'family' must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        for name in ("fixed", "choices"):
            pairs = getattr(self, name)
            if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
                raise refusing(TypeError, f"{name}", f"Generation: argument '{name}' must be (argument name, value) pairs")


_EXP = ("large_magnitude", "huge", "nonfinite")
_ACCUMULATES = ("overflow", "int_extremes")

#: operator (``aten::name``, every overload) or kernel (``aten::name.overload``) -> its Generation
TABLE: dict = {
    # exp and its relatives: large magnitudes overflow exp() without the max subtracted first
    "aten::_softmax": Generation("reduction", fixed=(("half_to_float", False),), emphasis=_EXP),
    "aten::_log_softmax": Generation("reduction", fixed=(("half_to_float", False),), emphasis=_EXP),
    "aten::logsumexp": Generation("reduction", emphasis=_EXP),
    "aten::exp": Generation(emphasis=_EXP),
    "aten::expm1": Generation(emphasis=_EXP),
    "aten::sigmoid": Generation(emphasis=_EXP),
    "aten::tanh": Generation(emphasis=_EXP),
    # accumulations: narrow integer and half types overflow their accumulator
    "aten::cumsum": Generation("reduction", emphasis=_ACCUMULATES),
    "aten::cumprod": Generation("reduction", emphasis=_ACCUMULATES),
    "aten::sum": Generation("reduction", emphasis=_ACCUMULATES),
    "aten::prod": Generation("reduction", emphasis=_ACCUMULATES),
    "aten::mean": Generation("reduction", emphasis=("overflow", "huge")),
    "aten::var": Generation("reduction", emphasis=("huge",)),
    "aten::amax": Generation("reduction", emphasis=("nonfinite",)),
    "aten::amin": Generation("reduction", emphasis=("nonfinite",)),
    "aten::argmax": Generation("reduction", emphasis=("nonfinite",)),
    "aten::argmin": Generation("reduction", emphasis=("nonfinite",)),
    # NaN propagation of the elementwise extremes
    "aten::maximum": Generation(emphasis=("nonfinite", "signed_zero")),
    "aten::minimum": Generation(emphasis=("nonfinite", "signed_zero")),
    # matrix products: (m, k) @ (k, n), sizes crossing tile widths
    "aten::mm": Generation("matmul", emphasis=("overflow",)),
    "aten::bmm": Generation("matmul", emphasis=("overflow",)),
    "aten::addmm": Generation("matmul", emphasis=("overflow",)),
    # internal FFT operators: wrapped dims only (torch.fft wraps them first; ATen's CPU kernel dies on a
    # negative one, a double free in torch 2.13) and no half-precision input (a segfault)
    "aten::_fft_r2c": Generation(dtypes=("float32", "float64"), wrapped_dims=True),
    "aten::_fft_c2r": Generation(wrapped_dims=True),
    "aten::_fft_c2c": Generation(wrapped_dims=True),
    # random or uninitialized results, or inputs the schema cannot describe
    "aten::native_dropout": Generation(skip="random results"),
    "aten::empty": Generation(skip="uninitialized results"),
}


def generation_of(kernel: str) -> Generation:
    """The Generation of `kernel` (``aten::add.out``): its own entry, else its
    operator's, else the default (everything derived from the schema)."""
    if not isinstance(kernel, str) or "::" not in kernel:
        raise refusing(TypeError, "kernel", f"generation_of: argument 'kernel' must be a 'namespace::op.overload' name, got {kernel!r}")
    found = TABLE.get(kernel)
    if found is None:
        found = TABLE.get(kernel.split(".", 1)[0])
    return found or Generation()


__all__ = ["FAMILIES", "Generation", "TABLE", "generation_of"]
