"""etops.fuzz.sequences: many cases in one process under glibc's malloc checking;
a sequence that dies is bisected to the call that corrupted the heap, even when
the crash comes calls later."""

import os

import pytest

import etops
from etops.fuzz import sequences

pytestmark = [
    pytest.mark.skipif(not os.path.exists(sequences.MALLOC_DEBUG), reason="needs libc6's malloc debug library"),
    pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""), reason="ASan's allocator replaces glibc's malloc checking"),
]


def test_clean_sequence_survives():
    cases = sequences.draw_cases(etops.registry().aten.add.out, 4)
    extra = len(sequences.ONE_DTYPE)  # then the first valid call with every tensor in one dtype
    assert len(cases) == 4 + extra and {c["mode"] for c in cases} == {"valid", "invalid"}
    one_dtype = cases[4:]
    assert [c["mutation"] for c in one_dtype] == ["one_dtype"] * extra
    for case, dtype in zip(one_dtype, sequences.ONE_DTYPE):
        specs = [v for _n, v in case["args"] + case["kwargs"] if v[0] == "T"]
        assert specs and {spec[2] for spec in specs} == {dtype} and case["out_dtype"] == dtype
    survived, done, _log = sequences.run_sequence(cases)
    assert survived and done == 4 + extra


def test_a_later_crash_is_bisected_to_the_corrupting_call():
    clean = sequences.draw_cases(etops.registry().aten.add.out, 6)
    cases = clean[:2] + [{"op": "<selftest:corrupt>"}] + clean[2:]
    survived, done, log = sequences.run_sequence(cases)
    assert not survived, log
    assert sequences.bisect(cases, done) == 2
