"""etops.dev.stream: the edit's failing cases streamed as their tasks come back, one
line per pass, operator, dtype and kind of failure; the base's passes and passing
cases stream nothing; nothing at all unless enabled (the Python API)."""

from __future__ import annotations

from etops.conformance.case import CaseResult, TaskResult
from etops.dev import stream


def _task(*cases) -> TaskResult:
    result = TaskResult("add", "float32")
    for c in cases:
        result.record(c, keep=True)
    return result


def _case(status, dtype="float32", sample=0, verdict=None):
    case = CaseResult("aten::add.out", "add.out", "add", dtype, sample, 0, status, message=f"{status} message")
    case.verdict = verdict
    return case


def test_the_edits_failing_cases_stream_once_per_kind_and_pass():
    lines: list = []
    s = stream.Stream()
    s.write = lines.append
    s.failing_cases("edit", _task(_case("pass"), _case("mismatch", verdict="wrong"), _case("mismatch", sample=3, verdict="wrong")))
    s.failing_cases("base", _task(_case("crash")))  # the base's pass: nothing
    s.failing_cases("edit, transposed", _task(_case("mismatch", verdict="wrong")))  # another pass: its own line
    s.failing_cases("edit", _task(_case("unsupported", dtype="complex64")))
    assert len(lines) == 3, lines
    assert "found on the edit: add.out float32 mismatch (wrong): mismatch message [add, sample 0;" in lines[0]
    assert "found on the edit, transposed: add.out float32 mismatch" in lines[1]
    assert "add.out complex64 unsupported" in lines[2]


def test_at_most_max_case_lines_are_streamed():
    lines: list = []
    s = stream.Stream()
    s.write = lines.append
    for i, dtype in enumerate(["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]):
        s.failing_cases("edit", _task(_case("mismatch", dtype=dtype)))
    assert len(lines) == stream.MAX_CASE_LINES


def test_nothing_streams_unless_enabled(capsys):
    stream.STREAM.failing_cases("edit", _task(_case("crash")))
    with stream.enabled(print):
        stream.STREAM.begin_round(None)
        stream.STREAM.failing_cases("edit", _task(_case("crash")))
    stream.STREAM.failing_cases("edit", _task(_case("abort")))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "add.out float32 crash" in out[0]
