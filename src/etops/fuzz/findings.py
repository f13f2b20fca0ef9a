"""What the fuzzer found that is not an ExecuTorch abort. The aborts themselves
(each a guard, a summary and a reproducer) are findings in the rules table,
``etops.ops.findings()``; ``python -m etops.fuzz`` replays them all first: each
must now raise an exception naming its argument instead of killing the worker."""

from __future__ import annotations

#: (kernel, property) violations the fuzzer reported that need a fix outside the
#: fuzzer's reach (etops' Python slow path or C call path, or ExecuTorch): the
#: bounded fuzz of `make test` tolerates exactly these. See docs/reliability.md.
#: (None open: the slow path's - outs output_mask leaves out, masks that do not
#: broadcast, outs aliasing an input on resize, numpy outs of data-dependent ops -
#: are fixed, with regression tests in tests/reliability/test_findings.py.)
KNOWN_HARD: set = set()


def is_fixed(finding, outcome: dict) -> bool:
    """Whether a worker's `outcome` of replaying `finding` (an etops.ops Finding)
    shows it fixed: the call raised an exception naming the finding's argument (its
    ``argument`` attribute, etops.errors.refusing: never the message's words), or,
    for a finding that `computes` (its rule turns the call into one the kernel
    handles), returned without a violation."""
    if finding.computes:
        return outcome["status"] == "ok" and not outcome.get("violations")
    return outcome["status"] == "raised" and outcome.get("argument") == finding.argument
