"""How far a result is from its reference: one comparison for every caller.

``diff(actual, expected, tolerance, kind)`` walks two results (tensors, Python
scalars, None, or nests of them), checks that they have the same structure,
shapes and dtypes, and counts the elements beyond a tolerance. It returns a
``Diff``: the largest absolute and relative errors, how many elements are beyond
tolerance out of how many, the signal-to-noise ratio, and the first structural
difference (count, type, shape, dtype) as a ``Structural``, which each caller
words its own way.

A ``Tolerance`` is a named policy: per-dtype (rtol, atol), how Python scalars
compare, whether integers are always exact, whether atol scales with the
reference's magnitude, and whether values are compared in float64 (complex as
(real, imaginary) pairs) or in their own dtype as ``torch.isclose`` does.
``POLICIES`` names them: ``torch`` (torch.testing's defaults; edge.compare),
``opinfo`` (the same defaults in the tensors' own dtype, as assert_close; the
conformance sweep overrides them per op with OpInfo's), ``fuzz`` (the fuzzer's)
and ``bench`` (the benchmarks' loose check of sums over thousands of terms).

Comparison kinds (``kind=``): ``VALUES`` compares values; ``METADATA`` only shape
and dtype (random or uninitialized outputs); ``TIES`` compares integer outputs by
metadata only (indices of ties: any index of equal values is right) and floating
outputs by value.

Imports torch and the standard library only (no etops extension).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

__all__ = [
    "BENCH",
    "FUZZ",
    "KINDS",
    "METADATA",
    "OPINFO",
    "POLICIES",
    "TIES",
    "TORCH",
    "VALUES",
    "Diff",
    "Structural",
    "Tolerance",
    "equal_values",
    "diff",
    "policy",
    "snr",
    "torch_testing_message",
]

#: compare values (the default)
VALUES = "values"
#: compare shape and dtype only: random or uninitialized outputs
METADATA = "metadata"
#: integer outputs by shape and dtype only (indices of ties), floating ones by value
TIES = "ties"
KINDS = (VALUES, METADATA, TIES)


# ---- tolerance policies ----------------------------------------------------------------

try:  # torch.testing's own table (a private name; the same values are listed below)
    from torch.testing._comparison import default_tolerances as _torch_default_tolerances
except ImportError:  # pragma: no cover
    _torch_default_tolerances = None  # type: ignore[assignment]

#: dtype -> (rtol, atol) torch.testing.assert_close uses by default
_TORCH_TESTING = {
    torch.float16: (0.001, 1e-5),
    torch.bfloat16: (0.016, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (0.001, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


def _torch_testing_pair(dtype: torch.dtype) -> tuple[float, float]:
    if _torch_default_tolerances is not None:
        try:
            rtol, atol = _torch_default_tolerances(dtype)
            return float(rtol), float(atol)
        except Exception:  # noqa: BLE001 - fall back on the copy
            pass
    return _TORCH_TESTING.get(dtype, (0.0, 0.0))


@dataclass(frozen=True)
class Tolerance:
    """A named comparison policy. ``table``: dtype -> (rtol, atol) (dtypes not listed:
    ``default``; a callable dtype -> (rtol, atol) is accepted too); ``rtol``/``atol``
    when set override the table for every dtype and for float scalars."""

    name: str
    table: Any = dataclasses.field(default_factory=dict, repr=False)
    default: tuple = (0.0, 0.0)
    #: (rtol, atol) for Python floats (ints and bools are exact)
    scalar: tuple = (0.0, 0.0)
    #: a Python int where a float is expected (or the reverse) is a type difference
    strict_scalar_types: bool = False
    #: integer and bool tensors compare exactly whatever the table says
    integers_exact: bool = False
    #: atol is multiplied by max(1, max |expected|) for floating tensors
    scaled: bool = False
    #: compare in float64, complex as (real, imaginary) pairs; False: in the tensors'
    #: own dtype, complex by magnitude (torch.isclose on the tensors as they are)
    wide: bool = True
    rtol: float | None = None
    atol: float | None = None

    def pair(self, dtype: torch.dtype) -> tuple[float, float]:
        """(rtol, atol) for tensors of ``dtype``."""
        if callable(self.table):
            rtol, atol = self.table(dtype)
        else:
            rtol, atol = self.table.get(dtype, self.default)
        if self.integers_exact and not (dtype.is_floating_point or dtype.is_complex):
            rtol, atol = 0.0, 0.0
        return (float(rtol) if self.rtol is None else self.rtol, float(atol) if self.atol is None else self.atol)

    def scalar_pair(self) -> tuple[float, float]:
        """(rtol, atol) for Python floats."""
        rtol, atol = self.scalar
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)

    def override(self, rtol: float | None = None, atol: float | None = None) -> "Tolerance":
        """This policy with ``rtol``/``atol`` fixed (None keeps the policy's)."""
        if rtol is None and atol is None:
            return self
        return dataclasses.replace(
            self,
            rtol=self.rtol if rtol is None else rtol,
            atol=self.atol if atol is None else atol,
        )

    @property
    def overridden(self) -> bool:
        return self.rtol is not None or self.atol is not None


def _bench_pair(dtype: torch.dtype) -> tuple[float, float]:
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-3)
    return tol, tol


#: torch.testing.assert_close's defaults per dtype, in float64 (edge.compare)
TORCH = Tolerance("torch", _torch_testing_pair)
#: torch.testing's defaults in the tensors' own dtype, as assert_close decides (the
#: conformance sweep; OpInfo's per-op overrides via ``OPINFO.override(rtol, atol)``)
OPINFO = Tolerance("opinfo", _torch_testing_pair, scalar=(1e-7, 1e-7), strict_scalar_types=True, wide=False)
#: the fuzzer's: loose for 16-bit floats, exact integers, near-exact Python floats
FUZZ = Tolerance(
    "fuzz",
    {torch.float16: (2e-2, 2e-2), torch.bfloat16: (2e-2, 2e-2), torch.float32: (1e-4, 1e-4), torch.complex64: (1e-4, 1e-4)},
    default=(1e-7, 1e-7),
    scalar=(1e-9, 1e-12),
    strict_scalar_types=True,
    integers_exact=True,
)
#: the benchmarks' loose check (sums over thousands of terms round differently):
#: atol scaled by the reference's magnitude, exact integers
BENCH = Tolerance("bench", _bench_pair, integers_exact=True, scaled=True, wide=False)

POLICIES = {p.name: p for p in (TORCH, OPINFO, FUZZ, BENCH)}


def policy(tolerance: "Tolerance | str") -> Tolerance:
    """The Tolerance itself, or the policy of that name (ValueError naming the known ones)."""
    if isinstance(tolerance, Tolerance):
        return tolerance
    if isinstance(tolerance, str) and tolerance in POLICIES:
        return POLICIES[tolerance]
    raise ValueError(f"tolerance must be a Tolerance or one of {', '.join(sorted(POLICIES))}, not {tolerance!r}")


# ---- the result of a comparison --------------------------------------------------------


@dataclass(frozen=True)
class Structural:
    """The first structural difference: ``what`` is "count" (number of values),
    "type", "shape" or "dtype"; ``actual``/``expected`` the two sides' (counts, type
    names, shapes as lists, dtypes); ``leaf`` the position of the value in the
    flattened result (None for a count)."""

    what: str
    actual: object
    expected: object
    leaf: int | None = None

    def __str__(self) -> str:
        if self.what == "count":
            return f"{self.actual} values vs {self.expected} expected"
        if self.what == "type":
            return f"{self.actual} vs {self.expected}"
        return f"{self.what} {self.actual} vs {self.expected}"


@dataclass
class Diff:
    """How far a result is from its reference."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatched: int = 0  #: elements beyond tolerance
    numel: int = 0  #: elements compared
    snr: float = math.inf  #: dB; inf when equal
    structural: Structural | None = None  #: shape / dtype / type / count difference

    @property
    def problem(self) -> str | None:
        """The structural difference in words, None when there is none."""
        return None if self.structural is None else str(self.structural)

    @property
    def ok(self) -> bool:
        return self.structural is None and self.mismatched == 0

    def merge(self, other: "Diff") -> "Diff":
        """Both diffs as one: worst errors and SNR, summed counts, the first structural difference."""
        return Diff(
            max(self.max_abs, other.max_abs),
            max(self.max_rel, other.max_rel),
            self.mismatched + other.mismatched,
            self.numel + other.numel,
            min(self.snr, other.snr),
            self.structural or other.structural,
        )

    def describe(self) -> str:
        """One line: the structural difference, else the counts and errors."""
        if self.structural is not None:
            return str(self.structural)
        if self.mismatched == 0:
            return f"equal within tolerance ({self.numel} elements, max abs error {self.max_abs:.3g})"
        return (
            f"{self.mismatched} of {self.numel} elements beyond tolerance "
            f"(max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}, SNR {self.snr:.3g} dB)"
        )


# ---- comparing -------------------------------------------------------------------------


def diff(actual, expected, tolerance: "Tolerance | str" = TORCH, kind: str = VALUES) -> Diff:
    """How far ``actual`` is from ``expected`` (tensors, scalars, None or nests of
    them) under ``tolerance`` (a Tolerance or a policy's name) and ``kind``
    (VALUES, METADATA or TIES). NaN where the reference has NaN and equal
    infinities agree; a NaN or an infinity anywhere else is an infinite error."""
    tol = policy(tolerance)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    a_leaves, e_leaves = _leaves(actual), _leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return Diff(structural=Structural("count", len(a_leaves), len(e_leaves)))
    total = Diff()
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        d = _diff_leaf(a, e, tol, kind)
        if d.structural is not None:
            d.structural = dataclasses.replace(d.structural, leaf=i)
        total = total.merge(d)
    return total


_SCALARS = (bool, int, float, complex)


def _leaves(value) -> list:
    """pytree's leaves of `value` (a tensor is its own: no tree to walk)."""
    return [value] if isinstance(value, torch.Tensor) else pytree.tree_flatten(value)[0]


def _diff_leaf(a, e, tol: Tolerance, kind: str) -> Diff:
    if isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
            if kind != VALUES and not isinstance(e, torch.Tensor):
                return Diff()
            return Diff(structural=Structural("type", type(a).__name__, type(e).__name__))
        if a.shape != e.shape:
            return Diff(numel=e.numel(), structural=Structural("shape", list(a.shape), list(e.shape)))
        if a.dtype != e.dtype:
            return Diff(numel=e.numel(), structural=Structural("dtype", a.dtype, e.dtype))
        if kind == METADATA or (kind == TIES and not (e.dtype.is_floating_point or e.dtype.is_complex)):
            return Diff(numel=e.numel())
        if e.numel() == 0:
            return Diff()
        return _diff_tensors(a, e, tol)
    if kind != VALUES:
        return Diff()
    if isinstance(e, _SCALARS) and isinstance(a, _SCALARS):
        if tol.strict_scalar_types and type(a) is not type(e):
            return Diff(numel=1, structural=Structural("type", type(a).__name__, type(e).__name__))
        return _diff_scalars(a, e, tol)
    if a is None and e is None:
        return Diff()
    return Diff(mismatched=int(a != e), numel=1)


def _diff_scalars(a, e, tol: Tolerance) -> Diff:
    if isinstance(a, complex) or isinstance(e, complex) or isinstance(a, float) or isinstance(e, float):
        rtol, atol = tol.scalar_pair()
    else:
        rtol, atol = 0.0, 0.0
    if a == e or (_is_nan(a) and _is_nan(e)):
        return Diff(numel=1)
    err = abs(a - e)
    close = math.isfinite(err) and err <= atol + rtol * abs(e)
    if math.isnan(err):
        err = math.inf
    rel = err / abs(e) if e else math.inf
    return Diff(max_abs=err, max_rel=rel, mismatched=int(not close), numel=1, snr=math.inf if close else -math.inf)


def _is_nan(value) -> bool:
    return isinstance(value, (float, complex)) and value != value


def _diff_tensors(a: torch.Tensor, e: torch.Tensor, tol: Tolerance) -> Diff:
    rtol, atol = tol.pair(e.dtype)
    floating = e.dtype.is_floating_point or e.dtype.is_complex
    if tol.scaled and e.dtype.is_floating_point:
        scale = float(e.detach().abs().max())
        atol *= max(1.0, scale if math.isfinite(scale) else 1.0)
    # values, not torch's lazy conjugate / negative bits (an elementwise op between a
    # conjugated non-contiguous view and a plain tensor can read the bit wrongly)
    a, e = a.detach().resolve_conj().resolve_neg(), e.detach().resolve_conj().resolve_neg()
    numel, pairs = e.numel(), tol.wide and e.is_complex()
    if equal_values(a, e):  # every element equal (no NaN): what the steps below give, in one pass
        return Diff(max_abs=0.0, max_rel=0.0, mismatched=0, numel=numel, snr=math.inf)
    if tol.wide and floating:
        if pairs:
            a, e = torch.view_as_real(a), torch.view_as_real(e)
        a, e = a.to(torch.float64), e.to(torch.float64)
    close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if pairs:  # an element is close when both its parts are
        close = close.all(-1)
    mismatched = int((~close).sum())
    # errors in float64 (complex128 for complex compared by magnitude)
    wide = torch.complex128 if a.is_complex() else torch.float64
    a64, e64 = a.to(wide), e.to(wide)
    same = (a64 == e64) | (torch.isnan(a64) & torch.isnan(e64))
    err = (a64 - e64).abs()
    err = torch.where(same, torch.zeros_like(err), torch.where(torch.isnan(err), torch.full_like(err, math.inf), err))
    magnitude = e64.abs()
    rel = torch.where(err == 0, torch.zeros_like(err), err / magnitude)
    if floating:
        ratio = snr(e64, a64)
    else:
        ratio = math.inf if mismatched == 0 else -math.inf
    return Diff(max_abs=float(err.max()), max_rel=float(rel.max()), mismatched=mismatched, numel=numel, snr=ratio)


def equal_values(a: torch.Tensor, e: torch.Tensor) -> bool:
    """Whether the two tensors (same shape and dtype) hold the same values, NaN
    nowhere (torch.equal on their values, lazy conjugate and negative bits
    resolved); False for dtypes torch.equal does not compare (complex32)."""
    try:
        return torch.equal(a.resolve_conj().resolve_neg(), e.resolve_conj().resolve_neg())
    except (NotImplementedError, RuntimeError):
        return False


def snr(expected: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal-to-noise ratio of ``actual`` against ``expected`` in dB:
    10·log10(mean(expected²) / mean((expected - actual)²)) (the formula of ExecuTorch
    devtools' SNRComparator); inf when equal or empty."""
    if expected.numel() == 0:
        return math.inf
    e, a = expected.detach(), actual.detach()
    if e.is_complex():
        e, a = torch.view_as_real(e.resolve_conj()), torch.view_as_real(a.resolve_conj())
    e, a = e.to(torch.float64), a.to(torch.float64)
    if torch.equal(e, a):
        return math.inf
    power = e.pow(2).mean()
    noise = (e - a).pow(2).mean()
    return float(10 * torch.log10(power / noise))


@contextlib.contextmanager
def _no_dtensor_import(actual, expected):
    """Around an assert_close of two plain tensors (of torch.Tensor itself, so neither
    is a DTensor): torch's DTensor check is left out while torch.distributed.tensor is
    not imported. Its first import (to ask whether either is a DTensor, which a plain
    tensor never is) costs about half of ``import torch``, in each process that words
    a mismatch (every task process of ``etops dev``). The message is the same; on a
    torch without that switch (``_HAS_DTENSOR``), nothing changes."""
    import sys

    from torch.testing import _comparison as comparison

    plain = type(actual) is torch.Tensor and type(expected) is torch.Tensor
    if not (plain and getattr(comparison, "_HAS_DTENSOR", False) is True and "torch.distributed.tensor" not in sys.modules):
        yield
        return
    comparison._HAS_DTENSOR = False
    try:
        yield
    finally:
        comparison._HAS_DTENSOR = True


def torch_testing_message(actual, expected, tolerance: "Tolerance | str" = OPINFO) -> str | None:
    """torch.testing.assert_close's own account, on one line, of why ``actual`` is
    not ``expected`` with the policy's overrides (its defaults when the policy sets
    none); None when assert_close accepts them. Values it cannot compare give
    ``cannot compare: <error>``."""
    tol = policy(tolerance)
    # None and None: assert_close's own defaults
    rtol, atol = (tol.rtol or 0.0, tol.atol or 0.0) if tol.overridden else (None, None)
    try:
        with _no_dtensor_import(actual, expected):
            torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False, check_device=False, rtol=rtol,
                                       atol=atol)
    except AssertionError as exc:
        return " ".join(str(exc).split())
    except Exception as exc:  # noqa: BLE001 - incomparable values
        return f"cannot compare: {type(exc).__name__}: {exc}"
    return None
