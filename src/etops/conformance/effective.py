"""The verdict of a floating-point result and a kernel's effective precision.

Every float64 case is measured against a reference more precise than float64
(etops.conformance.precise: ATen's op evaluated in longdouble; ATen's own float64
result where the op has no evaluator), ExecuTorch's error and ATen's both, in
ulps of float64 at the output's scale. The verdict (``judge``):

- *within ATen's error*: no larger than ATen's error;
- *precision loss*: at most ``LOSS_MULTIPLE`` (16) x ATen's error +
  ``LOSS_ULPS`` (1024) ulps: a different rounding, a longer accumulation;
- *wrong* beyond that. When the error is the size of the narrower dtype's
  rounding (``NARROWER``: float32; from 1/256 of a float32 ulp to 1024 of them), as
  is the error of the same ATen computation carried out in float32 (the inputs
  cast down), and is not 16 times smaller than that one, the reason says so:
  "computes float64 in float32". Garbage (larger) and a poor float64 algorithm
  (smaller) get no reason. A float64 case that passes OpInfo's
  tolerance (torch.testing's 1e-7 is about 10^9 ulps) is still a mismatch when
  it is wrong this way: measured against the longdouble reference, or against
  ATen's float64 result when the narrower computation matches.

Other dtypes keep values.precision_verdict (ATen on inputs widened to float64).
Each case's ulps are summed up per (kernel, dtype) in the tallies
(``worst_ulps``): the kernel's effective precision.

May import: torch, etops.conformance.values and .precise.
"""

from __future__ import annotations

import math

import torch

from . import precise
from .values import AS_PRECISE, PRECISION_LOSS, WRONG, leaves, errors, precision_verdict, widened

#: the narrower computation a float64 result is compared with
NARROWER = {torch.float64: torch.float32}
LOSS_MULTIPLE = 16
LOSS_ULPS = 1024
MATCH_FACTOR = 16
#: the smallest error (in ulps of the narrower dtype) that reads as its rounding
NARROW_FLOOR = 1 / 256


def _narrowed(value, narrow):
    if isinstance(value, torch.Tensor) and value.dtype in NARROWER:
        return value.to(narrow)
    if isinstance(value, torch.dtype) and value in NARROWER:
        return narrow
    if isinstance(value, (list, tuple)):
        return type(value)(_narrowed(v, narrow) for v in value)
    return value


def narrow_ulps(func, args, kwargs, refs, dtype: torch.dtype) -> float | None:
    """Worst error (ulps of `dtype`) of `func` computed in the narrower dtype
    (inputs cast down, result cast back) against `refs`; None when it cannot run."""
    narrow = NARROWER.get(dtype)
    if narrow is None:
        return None
    try:
        result = func(*_narrowed(list(args), narrow), **{k: _narrowed(v, narrow) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - ATen has no narrow version of this call
        return None
    parts = leaves(result)
    if len(parts) < len(refs):
        return None
    worst = None
    for n, r in zip(parts, refs):
        if not isinstance(n, torch.Tensor) or not n.is_floating_point():
            continue
        u = precise.effective_ulps(n.to(dtype), r, dtype)
        if u is not None:
            worst = u if worst is None else max(worst, u)
    return worst


def _worst(pairs, dtype) -> float | None:
    found = [u for u in (precise.effective_ulps(a, r, dtype) for a, r in pairs) if u is not None]
    return max(found) if found else None


def _narrow_sized(ulps: float, dtype: torch.dtype) -> bool:
    """An error (ulps of `dtype`) the size of the narrower dtype's rounding: from
    NARROW_FLOOR of its ulp up to LOSS_ULPS of them (float32 in float64: 2^21 to
    2^39 ulps); garbage is larger, a poor float64 algorithm smaller."""
    one = torch.finfo(NARROWER[dtype]).eps / torch.finfo(dtype).eps
    return math.isfinite(ulps) and one * NARROW_FLOOR <= ulps <= LOSS_ULPS * one


def reason_words(dtype: torch.dtype) -> str:
    """``computes float64 in float32``."""
    return f"computes {str(dtype)[6:]} in {str(NARROWER[dtype])[6:]}"


def judge(result, func, args, kwargs, actual, expected, why: str | None) -> str | None:
    """Sets `result`'s verdict, errors against the higher-precision reference, its
    ulps and ATen's (float64), and the reason of a wrong float64 result; returns
    why the case mismatches (`why`, or a new reason for a float64 case passing
    OpInfo's tolerance but wrong), None when it passes."""
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    pairs = [(a, e) for a, e in zip(a_leaves, e_leaves) if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)]
    wide = (len(a_leaves) == len(e_leaves) and pairs and all(
        e.dtype in NARROWER and a.dtype == e.dtype and a.shape == e.shape for a, e in pairs))
    if not wide:
        if why is not None:
            result.verdict, result.reference_error, result.aten_reference_error = precision_verdict(func, args, kwargs, actual, expected)
        return why
    dtype = pairs[0][1].dtype
    evaluated = precise.reference(func, args, kwargs)
    if evaluated is not None and (len(evaluated) < len(pairs) or any(r.shape != tuple(e.shape) for r, (_, e) in zip(evaluated, pairs))):
        evaluated = None
    refs = evaluated if evaluated is not None else [e for _, e in pairs]
    et = _worst([(a, r) for (a, _), r in zip(pairs, refs)], dtype)
    aten = _worst([(e, r) for (_, e), r in zip(pairs, refs)], dtype) if evaluated is not None else 0.0
    if et is None or aten is None:
        if why is not None:
            result.verdict, result.reference_error, result.aten_reference_error = precision_verdict(func, args, kwargs, actual, expected)
        return why
    result.ulps, result.aten_ulps, result.reference = et, aten, "longdouble" if evaluated is not None else "ATen float64"
    if et <= aten:
        verdict = AS_PRECISE
    elif et <= LOSS_MULTIPLE * aten + LOSS_ULPS:
        verdict = PRECISION_LOSS
    else:
        verdict = WRONG
    reason = None
    if verdict == WRONG and _narrow_sized(et, dtype):
        narrow = narrow_ulps(func, args, kwargs, refs, dtype)
        if narrow and _narrow_sized(narrow, dtype) and et >= narrow / MATCH_FACTOR:
            reason = reason_words(dtype)
    if why is None:
        if verdict != WRONG or (evaluated is None and reason is None):
            return None  # within the loss bound, or no better reference than ATen's own and no narrower match
        why = (f"{et:.3g} ulps of {str(dtype)[6:]} from a more precise reference ({result.reference}; ATen: {aten:.3g} ulps)"
               + (f": {reason}" if reason else ""))
    result.verdict, result.reason = verdict, reason
    result.reference_error = max(errors(a, torch.from_numpy(r.astype("float64")) if not isinstance(r, torch.Tensor) else r)[0] or 0.0
                                 for (a, _), r in zip(pairs, refs))
    result.aten_reference_error = max(errors(e, torch.from_numpy(r.astype("float64")) if not isinstance(r, torch.Tensor) else r)[0] or 0.0
                                      for (_, e), r in zip(pairs, refs))
    return why


#: the floating dtypes whose results ``measure`` measures against ATen widened to float64
MEASURED = (torch.float16, torch.bfloat16, torch.float32)


def wide_reference(func, args, kwargs) -> list | None:
    """ATen's result of `func` on the inputs widened to float64 (the reference of a
    float16, bfloat16 or float32 result), its leaves; None when ATen has no wide
    version of the call."""
    try:
        return leaves(func(*widened(list(args)), **{k: widened(v) for k, v in kwargs.items()}))
    except Exception:  # noqa: BLE001 - ATen has no wide version of this call
        return None


def measure(result, func, args, kwargs, actual, expected, wide=None) -> None:
    """Sets `result`'s ``ulps`` and ``aten_ulps``: the kernel's and ATen's worst error
    in ulps of the output dtype against ATen on the inputs widened to float64 (`wide`:
    that result's leaves when already known), for a float16, bfloat16 or float32
    result of ATen's shape and dtype, passing or not; leaves them unset otherwise."""
    a_leaves, e_leaves = leaves(actual), leaves(expected)
    pairs = [(a, e) for a, e in zip(a_leaves, e_leaves) if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)]
    if len(a_leaves) != len(e_leaves) or not pairs or not all(
            e.dtype in MEASURED and a.dtype == e.dtype and a.shape == e.shape for a, e in pairs):
        return
    refs = wide if wide is not None else wide_reference(func, args, kwargs)
    if refs is None or len(refs) < len(pairs):
        return
    et = aten = 0.0
    for (a, e), r in zip(pairs, refs):
        if not isinstance(r, torch.Tensor) or tuple(r.shape) != tuple(e.shape):
            return
        u, v = precise.effective_ulps(a, r, e.dtype), precise.effective_ulps(e, r, e.dtype)
        if u is None or v is None:
            return
        et, aten = max(et, u), max(aten, v)
    result.ulps, result.aten_ulps, result.reference = et, aten, WIDENED


#: the reference ``measure`` measures against
WIDENED = "ATen widened to float64"


def more_precise(result) -> bool:
    """Whether `result`'s ulps were measured against a reference more precise than its
    dtype (a longdouble evaluation, or ATen widened to float64 for a narrower dtype;
    not a float64 kernel against ATen's own float64 result)."""
    return getattr(result, "ulps", None) is not None and getattr(result, "reference", None) in ("longdouble", WIDENED)


def regressed_by_ulps(func, args, kwargs, actual, expected, base_ulps: float) -> str | None:
    """Why `actual` is a precision regression against a base whose error on these
    inputs was `base_ulps` (etops.conformance.outcome's rule: beyond PRECISION_FACTOR x
    the larger of the base's and ATen's error, and PRECISION_MIN_ULPS beyond it, in ulps
    of the output dtype against a more precise reference), None when it is not or
    cannot be measured (the reproducers of precision regressions call it)."""
    from .outcome import regressed

    class _Scratch:
        verdict = reason = ulps = aten_ulps = reference = reference_error = aten_reference_error = None

    scratch = _Scratch()
    measure(scratch, func, args, kwargs, actual, expected)
    if scratch.ulps is None:
        judge(scratch, func, args, kwargs, actual, expected, None)  # float64: against the longdouble reference
    if scratch.ulps is None or not more_precise(scratch) or not regressed(scratch.ulps, base_ulps, scratch.aten_ulps):
        return None
    return (f"{scratch.ulps:.3g} ulps from a more precise reference ({scratch.reference}); the base's "
            f"{base_ulps:.3g}, ATen's {scratch.aten_ulps or 0.0:.3g}")


def note(ulps: dict | None, result) -> dict | None:
    """The tally's effective precision (``{"worst": ulps, "aten": ulps, "cases": n,
    "longdouble": n}``) with `result`'s measure added."""
    et = getattr(result, "ulps", None)
    if et is None:
        return ulps
    ulps = dict(ulps or {"worst": 0.0, "aten": 0.0, "cases": 0, "longdouble": 0})
    ulps["worst"] = max(ulps["worst"], et)
    ulps["aten"] = max(ulps["aten"], getattr(result, "aten_ulps", None) or 0.0)
    ulps["cases"] += 1
    ulps["longdouble"] += getattr(result, "reference", None) == "longdouble"
    return ulps


def merged(mine: dict | None, theirs: dict | None) -> dict | None:
    """Two tallies' effective precision as one."""
    if not theirs:
        return mine
    if not mine:
        return dict(theirs)
    return {"worst": max(mine["worst"], theirs["worst"]), "aten": max(mine["aten"], theirs["aten"]),
            "cases": mine["cases"] + theirs["cases"], "longdouble": mine["longdouble"] + theirs["longdouble"]}


def wrong_by_ulps(func, args, kwargs, actual, expected) -> str | None:
    """Why `actual` (a float64 kernel's result) is wrong against the more precise
    reference, as the sweep judges a case that passes OpInfo's tolerance; None
    otherwise (the reproducers of float64 findings call it)."""
    class _Scratch:
        verdict = reason = ulps = aten_ulps = reference = reference_error = aten_reference_error = None
    return judge(_Scratch(), func, args, kwargs, actual, expected, None)
