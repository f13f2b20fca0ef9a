"""No code path decides anything (a kind, a gating, a match, a key) by reading a
message's text: verdicts are made from structured values (etops.conformance.outcome,
etops.conformance.gating). This test greps etops' sources for text matches over
message-like values (an exception's str, a message, a log, a process's stderr) and
fails on any that is not in ALLOWED, each entry saying why it is no verdict.

Run as a script it prints every match with its place (``python tests/test_no_message_matching.py [SRC]``),
so the count before and after a change can be compared.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

SOURCES = Path(__file__).resolve().parents[1] / "src" / "etops"

#: what holds a message: an exception's text, a message, a log or a stderr
_MESSAGE = r"(?:\w+\.)*(?:message|msg|said|why|stderr|log|exc)\b|str\((?:exc|e|err|error)\)|\(?\s*outcome\.get\(\"exc\"\)"
#: a decision on a message's text: a regular expression over it, a substring test, a prefix or suffix test
PATTERNS = (
    re.compile(r"\bre\.(?:search|match|fullmatch|findall|finditer)\([^\n]*,\s*\(?(?:" + _MESSAGE + r")"),
    re.compile(r"\b_[A-Z_]+\.(?:search|match|fullmatch|findall|finditer|sub)\(\s*\(?(?:" + _MESSAGE + r")"),
    re.compile(r"\bre\.(?:search|match|fullmatch|findall|finditer)\([^\n]*\b(?:case|c|example)\.message\b"),
    re.compile(r"[\"'\}]\s+(?:not\s+)?in\s+\(?\s*(?:f\"[^\"]*\"\s*)?(?:" + _MESSAGE + r")"),
    re.compile(r"\bin\s+\(?(?:" + _MESSAGE + r")\s+or\s+\"\"\)"),
    re.compile(r"\b(?:" + _MESSAGE + r")\s*\.\s*(?:startswith|endswith)\("),
    re.compile(r"\bin\s+\(?(?:case|c|example|result)\.message\b"),
    re.compile(r"\bin\s+f\"[^\"]*\{(?:exc|msg|message|log|stderr)\b"),
    re.compile(r"(?<!for )\b\w+\s+(?:not\s+)?in\s+(?:" + _MESSAGE + r")(?!\s*\.\s*\w+\()"),
    re.compile(r"\bin\s+(?:" + _MESSAGE + r")\.splitlines\(\)\s+if\b[^\n]*(?:startswith|endswith|\bin\b)"),
)

#: (file relative to src/etops, text on the line, why it decides no verdict): messages for people only
ALLOWED = (
    ("conformance/values.py", "found = dict(_GREATEST.findall(message", "torch.testing reports its greatest differences "
     "only in its message: figures shown in reports, never compared"),
    ("torch_checks.py", "any(marker in message for marker in _NO_META)", "torch's meta kernel raises its own bugs as text "
     "only: etops then skips torch's check (no verdict on a kernel)"),
    ("torch_checks.py", "\"can't be cast to the desired output type\" in message", "torch's refusal is text only: mapped "
     "to the exception etops raises in its place (what a caller sees), no verdict"),
    ("torch_checks.py", "any(word in message for word in typed)", "as above: TypeError or ValueError for torch's refusal"),
    ("torch_checks.py", "re.search(r\"\\bout(put)? (tensor|dtype)\\b\", message)", "as above: the argument torch's words name"),
    ("torch_checks.py", "re.search(r\"\\bargument at index (\\d+)\\b\", message)", "as above: the argument torch's words name"),
    ("torch_checks.py", "re.search(rf\"['`\\\"]{re.escape(arg)}", "as above: the argument torch's words name"),
    ("overlaps.py", "if TORCH_SAYS in message", "torch refuses overlapping arguments with a RuntimeError whose text is "
     "its only account (no structured overlap check in torch's Python API)"),
    ("fuzz/worker.py", "re.search(rf\"\\b{re.escape(name)}\\b\", message)", "the property checked is the message's own "
     "(a bad input's exception names its argument, for people)"),
    ("fuzz/worker.py", "case[\"target\"] not in msg", "as above: the message names the argument it refuses"),
    ("fuzz/sequences.py", "any(h in log for h in heap)", "glibc's malloc check reports heap corruption only in its "
     "words on the dead process's stderr before it aborts"),
    ("fuzz/runner.py", "line.startswith(\"etops: ExecuTorch aborted\")", "a dead worker's only account of an abort is the "
     "line etops' abort handler wrote to its stderr: shown, and what groups the campaign's aborts"),
    ("bench/runall.py", "if \"threads\" in msg", "msg is a worker's protocol dict: a test of its keys, no text"),
    ("bench/runall.py", "elif \"start\" in msg", "as above"),
    ("bench/runall.py", "elif \"row\" in msg", "as above"),
    ("custom/build.py", "re.findall(r\"undefined reference to", "the linker's output is text only: it adds a hint for "
     "people (a kernel's definition whose signature the schema does not give) to a build error, no verdict"),
    ("custom/build.py", "for ln in log.splitlines() if not ln.startswith(\"[\")", "the build log's lines shown in a "
     "build error, the build tool's progress lines left out: for people"),
)


def matches(root: Path = SOURCES) -> list[tuple[str, int, str]]:
    """(file, line number, line) of every text match over a message-like value in `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("  #", 1)[0]
            if code.lstrip().startswith("#"):
                continue
            if any(p.search(code) for p in PATTERNS):
                found.append((str(path.relative_to(root)), number, line.strip()))
    return found


def _allowed(file: str, line: str) -> bool:
    return any(file == f and text in line for f, text, _why in ALLOWED)


@pytest.mark.skipif(not SOURCES.is_dir(), reason="needs the source tree (src/etops) next to tests/")
def test_no_verdict_reads_a_message():
    deciding = [(f, n, line) for f, n, line in matches() if not _allowed(f, line)]
    assert not deciding, "message text decides something (make it a structured field, or allow it with a reason):\n" + \
        "\n".join(f"  src/etops/{f}:{n}: {line}" for f, n, line in deciding)


def test_every_allowed_entry_still_matches_and_says_why():
    found = matches() if SOURCES.is_dir() else []
    for file, text, why in ALLOWED:
        assert why.strip(), f"{file}: an allowed match needs a reason"
        if found:
            assert any(f == file and text in line for f, _n, line in found), f"stale allow-list entry: {file}: {text}"


@pytest.mark.parametrize("line", [
    'if " values, ATen " in message:',
    'sig = re.search(r"SIG[A-Z]+", case.message or "")',
    'm = re.match(r"(output \\d+): ", message)',
    'if message.startswith("shape "):',
    'if "hung" in (case.message or ""):',
    'named = _ARGUMENT.search(message)',
    'return outcome["status"] == "raised" and f"\'{finding.argument}\'" in (outcome.get("exc") or "")',
    '"in_aten": "in reference" in log,',
])
def test_the_patterns_catch_a_decision_on_text(line):
    assert any(p.search(line) for p in PATTERNS), line


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCES
    every = matches(root)
    for f, n, line in every:
        print(f"{'allowed ' if _allowed(f, line) else 'DECIDES '} {f}:{n}: {line}")
    print(f"{len(every)} matches, {sum(1 for f, _n, line in every if not _allowed(f, line))} not allowed")
