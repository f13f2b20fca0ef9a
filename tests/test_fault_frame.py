"""The direction of a fault from the faulting A64 instruction (fault_frame.c): what
aarch64's trap falls back to in a signal frame without an exception syndrome
(qemu-user writes none). A pure decoder, so judged on any host; the aarch64 lane
(tests/aarch64/lane_calls.py) checks the faults themselves."""

from __future__ import annotations

import struct

import pytest

from etops._native import _core

#: instruction words (GNU as, aarch64) -> 1 store or read-modify-write, 0 load, -1 neither
WORDS = {
    "ldr w0, [x1]": (0xB9400020, 0),
    "str w0, [x1]": (0xB9000020, 1),
    "ldrsw x0, [x1]": (0xB9800020, 0),
    "ldr s0, [x1]": (0xBD400020, 0),
    "str s0, [x1]": (0xBD000020, 1),
    "ldr q0, [x1]": (0x3DC00020, 0),
    "str q0, [x1]": (0x3D800020, 1),
    "ldp x0, x1, [x2]": (0xA9400440, 0),
    "stp x29, x30, [sp, #-16]!": (0xA9BF7BFD, 1),
    "ldxr x0, [x1]": (0xC85F7C20, 0),
    "stxr w2, x0, [x1]": (0xC8027C20, 1),
    "ld1 {v0.4s}, [x0]": (0x4C407800, 0),
    "st1 {v0.4s}, [x0]": (0x4C007800, 1),
    "ldadd w0, w1, [x2]": (0xB8200041, 1),
    "ldr x0, <literal>": (0x58000040, 0),
    "nop": (0xD503201F, -1),
    "add x0, x1, x2": (0x8B020020, -1),
}


@pytest.mark.parametrize("instruction", sorted(WORDS))
def test_an_a64_instructions_direction(instruction):
    word, direction = WORDS[instruction]
    assert _core.a64_is_write(word) == direction


def test_a_word_wider_than_32_bits_is_refused_naming_it():
    with pytest.raises(ValueError, match="word"):
        _core.a64_is_write(1 << 32)


def _record(magic: int, payload: bytes) -> bytes:
    """One sigcontext record: its {magic, size} header, then the payload."""
    return struct.pack("<II", magic, 8 + len(payload)) + payload


FPSIMD = _record(0x46508001, bytes(520))  # fpsr, fpcr, 32 vector registers: what comes first
END = bytes(16)


@pytest.mark.parametrize("esr, direction", [
    (0x24 << 26 | 1 << 6, 1),           # a data abort from EL0, WnR set: a write
    (0x24 << 26, 0),                    # WnR clear: a read
    (0x25 << 26 | 1 << 6 | 1 << 8, 0),  # CM: a cache maintenance operation, reported as a read
    (0x15 << 26, -1),                   # not a data abort (an SVC): unknown, whatever the instruction
])
def test_an_aarch64_frames_syndrome_decides_the_direction(esr, direction):
    records = FPSIMD + _record(0x45535201, struct.pack("<Q", esr)) + END
    assert _core.aarch64_direction(records, WORDS["str w0, [x1]"][0]) == direction


@pytest.mark.parametrize("instruction", ["ldr w0, [x1]", "str w0, [x1]", "nop"])
def test_a_frame_without_a_syndrome_falls_back_to_the_instruction(instruction):
    word, direction = WORDS[instruction]
    assert _core.aarch64_direction(FPSIMD + END, word) == direction  # qemu-user's frames
    assert _core.aarch64_direction(FPSIMD[:100], word) == direction  # a record cut short: not read past
