"""plan.py's argument kinds and flags are the C extension's: the K_* and F_*
enumerators of the native headers (parsed here) and the module constants of
etops.plan agree, name for name and value for value."""

from __future__ import annotations

import re
from pathlib import Path

from etops import plan

NATIVE = Path(__file__).resolve().parents[1] / "src" / "etops" / "_native"

_ENUM = re.compile(r"enum\s*\{(.*?)\}", re.S)
_ENUMERATOR = re.compile(r"^\s*([KF]_[A-Z_]+)\s*(?:=\s*(\d+))?\s*,?", re.M)


def _header_constants() -> dict:
    """name -> value of every K_* / F_* enumerator of the native headers (an
    enumerator without a value is the previous one's plus one, as C counts)."""
    found: dict = {}
    for header in sorted(NATIVE.glob("*.h")):
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        for body in _ENUM.findall(text):
            previous = -1
            for name, value in _ENUMERATOR.findall(body):
                previous = int(value) if value else previous + 1
                assert name not in found, f"{name} defined twice in the native headers"
                found[name] = previous
    return found


def _plan_constants() -> dict:
    return {n: v for n, v in vars(plan).items() if re.fullmatch(r"[KF]_[A-Z_]+", n) and isinstance(v, int)}


def test_the_parser_reads_the_header():
    constants = _header_constants()
    assert constants["K_TENSOR"] == 1 and constants["F_MUTABLE"] == 16
    assert constants["K_COUNT"] == constants["K_RETURN_SLOT"] + 1  # counted, not given


def test_plan_kinds_and_flags_are_the_headers():
    header = _header_constants()
    ours = _plan_constants()
    assert ours, "etops.plan defines no K_* / F_* constants"
    assert {n: header.get(n) for n in ours} == ours  # every constant of plan.py, with C's value
    missing = sorted(n for n in header if n not in ours and n != "K_COUNT")
    assert not missing, f"the native headers define {missing}, which etops.plan lacks"


def test_every_kind_is_below_k_count_and_flags_are_distinct_bits():
    header = _header_constants()
    kinds = [v for n, v in header.items() if n.startswith("K_") and n != "K_COUNT"]
    assert sorted(kinds) == list(range(1, header["K_COUNT"]))
    flags = [v for n, v in header.items() if n.startswith("F_")]
    assert all(f & (f - 1) == 0 for f in flags) and len(set(flags)) == len(flags)
