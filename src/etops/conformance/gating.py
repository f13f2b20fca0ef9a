"""The kind of a failing case and whether a finding of that kind fails a run: the
one classifier (``classify``) and the one gating rule (``gates``) that clusters,
``etops check``, ``etops dev``, the fuzzer and the reports call. Both read
structured values only (an Outcome's fields; a finding's kind, whether the base
shares it, what it was judged against), never a message.

May import: etops.conformance.outcome and etops.conformance.values.
"""

from __future__ import annotations

from .outcome import Outcome
from .values import VERDICTS, WRONG

#: the kinds of finding (case statuses), worst first
KINDS = ("crash", "hang", "abort", "guarded", "mismatch", "unsupported", "error")
#: what reports count and list findings by, worst first: the kinds with mismatches
#: split by verdict (wrong results apart from precision losses)
CATEGORIES = ("crash", "hang", "abort", "guarded", "wrong", "precision regression", "precision loss",
              "within ATen's error", "unsupported", "error")
#: etops dev's kind of a crash placed in a tensor argument's memory (or caught by etops' canaries)
MEMORY = "memory"

#: what a case was judged against (classify's `comparison`): ATen alone (etops check,
#: a more precise reference where there is one), or ATen and a base (etops dev)
AGAINST_ATEN = "ATen"
AGAINST_BASE = "base"
COMPARISONS = (AGAINST_ATEN, AGAINST_BASE)

#: the kinds that fail etops check (exit 1); --strict: every kind but "unsupported"
CHECK_GATING = ("crash", "hang", "abort", "error", "wrong")
#: the kinds that fail etops dev (exit 1) when the base does not share them; "unsupported"
#: only when there is a base (a refusal where the base passed)
DEV_GATING = (MEMORY, "crash", "hang", "abort", "wrong", "precision regression", "error", "guarded")


def is_memory(outcome: Outcome) -> bool:
    """Whether a crash is placed in a tensor argument's memory (its argument and
    place known) or was caught by etops' canaries."""
    return outcome.status == "crash" and (
        (outcome.argument is not None and outcome.where is not None) or outcome.signal == "canary")


def classify(outcome: Outcome, comparison: str = AGAINST_ATEN) -> str:
    """The kind of one case's outcome (a CATEGORIES entry, or MEMORY): its status, a
    mismatch's verdict in its place (a mismatch without one is wrong); judged
    against a base (`comparison` AGAINST_BASE), a crash placed in an argument's
    memory is MEMORY. A passing outcome is "pass"."""
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, not {comparison!r}")
    if outcome.status == "mismatch":
        return outcome.verdict if outcome.verdict in VERDICTS else WRONG
    if comparison == AGAINST_BASE and is_memory(outcome):
        return MEMORY
    return outcome.status


def gates(kind: str, base: str | None, *, shared: bool = False, strict: bool = False) -> bool:
    """Whether a finding of `kind` (classify's) fails the run (exit 1). `base`: what
    it was judged against: None for etops check (ATen alone; `strict`: every kind but
    "unsupported" fails), else etops dev's base kind ("git", "built-in"; "" for an
    operator no base has), where a finding the base shares (`shared`) never fails."""
    if base is None:
        return kind != "unsupported" and kind != "pass" if strict else kind in CHECK_GATING
    if shared:
        return False
    if kind == "unsupported":
        return bool(base)
    return kind in DEV_GATING


__all__ = ["AGAINST_ATEN", "AGAINST_BASE", "CATEGORIES", "CHECK_GATING", "COMPARISONS", "DEV_GATING", "KINDS", "MEMORY",
           "classify", "gates", "is_memory"]
