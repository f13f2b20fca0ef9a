"""What one upstream test states, decided from a finding's smallest failing call:
the out variant's arguments by name, what the kernel must do (the values of the
reference that judged the finding, within the tolerance the verdict used, or a
kernel failure where ATen refuses the inputs too) and what the shipped kernel does
instead (a wrong value, a refusal, an abort, a crash).

``test_spec(finding, case, func, args, kwargs)`` builds it; nothing here writes
C++ or runs a kernel of ExecuTorch. May import: torch, etops.conformance
(effective, precise, values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..conformance import precise
from ..conformance.effective import LOSS_MULTIPLE, LOSS_ULPS, NARROWER
from ..conformance.values import exact_clone, leaves
from ..errors import NotTestable

#: what the shipped kernel does, by the finding's kind (a mismatch: a wrong value)
SHIPPED = {"mismatch": "value", "abort": "abort", "crash": "crash", "unsupported": "refusal"}
#: the expectations of a test: the reference's values, or a kernel failure (ET_EXPECT_KERNEL_FAILURE)
VALUES, FAILURE = "values", "failure"


@dataclass
class TestSpec:
    """One test: the operator, its out variant's schema and each argument's value
    (outs: their expected results), the expectation and its tolerance."""

    kernel: str  #: "aten::sum.IntList_out"
    schema: Any  #: torch FunctionSchema of the out variant
    values: dict  #: argument name -> value; an out's value is its expected result (a tensor), or an empty tensor
    expect: str  #: VALUES or FAILURE
    shipped: str  #: what the shipped kernel does: "value", "refusal", "abort", "crash"
    tolerance: list | None = None  #: (rtol, atol) per out, None: exact (EXPECT_TENSOR_EQ)
    reference: str = "ATen"  #: the reference the expected values come from
    category: str = ""  #: the finding's category (wrong, precision loss, abort, ...)
    reason: str | None = None  #: the verdict's reason ("computes float64 in float32")
    figures: dict = field(default_factory=dict)  #: ulps and errors of the finding, for the issue text

    @property
    def outs(self) -> list[str]:
        return [a.name for a in self.schema.arguments if a.alias_info is not None and a.alias_info.is_write]

    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype of the first tensor argument (what the test is named by)."""
        for a in self.schema.arguments:
            v = self.values.get(a.name)
            if isinstance(v, torch.Tensor):
                return v.dtype
            if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
                return v[0].dtype
        return None


def out_overload(kernel: str):
    """torch's OpOverload of `kernel` ("aten::sum.IntList_out"); NotTestable when torch has none."""
    ns, _, rest = kernel.partition("::")
    name, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
    except (AttributeError, RuntimeError) as exc:
        raise NotTestable(f"torch has no operator {kernel}") from exc


def bind(func, args, kwargs) -> dict:
    """The arguments of ATen's call `func(*args, **kwargs)` by name (defaults filled in)."""
    bound = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def _reference(func, args, kwargs, results: list) -> tuple[list, str]:
    """The expected results: ATen's op evaluated in longdouble (rounded to float64)
    for a float64 op etops has that evaluator of, else ATen's own."""
    if results and all(isinstance(r, torch.Tensor) and r.dtype in NARROWER for r in results):
        try:
            evaluated = precise.reference(func, args, kwargs)
        except Exception:  # noqa: BLE001 - no longdouble evaluation of this call
            evaluated = None
        if evaluated is not None and len(evaluated) >= len(results) and all(
                tuple(e.shape) == tuple(r.shape) for e, r in zip(evaluated, results)):
            return [torch.from_numpy(e.astype("float64")).to(r.dtype) for e, r in zip(evaluated, results)], "longdouble"
    return results, "ATen"


def _tolerances(case, expected: list) -> list | None:
    """(rtol, atol) per out, the verdict's: for float64 the bound of a precision loss
    in ulps at that output's scale (effective.py: 16 x ATen's ulps + 1024, an error
    measured output by output), else the sweep's tolerance of the case; None (exact)
    for integer and bool results."""
    if not any(t.is_floating_point() or t.is_complex() for t in expected):
        return None
    if all(t.dtype in NARROWER for t in expected) and getattr(case, "ulps", None) is not None:
        bound = LOSS_MULTIPLE * (getattr(case, "aten_ulps", None) or 0.0) + LOSS_ULPS
        out = []
        for t in expected:
            finite = t[torch.isfinite(t)].abs()
            scale = float(finite.max()) if finite.numel() else 0.0
            info = torch.finfo(t.dtype)
            out.append((0.0, bound * max(info.eps * scale, info.eps * info.tiny)))
        return out
    rtol, atol = getattr(case, "rtol", None), getattr(case, "atol", None)
    if rtol is None or atol is None:  # not recorded (an abort's case): torch.testing's default for the dtype, as OpInfo's
        from torch.testing._comparison import default_tolerances

        rtol, atol = default_tolerances(*expected)
    return [(float(rtol), float(atol))] * len(expected)


def test_spec(finding: dict, case, func, args, kwargs) -> TestSpec:
    """The test of a finding (its JSON: kernel, kind, category) from its smallest
    call (ATen's overload `func` on `args` / `kwargs`); `case` is its
    representative CaseResult (the tolerance and ulps the verdict used)."""
    kind = finding["kind"]
    if kind not in SHIPPED:
        raise NotTestable(f"a {kind} finding has no upstream test form here")
    kernel = finding["kernel"]
    if finding.get("layout"):
        raise NotTestable(f"a finding of the dim-order layout {finding['layout']} (its tensors are not contiguous)")
    schema = out_overload(kernel)._schema
    bound = bind(func, args, kwargs)
    outs = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    values = {}
    for a in schema.arguments:
        if a in outs:
            continue
        if a.name in bound:
            values[a.name] = bound[a.name]
        elif a.has_default_value():
            values[a.name] = a.default_value
        else:
            raise NotTestable(f"argument '{a.name}' of {kernel} has no value in ATen's call {func}")
    try:
        results = [r for r in leaves(func(*exact_clone(list(args)), **exact_clone(dict(kwargs)))) if isinstance(r, torch.Tensor)]
    except Exception:  # noqa: BLE001 - ATen refuses the inputs: the kernel should fail too, not die
        results = None
    if results is None:
        if kind == "mismatch":
            raise NotTestable("ATen refuses the smallest input of a mismatch")
        for a in outs:
            values[a.name] = torch.empty(0)
        return TestSpec(kernel, schema, values, FAILURE, SHIPPED[kind], category=finding.get("category", kind))
    if len(results) != len(outs):
        raise NotTestable(f"ATen gives {len(results)} results for the {len(outs)} outs of {kernel}")
    expected, reference = _reference(func, args, kwargs, results)
    for a, t in zip(outs, expected):
        values[a.name] = t
    tolerance = _tolerances(case, expected)
    figures = {k: getattr(case, k, None) for k in ("ulps", "aten_ulps", "max_abs_error", "max_rel_error", "reference")}
    return TestSpec(kernel, schema, values, VALUES, SHIPPED[kind], tolerance, reference,
                    finding.get("category", kind), getattr(case, "reason", None) or finding.get("reason"),
                    {k: v for k, v in figures.items() if v is not None and not (isinstance(v, float) and math.isnan(v))})
