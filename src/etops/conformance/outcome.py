"""One case's outcome as a structured value, and the one rule that says whether
an edit's case fails the way its base's does.

An ``Outcome`` is made once, where the case ran (``of_exception`` from what the
kernel's call raised, ``of_result`` from the comparison of what it returned),
and travels unchanged: pickled from worker and task processes, kept in the
reports and the JSON. Nothing here reads a message: the fields are the
exceptions' own (etops.errors: a crash's signal, argument, access and place; an
abort's or a refusal's ExecuTorch error and site; a guard's rule) and the
comparison's numbers (the kernel's and ATen's error in ulps of the output dtype
against a higher-precision reference; a digest of the kernel's result; which
output differed), or how the process running the case ended (``of_death``).
Records made without one (a report read back from JSON of an older etops) get
their status and verdict alone (``outcome_of``).

``change(edit, base)`` decides, case by case, what an edit did to one case:
nothing, a new failure, the base's failure kept, a precision regression, a fix.
"The same as the base" means the same case failing the same way (``same_failure``),
never a message that reads alike.

May import: the standard library, etops.errors and etops.process_end.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..errors import GuardRefusal, GuardTimeout, KernelCrashed, KernelError
from ..process_end import signal_name

#: an edit's error (ulps of the output dtype, against the higher-precision reference)
#: is a precision regression when it is more than PRECISION_FACTOR times the larger of
#: the base's and ATen's, and at least PRECISION_MIN_ULPS beyond it
PRECISION_FACTOR = 4.0
PRECISION_MIN_ULPS = 1.0

#: what change() says of one case
UNCHANGED = "unchanged"  #: both pass, or the edit passes as the base does
NEW = "new"  #: the edit fails where the base passes (or there is no base case)
OTHER = "fails otherwise"  #: both fail, not the same way (another kind, site, or a worse value)
SHARED = "also in base"  #: both fail the same way
REGRESSION = "precision regression"  #: the edit's error beyond the base's and ATen's (PRECISION_FACTOR)
FIXED = "fixed"  #: the base fails, the edit passes
#: a numerics difference (within ATen's error, a precision loss) the base does not
#: show, whose error did not regress: the edit's, listed, never gating
NUMERICS = "numerics difference"
CHANGES = (UNCHANGED, NEW, OTHER, SHARED, REGRESSION, FIXED, NUMERICS)
#: the changes that make a case the edit's own
NEW_FAILURES = (NEW, OTHER, REGRESSION)


@dataclass(frozen=True)
class Outcome:
    """What happened to one case (a value: equal fields, equal outcomes).

    ``status``: the case's status (etops.conformance.case.STATUSES); ``verdict``: a
    mismatch's verdict (values.VERDICTS); ``what``: a mismatch's kind of difference
    ("values", "non-finite", "shape", "dtype", "count", "type"); ``ulps`` and
    ``aten_ulps``: the kernel's and ATen's worst error in ulps of the output dtype
    against a more precise reference (None: not measured: not floating, or no such
    reference); ``abs_error``: the kernel's max abs error against ATen (a mismatch);
    ``digest``: a checksum of the kernel's result (None: no result);
    ``signal``/``argument``/``access``/``where``: a crash's (KernelCrashed's);
    ``error``: ExecuTorch's error name of a refusal or an abort, or the exception
    type of an ``error``; ``site``: ``file:line`` of the failed check; ``origin``:
    ``file:line`` of the check that failed first when an outer check at ``site``
    reported it (None: the same check, or none logged); ``rule``: the
    guard that refused; ``seconds``: a hang's limit; ``output``: a mismatch's first
    differing output, of several (None: one output, or the outputs' count differs);
    ``reason``: why a wrong result is wrong (etops.conformance.effective); ``ended``:
    how the process running the case ended when it died in the kernel's call
    (ENDINGS; ``signal`` then the signal that ended it, ``error`` an exit status)."""

    status: str
    verdict: str | None = None
    what: str | None = None
    ulps: float | None = None
    aten_ulps: float | None = None
    abs_error: float | None = None
    digest: int | None = None
    signal: str | None = None
    argument: str | None = None
    access: str | None = None
    where: str | None = None
    error: str | None = None
    site: str | None = None
    origin: str | None = None
    rule: str | None = None
    seconds: float | None = None
    output: int | None = None
    reason: str | None = None
    ended: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "pass"

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, d: dict) -> "Outcome":
        return cls(**d)


#: how the process running a case ended (Outcome.ended): a signal killed it or its fault
#: reporter ended it with 128 + the signal (``signal`` names it); it exited with a status
#: (``error`` holds it); it went silent and was killed; it died, then passed the same calls
#: made one by one guarded (an earlier call corrupted it)
KILLED, EXITED, HUNG, CORRUPTED = "killed", "exited", "hung", "corrupted earlier"
ENDINGS = (KILLED, EXITED, HUNG, CORRUPTED)


def of_death(code: int | None, hung: bool = False, status: str = "crash", limit: float | None = None) -> Outcome:
    """The outcome of a case whose process died during its kernel's call, from the
    exit code as subprocess and multiprocessing give it (negative: the signal; above
    128: a fault reporter's 128 + the signal; etops.process_end.exit_code makes it
    from a wait status), or that was killed after going silent (`hung`; `limit`: after
    how many seconds, when known)."""
    if hung:
        return Outcome(status, seconds=limit, ended=HUNG)
    if code is not None and code < 0:
        return Outcome(status, signal=signal_name(-code), ended=KILLED)
    if code is not None and code > 128 and _is_signal(code - 128):
        return Outcome(status, signal=signal_name(code - 128), ended=KILLED)
    return Outcome(status, error=f"exit status {code}", ended=EXITED)


def death_in_words(outcome: Outcome) -> str:
    """How the process of a case that died ended (of_death's outcome), for people:
    "killed by SIGSEGV", "exited with exit status 3", "hung (killed after 30 s)"; a
    corruption by an earlier call says how its process then ended."""
    if outcome.signal is not None and outcome.signal != "canary":
        return f"killed by {outcome.signal}"
    if outcome.error is not None and outcome.ended in (EXITED, CORRUPTED):
        return f"exited with {outcome.error}"
    if outcome.ended == HUNG or (outcome.ended == CORRUPTED and outcome.seconds is not None):
        return "hung" + (f" (killed after {outcome.seconds:.0f} s)" if outcome.seconds is not None else "")
    return outcome.ended or "ended"


def _is_signal(number: int) -> bool:
    import signal

    return number in signal.Signals._value2member_map_


def outcome_of(case) -> Outcome:
    """A case's Outcome; for a record made without one (a report of an older etops read
    back), its status and verdict alone."""
    outcome = getattr(case, "outcome", None)
    return outcome if outcome is not None else Outcome(case.status, getattr(case, "verdict", None))


def of_exception(exc: BaseException, status: str, rule: str | None = None) -> Outcome:
    """The outcome of a call that raised `exc`, given the status the runner files it
    under (crash, abort, unsupported, guarded, error, hang) and, for a guard, its rule."""
    if isinstance(exc, KernelCrashed):
        return Outcome(status, signal=exc.signal or "canary", argument=exc.argument, access=exc.access,
                       where=exc.where)
    if isinstance(exc, KernelError):  # KernelAborted too
        return Outcome(status, error=exc.error_name, site=exc.site or None, origin=exc.origin or None)
    if isinstance(exc, GuardTimeout):
        return Outcome(status, error=type(exc).__name__, seconds=exc.seconds)
    if isinstance(exc, GuardRefusal):
        return Outcome(status, rule=rule, argument=exc.argument, error=type(exc).__name__)
    return Outcome(status, rule=rule, error=type(exc).__name__, site=_raised_at(exc))


def _raised_at(exc: BaseException) -> str | None:
    """``file:line`` (the file's name) of the frame that raised `exc`, or None."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"


def _worse_value(edit: Outcome, base: Outcome) -> bool:
    """Whether a mismatch of the edit differs from the base's on the same case in
    kind (what differs), or in precision by the rule of ``regressed`` (both
    measured); two wrong values of one kind are the same failure otherwise (the
    case was wrong before the edit)."""
    if edit.digest is not None and edit.digest == base.digest:
        return False  # the very same result
    if edit.what != base.what:
        return True
    if edit.ulps is not None and base.ulps is not None:
        return regressed(edit.ulps, base.ulps, edit.aten_ulps)
    return False


def regressed(edit_ulps: float, base_ulps: float | None, aten_ulps: float | None) -> bool:
    """The precision rule: the edit's error beyond PRECISION_FACTOR x the larger of the
    base's and ATen's, and at least PRECISION_MIN_ULPS beyond it."""
    bound = max(base_ulps or 0.0, aten_ulps or 0.0)
    if math.isnan(edit_ulps):
        return True
    return edit_ulps > PRECISION_FACTOR * bound and edit_ulps - bound >= PRECISION_MIN_ULPS


def precision_regressed(edit: Outcome, base: Outcome) -> bool:
    """Whether the edit's error on a case is a precision regression against the base's
    (both measured in ulps against the same reference); False when either is unmeasured."""
    if edit.ulps is None or base.ulps is None:
        return False
    if edit.digest is not None and edit.digest == base.digest:
        return False
    return regressed(edit.ulps, base.ulps, edit.aten_ulps)


def _site_file(site: str | None) -> str | None:
    """The file of a ``file:line`` site (an edit that adds or removes lines above a
    check moves its line, not the check)."""
    return site.rsplit(":", 1)[0] if site else site


def same_failure(edit: Outcome, base: Outcome) -> bool:
    """Whether two failing outcomes of one case are the same failure: the same status
    and the same structured facts (a crash's signal, argument, access and place; an
    abort's or refusal's error and the file of its site; a guard's rule; a mismatch's
    kind, its error not regressed)."""
    if edit.status != base.status:
        return False
    if edit.status == "crash":
        return (edit.signal, edit.argument, edit.access, edit.where) == (base.signal, base.argument, base.access, base.where)
    if edit.status in ("abort", "unsupported"):  # the site's file: an edit moves the lines of the checks it keeps
        return (edit.error, _site_file(edit.site)) == (base.error, _site_file(base.site))
    if edit.status == "guarded":
        return edit.rule == base.rule
    if edit.status == "error":
        return edit.error == base.error
    if edit.status == "mismatch":
        return not _worse_value(edit, base)
    return True  # hang: a hang


def change(edit: Outcome, base: Outcome | None) -> str:
    """What the edit did to one case (CHANGES), from its outcome and the base's on the
    same case (None: the base did not run it)."""
    if base is None:
        return NEW if edit.failed else UNCHANGED
    if not edit.failed:
        if base.failed:
            return FIXED
        return REGRESSION if precision_regressed(edit, base) else UNCHANGED
    if not base.failed:
        if edit.status == "mismatch" and edit.verdict != "wrong" and edit.ulps is not None and base.ulps is not None:
            # a numerics verdict: the edit's own only when its error regressed
            return REGRESSION if precision_regressed(edit, base) else NUMERICS
        return NEW
    if same_failure(edit, base):
        return SHARED
    if edit.status == base.status == "mismatch" and precision_regressed(edit, base) and edit.what == base.what:
        return REGRESSION
    return OTHER


__all__ = ["CHANGES", "CORRUPTED", "ENDINGS", "EXITED", "FIXED", "HUNG", "KILLED", "NEW", "NEW_FAILURES", "OTHER", "Outcome", "PRECISION_FACTOR", "PRECISION_MIN_ULPS",
           "NUMERICS", "REGRESSION", "SHARED", "UNCHANGED", "change", "death_in_words", "of_death", "of_exception", "outcome_of", "precision_regressed", "regressed",
           "same_failure"]
