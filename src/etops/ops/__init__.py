"""etops.ops: the per-operator rules table, one record per operator in one place.

Owns what etops knows about individual operators: pre-call guards against the
inputs ExecuTorch's kernels abort on (guards.py, constructors written once), out
upper bounds of data-dependent ops, how results compare (etops.compare's kinds)
and the known ExecuTorch findings with reproducers. The entries live in one
module per family (aten.py, prim.py, quantized.py, llm.py); rules.py has the record types;
inputs.py is the sibling table of input constraints for the operators no OpInfo
sample reaches (how the conformance sweep makes their inputs).
Core package: imports torch, the standard library and core modules only (errors,
compare, out_shapes), never an extension.

``rules_for(name)`` is the merged record of an operator; ``ALL_RULES`` the
entries; ``findings()`` every finding. docs/rules.md says how to add a rule.
"""

from __future__ import annotations

import functools

from . import aten, llm, prim, quantized
from .rules import Finding, OpRules, Rule, merge

#: every entry of the table, in the order their guards compose
ALL_RULES: tuple = tuple(aten.RULES + prim.RULES + quantized.RULES + llm.RULES)


@functools.lru_cache(maxsize=None)
def rules_for(name: str, program: bool = False) -> OpRules:
    """The merged record of operator `name` (the default record when no entry names
    it); with `program`, as the kernel is judged (as an exported program calls it):
    only the rules that keep memory errors away guard it or work around its bugs."""
    if not isinstance(name, str):
        raise TypeError(f"rules_for: argument 'name' must be an operator name string, got {type(name).__name__}")
    return merge(name, ALL_RULES, program)


def findings() -> list:
    """Every known ExecuTorch finding of the table, in table order."""
    return [f for rule in ALL_RULES for f in rule.findings]


def abort_findings() -> list:
    """The findings that are ExecuTorch aborts (ET_CHECKs, which etops unwinds into
    KernelAborted), not memory errors: those of the rules not marked `memory`."""
    return [f for rule in ALL_RULES if not rule.memory for f in rule.findings]


__all__ = ["ALL_RULES", "Finding", "OpRules", "Rule", "abort_findings", "findings", "rules_for"]
