"""The named parts of an operator's policy (etops.ops.rules puts them together).

Each part answers one question about an operator, and only that one:

- ``Sizing``: what sizes its outs beyond torch's fake kernel (an upper bound, or
  ATen's functional on the real inputs);
- ``Direct``: what etops' direct calls do for the user that a program's call does
  not: guards refusing inputs the kernel aborts on (naming the argument),
  normalizers, ``no_work``, ``contiguous_only``;
- ``Safety``: what no call may do, whatever its policy: guards against inputs on
  which the kernel corrupts memory or dies by a signal, and workarounds of the same
  kind (direct calls work around; a program's call is refused instead);
- ``Footprint``: which tensor arguments' values decide how big its outs are or
  where it reads and writes, and what keeps every call within its memory (checks
  of those values before every call, or why none is needed);
- ``Judging``: how its results are judged: comparison kind, tolerance, the layouts
  it is known silently wrong on, the known findings with reproducers, and the input
  constraints of the conformance sweep's generated samples.

Plus the record types those parts hold (Finding, LayoutFinding, InputConstraints).
Imports torch, the standard library and etops.compare only.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ..compare import KINDS
from ..errors import refusing

#: a guard: guard(bound arguments, KernelInfo) raises naming the argument, or returns
Guard = Callable[[dict, object], None]


@dataclasses.dataclass(frozen=True)
class Finding:
    """A known ExecuTorch failure a rule guards against, turned into an exception
    naming `argument` (or, `computes`, one the normalizers turn into a call that
    computes torch's result): a summary fit for an upstream report, a reproducer (a
    fuzz case, pure data: etops.fuzz's worker builds it) and the failure it replaces.
    `memory`: the kernel corrupts memory or dies by a signal on it (not an
    ExecuTorch abort, which etops unwinds into KernelAborted)."""

    op: str
    summary: str
    argument: str
    case: dict
    abort: str
    computes: bool = False
    memory: bool = False


#: the layouts the rules table records kernels as silently wrong on: channels-last
#: (rank 4/5, as programs give them: direct calls pass them as they are) and
#: permuted (any other non-contiguous dim order: etops copies those to contiguous
#: unless etops.layout("preserve"))
WRONG_LAYOUTS = ("channels-last", "permuted")


@dataclasses.dataclass(frozen=True)
class LayoutFinding:
    """A kernel computing wrong values, with no error, on inputs in `layout` (one
    of WRONG_LAYOUTS), as etops' dim-order axis (``etops check --dim-order-axis``,
    ``make conformance-dim-orders``) found it: `found` says how (fit for a warning)."""

    layout: str
    found: str

    def __post_init__(self):
        if self.layout not in WRONG_LAYOUTS:
            raise refusing(ValueError, "layout", f"LayoutFinding: argument 'layout' is {self.layout!r}; one of {WRONG_LAYOUTS}")


@dataclasses.dataclass(frozen=True)
class InputConstraints:
    """How the conformance sweep makes the inputs of an operator no OpInfo sample
    reaches (etops.conformance.references.aten reads it): `opinfo` names an OpInfo
    whose samples are converted (``bitwise_and.Scalar_out`` takes the samples of
    ``bitwise_and`` with the tensor ``other`` turned into a Python number), or None
    (inputs generated from the schema within `ranks`). `scalar` is the argument made
    a number, kept within `scalar_range` (shift amounts below the bit width) and
    `nonzero` (divisors); `positive` the tensors whose values must be > 0
    (variances); `invalid` the (argument, what is wrong) pairs of the invalid
    samples a generator makes."""

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
            raise refusing(ValueError, "scalar_range", "InputConstraints: argument 'scalar_range' must be (low, high) with low <= high")


@dataclasses.dataclass(frozen=True)
class Sizing:
    """What sizes the outs. `upper_bound(bound) -> {out: (shape, dtype)}`: the
    data-dependent outs' upper bounds (the kernel shrinks them). `sized_from_data`:
    the out shapes depend on the input values and have no upper bound, so once
    torch's fake kernel reports that (a data-dependent-shape exception) ATen's
    functional runs on the real inputs to size them; no other operator ever runs
    ATen to size its outs."""

    upper_bound: Callable | None = None
    sized_from_data: bool = False


@dataclasses.dataclass(frozen=True)
class _Calls:
    """Guards and workarounds a call gets before the kernel runs. `guards`: each
    raises naming the argument (TypeError / ValueError / IndexError /
    ZeroDivisionError; the policy turns it into a GuardRefusal). `normalize`:
    normalizers (etops.ops.normalizers) rewriting arguments torch accepts into the
    equivalent form the kernel handles, before the guards. `no_work(bound) -> bool`:
    the call has nothing to compute (an empty input the kernel mishandles): its outs
    are sized as torch sizes them, the kernel is not called. `contiguous_only`: the
    kernel mishandles every dim order but the contiguous one (channels-last
    included): every tensor reaches it as a contiguous copy, even under
    etops.layout("preserve")."""

    guards: tuple = ()
    normalize: tuple = ()
    no_work: Callable | None = None
    contiguous_only: bool = False

    @property
    def works_around(self) -> bool:
        """Whether the part rewrites, skips or copies anything (not only refuses)."""
        return bool(self.normalize or self.no_work is not None or self.contiguous_only)

    @property
    def empty(self) -> bool:
        return not (self.guards or self.works_around)


@dataclasses.dataclass(frozen=True)
class Direct(_Calls):
    """What etops' direct calls do for the user, for inputs the kernel aborts on or
    mishandles without corrupting memory: the kernel as a program calls it
    (etops.ops.PROGRAM, the judge's) gets none of it."""


@dataclasses.dataclass(frozen=True)
class Safety(_Calls):
    """What no call may do, whatever its policy: `guards` refuse inputs on which the
    kernel corrupts memory or dies by a signal (an ExecuTorch abort etops unwinds;
    these it cannot), for direct calls and for the judge alike; a direct call gets
    the workarounds (`normalize`, `no_work`, `contiguous_only`), and a call as a
    program makes it is refused where they would apply (the kernel is not called,
    and a workaround's result would read as the kernel's pass)."""



@dataclasses.dataclass(frozen=True)
class Footprint:
    """The kernel's footprint (the size of its outs, the positions it reads and
    writes) depends on the values of tensor `arguments` (indices, repeats, a mask's
    count), so a signature's first call (probed between guard pages) says nothing of
    the next. `checks` (etops.ops.footprints) refuse the values torch refuses, before
    every call of every policy (the call memo included), raising ValueError naming
    the argument as torch's other checks do; `bounded` says what keeps any other
    value within the memory (an out the kernel resizes only within its capacity, the
    kernel's own bounds checks, a safety guard). A part naming arguments has checks,
    `bounded`, or both."""

    arguments: tuple = ()
    checks: tuple = ()
    bounded: str | None = None

    def __post_init__(self):
        if isinstance(self.arguments, str):
            raise refusing(TypeError, "arguments", "Footprint: argument 'arguments' must be a tuple of argument names")
        if self.arguments and not (self.checks or self.bounded):
            raise refusing(ValueError, "checks", "Footprint: argument 'checks' or 'bounded' must say what keeps the calls of "
                             f"{self.arguments} within their memory")
        if (self.checks or self.bounded) and not self.arguments:
            raise refusing(ValueError, "arguments", "Footprint: argument 'arguments' must name the tensors the footprint depends on")

    @property
    def data_dependent(self) -> bool:
        """Whether the footprint depends on tensor values at all."""
        return bool(self.arguments)


@dataclasses.dataclass(frozen=True)
class Judging:
    """How the operator's results are judged: `compare` (an etops.compare kind; None:
    values), `tolerance` ((rtol, atol) every comparison of its results uses, or
    None), `wrong_layouts` (LayoutFindings: the layouts it is known silently wrong
    on; a direct call passing such a tensor as it is warns once per kernel and
    layout, explain says it), `findings` (the known ExecuTorch findings, with
    reproducers) and `inputs` (InputConstraints of the conformance sweep's samples
    when no OpInfo reaches it)."""

    compare: str | None = None
    tolerance: tuple | None = None
    wrong_layouts: tuple = ()
    findings: tuple = ()
    inputs: InputConstraints | None = None

    def __post_init__(self):
        if self.compare is not None and self.compare not in KINDS:
            raise refusing(ValueError, "compare", f"Judging: argument 'compare' is {self.compare!r}; one of {KINDS}")
        if self.tolerance is not None and not (
            isinstance(self.tolerance, tuple) and len(self.tolerance) == 2
            and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in self.tolerance)
        ):
            raise refusing(ValueError, "tolerance", f"Judging: argument 'tolerance' must be (rtol, atol), two numbers >= 0, got {self.tolerance!r}")

    def tolerance_of(self, policy):
        """`policy` (an etops.compare Tolerance) with this operator's (rtol, atol)
        override, or `policy` itself when the operator has none or the policy is
        already overridden (a user's explicit rtol/atol wins). The one place an
        operator's tolerance is applied."""
        if self.tolerance is None or policy.overridden:
            return policy
        return policy.override(*self.tolerance)

    def wrong_on(self, layout: str):
        """The LayoutFinding of `layout` (a WRONG_LAYOUTS name), or None."""
        return next((f for f in self.wrong_layouts if f.layout == layout), None)
