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
    assert len(cases) == 4 and {c["mode"] for c in cases} == {"valid", "invalid"}
    survived, done, _log = sequences.run_sequence(cases)
    assert survived and done == 4


def test_a_later_crash_is_bisected_to_the_corrupting_call():
    clean = sequences.draw_cases(etops.registry().aten.add.out, 6)
    cases = clean[:2] + [{"op": "<selftest:corrupt>"}] + clean[2:]
    survived, done, log = sequences.run_sequence(cases)
    assert not survived, log
    assert sequences.bisect(cases, done) == 2
