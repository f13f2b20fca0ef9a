"""etops.ops: the per-operator policy table, one entry per operator in one place.

Owns what etops knows about individual operators, each entry in named parts
(parts.py): what sizes its outs (``sizing``), what direct calls do for the user
(``direct``: guards against the inputs ExecuTorch's kernels abort on, normalizers,
``no_work``, ``contiguous_only``), what no call may do (``safety``: inputs that
corrupt memory), which tensor values decide its footprint and their checks before
every call (``footprint``), what torch refuses that its meta kernel lets through
(``torch_checks``) and how the kernel is judged (``judging``: comparison kind,
tolerance, known silently wrong layouts, known findings with reproducers, the input
constraints of the conformance sweep). The declarations live in one module per
family (aten.py, prim.py, quantized.py, llm.py); rules.py merges them into the
entry; policy.py has the two call policies a kernel is made with (``DIRECT``,
``PROGRAM``); guards.py, normalizers.py and footprints.py the constructors.
Core package: imports torch, the standard library and core modules only (errors,
compare, out_shapes), never an extension.

``policy_of(name)`` is the entry of an operator (``rules_for`` is the same
function); ``ALL_RULES`` the declarations; ``findings()`` every finding;
``wrong_layouts()`` the kernels known to be silently wrong on a layout;
``input_constraints(op)`` the sweep's input constraints. docs/rules.md says how to
add a rule.
"""

from __future__ import annotations

import functools

from . import aten, llm, prim, quantized
from .parts import WRONG_LAYOUTS, Direct, Finding, Footprint, InputConstraints, Judging, LayoutFinding, Safety, Sizing
from .policy import DIRECT, PROGRAM, CallPolicy, CallRules
from .rules import OpPolicy, Rule, merge
from ..errors import refusing

#: every declaration of the table, in the order their guards compose
ALL_RULES: tuple = tuple(aten.RULES + prim.RULES + quantized.RULES + llm.RULES)


@functools.lru_cache(maxsize=None)
def policy_of(name: str) -> OpPolicy:
    """The entry of operator `name`: every declaration naming it, merged part by
    part (the default entry when none names it)."""
    if not isinstance(name, str):
        raise refusing(TypeError, "name", f"policy_of: argument 'name' must be an operator name string, got {type(name).__name__}")
    return merge(name, ALL_RULES)


#: the same function under its older name
rules_for = policy_of


def wrong_layouts() -> dict:
    """operator name -> its LayoutFindings: every kernel the table records as
    silently wrong on a layout (one place: the entries of aten.py)."""
    return {n: policy_of(n).judging.wrong_layouts for rule in ALL_RULES if rule.judging.wrong_layouts for n in rule.names}


def data_dependent() -> dict:
    """operator name -> its Footprint: every kernel the table records as having a
    footprint that depends on tensor values (indices, repeats, a mask's count)."""
    return {n: policy_of(n).footprint for rule in ALL_RULES if rule.footprint.data_dependent for n in rule.names}


def findings() -> list:
    """Every known ExecuTorch finding of the table, in table order."""
    return [f for rule in ALL_RULES for f in rule.judging.findings]


def abort_findings() -> list:
    """The findings that are ExecuTorch aborts (ET_CHECKs, which etops unwinds into
    KernelAborted), not memory errors."""
    return [f for f in findings() if not f.memory]


def input_constraints(op: str) -> InputConstraints | None:
    """The input constraints of `op` (its entry's judging part), or None when
    OpInfo's samples reach it."""
    if not isinstance(op, str):
        raise refusing(TypeError, "op", f"input_constraints: argument 'op' must be an operator name string, got {type(op).__name__}")
    return policy_of(op).judging.inputs


#: operator name -> InputConstraints, for every operator whose entry has them
INPUTS = {n: policy_of(n).judging.inputs for rule in ALL_RULES if rule.judging.inputs is not None for n in rule.names}

__all__ = ["ALL_RULES", "DIRECT", "INPUTS", "PROGRAM", "WRONG_LAYOUTS", "CallPolicy", "CallRules", "Direct", "Finding",
           "Footprint", "InputConstraints", "Judging", "LayoutFinding", "OpPolicy", "Rule", "Safety", "Sizing", "abort_findings", "data_dependent", "findings",
           "input_constraints", "policy_of", "rules_for", "wrong_layouts"]
