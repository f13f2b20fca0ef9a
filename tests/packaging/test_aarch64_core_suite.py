"""tests/aarch64/core_suite.txt names every top-level test file of the suite: run in
the arm64 root by make test-aarch64, or left to x86_64 with a reason, so a new core
test file is never silently left out of the aarch64 lane."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def core_suite() -> tuple[list[str], dict[str, str]]:
    """(the files the lane runs, {file left to x86_64: why})."""
    run, left = [], {}
    for line in (TESTS / "aarch64" / "core_suite.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("- "):
            name, _, why = line[2:].partition(":")
            left[name.strip()] = why.strip()
        else:
            run.append(line.strip())
    return run, left


def test_every_top_level_test_file_is_run_on_aarch64_or_left_to_x86_64_with_a_reason():
    run, left = core_suite()
    files = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert sorted(run + list(left)) == files
    assert not set(run) & set(left)
    assert all(left.values()), left
