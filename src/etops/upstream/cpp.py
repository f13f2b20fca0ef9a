"""A TestSpec as a ``TEST_F`` in the style of ExecuTorch's ``kernels/test/op_<name>_test.cpp``:
the file's ``OperatorTest`` fixture, one ``TensorFactory<ScalarType::...>`` per
dtype, each input a ``make`` of its exact values, the out variant called through
``torch::executor::<ns>::<name>_outf(context_, ...)`` (what the file's own helpers
call), then ``EXPECT_TENSOR_CLOSE_WITH_TOL`` / ``EXPECT_TENSOR_EQ`` against the
reference's values, or ``ET_EXPECT_KERNEL_FAILURE`` where the reference refuses the
inputs. Names of executorch types are spelled as the file's using-declarations
allow, fully qualified otherwise.

``test_source(spec, fixture, name, file_text)`` returns the text and the line
(within it) of each expectation. May import: torch, etops.upstream's literals and spec.
"""

from __future__ import annotations

import re

import torch

from . import literals
from .spec import FAILURE, NotTestable, TestSpec

_QUALIFIED = {
    "Tensor": "executorch::aten::Tensor",
    "ScalarType": "executorch::aten::ScalarType",
    "ArrayRef": "executorch::aten::ArrayRef",
    "Scalar": "executorch::aten::Scalar",
    "TensorFactory": "torch::executor::testing::TensorFactory",
}


def spellings(file_text: str) -> dict:
    """Short name -> how the test file lets it be written (its using-declarations
    of executorch::aten / exec_aten / torch::executor names; qualified otherwise)."""
    out = {}
    for short, full in _QUALIFIED.items():
        used = re.search(rf"^\s*using\s+(?:::)?(?:executorch::aten|exec_aten|torch::executor(?:::testing)?)::{short}\s*;",
                         file_text, re.M)
        out[short] = short if used else full
    return out


def _word(text: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", text) if p)


def dtype_word(dtype: torch.dtype | None) -> str:
    """Float64 for torch.float64, BFloat16 for torch.bfloat16, and so on."""
    if dtype is None:
        return ""
    name = str(dtype)[6:]
    return {"bfloat16": "BFloat16"}.get(name, name[:1].upper() + name[1:])


#: operators whose float64-in-float32 finding is an accumulation
_REDUCTIONS = ("sum", "mean", "var", "var_mean", "std", "prod", "cumsum", "cumprod", "addmm", "mm", "bmm", "linear")


def test_name(spec: TestSpec) -> str:
    """What the test shows, as gtest names tests: Float64AccumulatesInFloat64,
    Int64ZeroDimDoesNotAbort, Float32EmptyMatchesReference, ..."""
    dtype = spec.dtype
    inputs = [spec.values[a.name] for a in spec.schema.arguments
              if isinstance(spec.values.get(a.name), torch.Tensor) and a.name not in spec.outs]
    feature = "ZeroDim" if any(t.dim() == 0 for t in inputs) else "Empty" if any(t.numel() == 0 for t in inputs) else ""
    base = spec.kernel.split("::", 1)[-1].split(".", 1)[0].lstrip("_")
    if spec.reason and spec.category == "wrong" and " in " in spec.reason:
        wide = dtype_word(dtype)
        verb = "Accumulates" if base in _REDUCTIONS else "Computes"
        return f"{wide}{verb}In{wide}"
    what = {"abort": "DoesNotAbort", "crash": "DoesNotCrash", "refusal": "IsSupported"}.get(spec.shipped)
    if spec.expect == FAILURE:
        what = "FailsInsteadOfAborting" if spec.shipped == "abort" else "FailsInsteadOfCrashing"
    elif what is None:
        what = "IsAsPreciseAsReference" if spec.category == "precision loss" else "MatchesReference"
    return _word(f"{dtype_word(dtype)} {feature} {what}")


def _shape(t: torch.Tensor) -> str:
    return "{" + ", ".join(str(s) for s in t.shape) + "}"


class _Writer:
    """Collects a test's lines: factories first, then the arguments in schema order."""

    def __init__(self, names: dict):
        self.names = names
        self.factories: dict[torch.dtype, str] = {}
        self.lines: list[str] = []

    def factory(self, dtype: torch.dtype) -> str:
        if dtype not in self.factories:
            self.factories[dtype] = f"tf_{str(dtype)[6:]}"
        return self.factories[dtype]

    def make(self, t: torch.Tensor) -> str:
        tf = self.factory(t.dtype)
        values = literals.elements(t)
        return f"{tf}.make({_shape(t)}, {{{', '.join(values)}}})"

    def tensor(self, name: str, t: torch.Tensor) -> str:
        self.lines.append(f"  {self.names['Tensor']} {name} = {self.make(t)};")
        return name

    def argument(self, arg, value) -> str:
        """The C++ expression of one argument (declaring what it needs)."""
        kind = str(arg.real_type)
        optional = kind.startswith("Optional[")
        inner = kind[len("Optional["):-1] if optional else kind
        if value is None:
            if not optional:
                raise NotTestable(f"argument '{arg.name}' is None but its type is {kind}")
            return "std::nullopt"
        if inner == "Tensor":
            if not isinstance(value, torch.Tensor):
                raise NotTestable(f"argument '{arg.name}' is not a tensor")
            return self.tensor(arg.name, value)
        if inner == "List[Tensor]":
            names = [self.tensor(f"{arg.name}_{i}", t) for i, t in enumerate(value)]
            self.lines.append(f"  std::vector<{self.names['Tensor']}> {arg.name} = {{{', '.join(names)}}};")
            return f"{self.names['ArrayRef']}<{self.names['Tensor']}>({arg.name}.data(), {arg.name}.size())"
        if inner in ("List[int]", "List[SymInt]", "List[float]", "List[bool]"):
            ctype = {"List[float]": "double", "List[bool]": "bool"}.get(inner, "int64_t")
            items = [literals.scalar(float(v) if ctype == "double" else bool(v) if ctype == "bool" else int(v)) for v in value]
            if not items:
                return f"{self.names['ArrayRef']}<{ctype}>()"
            self.lines.append(f"  {ctype} {arg.name}[] = {{{', '.join(items)}}};")
            return f"{self.names['ArrayRef']}<{ctype}>({arg.name}, {len(items)})"
        if inner in ("int", "SymInt"):
            return literals.int_literal(int(value))
        if inner == "float":
            return literals.float_literal(float(value))
        if inner == "bool":
            return "true" if value else "false"
        if inner in ("Scalar", "number"):
            return f"{self.names['Scalar']}({literals.scalar(value)})"
        if inner == "ScalarType":
            return literals.scalar_type(value).replace("ScalarType", self.names["ScalarType"], 1)
        raise NotTestable(f"argument '{arg.name}' of type {kind} has no literal form here")


def _function(kernel: str) -> str:
    ns, _, rest = kernel.partition("::")
    return f"torch::executor::{ns}::{rest.split('.', 1)[0]}_outf"


def test_source(spec: TestSpec, fixture: str, name: str, file_text: str = "",
                comment: str = "") -> tuple[str, list[tuple[int, int]]]:
    """The ``TEST_F(fixture, name)`` of `spec` and the (first, last) lines (1-based,
    within the text) of each expectation statement; NotTestable when an argument
    has no literal form. `comment`: a line said first in the test (what it shows)."""
    names = spellings(file_text)
    w = _Writer(names)
    call_args = []
    outs = spec.outs
    for a in spec.schema.arguments:
        if a.name in outs:
            continue
        call_args.append(f"/*{a.name}=*/{w.argument(a, spec.values.get(a.name))}")
    expectations = []
    for i, o in enumerate(outs):
        t = spec.values[o]
        if spec.expect == FAILURE:
            dtype = next((v.dtype for v in spec.values.values() if isinstance(v, torch.Tensor) and v.numel()), torch.float32)
            w.lines.append(f"  {names['Tensor']} {o} = {w.factory(dtype)}.zeros({{}});")
        else:
            w.lines.append(f"  {names['Tensor']} {o} = {w.factory(t.dtype)}.zeros({_shape(t)});")
            if spec.tolerance is None:
                expectations.append(f"  EXPECT_TENSOR_EQ({o}, {w.make(t)});")
            else:
                rtol, atol = spec.tolerance[i]
                expectations.append(f"  EXPECT_TENSOR_CLOSE_WITH_TOL(\n      {o},\n      {w.make(t)},\n"
                                    f"      /*rtol=*/{literals.float_literal(rtol)},\n      /*atol=*/{literals.float_literal(atol)});")
        call_args.append(o)
    call = f"{_function(spec.kernel)}(\n      context_,\n      " + ",\n      ".join(call_args) + ")"
    lines = [f"TEST_F({fixture}, {name}) {{"] + ([f"  // {comment}"] if comment else [])
    lines += [f"  {names['TensorFactory']}<{literals.scalar_type(d).replace('ScalarType', names['ScalarType'], 1)}> {tf};"
              for d, tf in w.factories.items()]
    lines += w.lines
    ranges = []

    def statement(text: str, expectation: bool) -> None:
        part = text.split("\n")
        if expectation:
            ranges.append((len(lines) + 1, len(lines) + len(part)))
        lines.extend(part)

    if spec.expect == FAILURE:
        statement("  ET_EXPECT_KERNEL_FAILURE(\n      context_,\n      " + call.replace("\n", "\n    ") + ");", True)
    else:
        statement(f"  {call};", False)
    for e in expectations:
        statement(e, True)
    lines.append("}")
    return "\n".join(lines) + "\n", ranges
