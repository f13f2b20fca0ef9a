"""What the conformance runner compares: exact clones of a case's inputs, short
descriptions of values, ATen-vs-ExecuTorch errors, the verdict of one
comparison (etops.compare's policies with OpInfo's tolerance), and for a
floating-point mismatch whether it is a precision loss or a wrong result (judged
against a higher-precision reference: ``precision_verdict``).

May import: torch, etops.compare and etops.ops (the rules table's comparison kinds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import re

import torch

from ..compare import BENCH, METADATA, OPINFO, VALUES, diff, torch_testing_message
from ..ops import rules_for


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def exact_clone(value):
    """Tensors copied with their storage, offset and strides (as_strided sees the
    same thing); lists and tuples copied element-wise."""
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage().clone()
        out = torch.empty(0, dtype=value.dtype)
        out.set_(storage, value.storage_offset(), value.size(), value.stride())
        # torch's lazy conjugate / negative bits are not in the storage: kept as views
        if value.is_conj():
            out = out.conj()
        if value.is_neg():
            out = torch._neg_view(out)
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(exact_clone(v) for v in value)
    return value


def on_meta(value):
    """`value` with its tensors as meta tensors (lists and tuples element-wise)."""
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    if isinstance(value, (list, tuple)):
        return type(value)(on_meta(v) for v in value)
    return value


def describe(value) -> str:
    if isinstance(value, torch.Tensor):
        extra = "" if value.is_contiguous() else f", stride={tuple(value.stride())}"
        if value.numel() == 1 and value.dim() == 0:
            return f"tensor({value.item()!r}, {dtype_name(value.dtype)})"
        return f"Tensor{list(value.shape)}:{dtype_name(value.dtype)}{extra}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


def leaves(value):
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(leaves(v))
        return out
    return [value]


def errors(actual, expected) -> tuple[float | None, float | None]:
    """Max absolute and relative error over finite elements of same-shaped tensors."""
    max_abs = max_rel = None
    for a, e in zip(leaves(actual), leaves(expected)):
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a) if isinstance(a, (int, float, bool, complex)) else None
        if not isinstance(e, torch.Tensor):
            e = torch.tensor(e) if isinstance(e, (int, float, bool, complex)) else None
        if a is None or e is None or a.shape != e.shape or a.numel() == 0:
            continue
        wide = torch.complex128 if (a.is_complex() or e.is_complex()) else torch.float64
        a64, e64 = a.detach().to(wide), e.detach().to(wide)
        diff = (a64 - e64).abs()
        finite = torch.isfinite(a64) & torch.isfinite(e64)
        # inf vs inf of the same sign and nan vs nan agree; anything else non-finite is off by inf
        same = (a64 == e64) | (torch.isnan(a64) & torch.isnan(e64))
        diff = torch.where(finite, diff, torch.where(same, torch.zeros_like(diff), torch.full_like(diff, math.inf)))
        abs_err = float(diff.max())
        denom = e64.abs()
        rel = torch.where(denom > 0, diff / denom.clamp_min(1e-300), torch.where(diff > 0, torch.full_like(diff, math.inf), torch.zeros_like(diff)))
        rel_err = float(rel.max())
        max_abs = abs_err if max_abs is None else max(max_abs, abs_err)
        max_rel = rel_err if max_rel is None else max(max_rel, rel_err)
    return max_abs, max_rel


@dataclass(frozen=True)
class Difference:
    """How a kernel's result differs from the reference: ``output``, the first
    differing output of several (None: one output, or the counts differ); ``what``:
    "count", "type", "shape", "dtype" (the first differing output's structure) or
    "values"; ``message``: in torch.testing.assert_close's words, for people."""

    output: int | None
    what: str
    message: str


def difference(actual, expected, atol, rtol, kind: "str | bool" = VALUES) -> Difference | None:
    """None if they agree, else how they differ (Difference). etops.compare's
    ``opinfo`` policy with OpInfo's (atol, rtol) when set; ``kind``: a comparison
    kind of etops.compare, or True / False for values / metadata only."""
    if isinstance(kind, bool):
        kind = VALUES if kind else METADATA
    tolerance = OPINFO.override(rtol=rtol, atol=atol)
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return Difference(None, "count", f"ExecuTorch returned {len(a_leaves)} values, ATen {len(e_leaves)}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        output = i if len(a_leaves) > 1 else None
        where = f"output {i}: " if output is not None else ""
        d = diff(a, e, tolerance, kind)
        if d.ok:
            continue
        problem = d.structural
        if problem is not None and isinstance(e, torch.Tensor):
            if problem.what == "type":
                return Difference(output, "type", f"{where}ExecuTorch returned {type(a).__name__}, ATen a Tensor")
            if problem.what == "shape":
                return Difference(output, "shape", f"{where}shape {list(a.shape)} (ExecuTorch) vs {list(e.shape)} (ATen)")
            if problem.what == "dtype":
                return Difference(output, "dtype",
                                  f"{where}dtype {dtype_name(a.dtype)} (ExecuTorch) vs {dtype_name(e.dtype)} (ATen)")
        return Difference(output, "values", where + (torch_testing_message(a, e, tolerance) or d.describe()))
    return None


def compare(actual, expected, atol, rtol, kind: "str | bool" = VALUES) -> str | None:
    """None if they agree, else why not (``difference``'s message)."""
    found = difference(actual, expected, atol, rtol, kind)
    return found.message if found is not None else None


def difference_kind(actual, expected) -> str:
    """What differs between a kernel's result and the reference it mismatches, as a
    word (an Outcome's ``what``): "count" (another number of outputs), "type" (not a
    tensor), "shape", "dtype", "non-finite" (non-finite where the reference is
    finite, or the other way), else "values"."""
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return "count"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor) and not isinstance(a, torch.Tensor):
            return "type"
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
            if a.shape != e.shape:
                return "shape"
            if a.dtype != e.dtype:
                return "dtype"
    abs_err, _ = errors(actual, expected)
    return "non-finite" if abs_err == math.inf else "values"


def digest(value) -> int | None:
    """A checksum of a result's bytes (its tensors' values, dtypes and shapes; other
    leaves by their repr): equal results, equal digests. None for no tensor."""
    import zlib

    found = False
    crc = 0
    for leaf in leaves(value):
        if isinstance(leaf, torch.Tensor):
            found = True
            t = leaf.detach()
            if t.is_conj():
                t = t.resolve_conj()
            if t.is_neg():
                t = t.resolve_neg()
            t = t.contiguous()
            crc = zlib.crc32(f"{t.dtype}{tuple(t.shape)}".encode(), crc)
            if t.numel():
                crc = zlib.crc32(t.view(-1).view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool
                                 else t.to(torch.uint8).numpy().tobytes(), crc)
        else:
            crc = zlib.crc32(repr(leaf).encode(), crc)
    return crc if found else None


#: verdicts of a mismatch, best first (``precision_verdict``)
AS_PRECISE = "within ATen's error"
PRECISION_LOSS = "precision loss"
WRONG = "wrong"
#: an edit's error beyond its base's and ATen's (etops dev: etops.conformance.outcome's precision rule)
PRECISION_REGRESSION = "precision regression"
VERDICTS = (AS_PRECISE, PRECISION_LOSS, PRECISION_REGRESSION, WRONG)


def widened(value):
    """`value` with floating tensors in float64, complex ones in complex128 and
    floating/complex dtype arguments (``dtype=torch.float16``) widened the same way."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.to(torch.complex128)
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, torch.dtype):
        return torch.complex128 if value.is_complex else torch.float64 if value.is_floating_point else value
    if isinstance(value, (list, tuple)):
        return type(value)(widened(v) for v in value)
    return value


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def precision_verdict(func, args, kwargs, actual, expected) -> tuple[str, float | None, float | None]:
    """(verdict, ExecuTorch's max abs error, ATen's max abs error) of a mismatch,
    both against a higher-precision reference: `func` (ATen) on the same inputs
    widened to float64 / complex128 (for float64 inputs that is ATen's own
    result). The verdict: AS_PRECISE when ExecuTorch's error is no larger than
    ATen's (the words printed beside the two errors never contradict them);
    PRECISION_LOSS when every element is within the dtype's tolerance of the
    reference: rtol * (scale + |reference|) with etops' loose per-dtype rtol (the
    benchmarks' check: 1e-2 float16, 5e-2 bfloat16, 1e-3 otherwise), so a result
    right to a few digits; else WRONG, as is every non-floating, structural or
    non-finite difference, any error where the reference is all zeros, and a case
    whose reference cannot be computed."""
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    if len(a_leaves) != len(e_leaves) or not all(
            _floating(a) and _floating(e) and a.shape == e.shape and a.dtype == e.dtype for a, e in zip(a_leaves, e_leaves)):
        return WRONG, None, None
    try:
        reference = func(*widened(list(args)), **{k: widened(v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - ATen has no wide version of this call
        return WRONG, None, None
    r_leaves = leaves(reference)
    if len(r_leaves) != len(e_leaves) or not all(isinstance(r, torch.Tensor) and r.shape == e.shape for r, e in zip(r_leaves, e_leaves)):
        return WRONG, None, None
    verdict, et_max, aten_max = AS_PRECISE, 0.0, 0.0
    for a, e, r in zip(a_leaves, e_leaves, r_leaves):
        et_err, _ = errors(a, r)
        aten_err, _ = errors(e, r)
        if et_err is None or aten_err is None:
            continue
        et_max, aten_max = max(et_max, et_err), max(aten_max, aten_err)
        if not math.isfinite(et_err):
            return WRONG, et_max, aten_max
        wide = torch.complex128 if r.is_complex() else torch.float64
        r64 = r.detach().to(wide)
        finite = torch.isfinite(r64)
        scale = float(r64[finite].abs().max()) if bool(finite.any()) else 0.0
        if et_err <= aten_err:  # the label's own words: no larger than ATen's error
            continue
        rtol, _atol = BENCH.pair(e.dtype)
        within = ((a.detach().to(wide) - r64).abs() <= rtol * (scale + r64.abs())) | ~finite
        if not bool(within.all()):
            return WRONG, et_max, aten_max
        verdict = PRECISION_LOSS
    return verdict, et_max, aten_max


_GREATEST = re.compile(r"Greatest (absolute|relative) difference: (\S+) at")


def reported_errors(message: str, actual, expected) -> tuple[float | None, float | None]:
    """A mismatch's (max abs, max rel) error as its message reports them
    (torch.testing's greatest differences among the mismatched elements), else
    over every element (``errors``); a non-finite difference stays infinite."""
    found = dict(_GREATEST.findall(message or ""))
    overall = errors(actual, expected)
    try:
        abs_err, rel_err = float(found["absolute"]), float(found["relative"])
    except (KeyError, ValueError):
        return overall
    if overall[0] == math.inf or not (math.isfinite(abs_err) and not math.isnan(rel_err)):
        return overall
    return abs_err, rel_err


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with "…" when
    cut (never mid-word)."""
    text = text or ""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def values_compared(func) -> bool:
    """False for ops whose values are random or uninitialized (shape and dtype only:
    the nondeterministic_seeded tag, or the metadata kind in etops.ops' record)."""
    if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
        return False
    schema = func._schema
    return rules_for(f"{schema.name}.{schema.overload_name or 'default'}").judging.compare != METADATA


# ---- calling the kernel ------------------------------------------------------------
