"""file_seconds.py, the measured seconds that order the files pytest-xdist hands
out (longest first): every file it lists exists, and a JUnit XML's test cases (a
module's, a class's, a check file's) are summed per file."""

from __future__ import annotations

from pathlib import Path

from file_seconds import LISTED, SECONDS, file_seconds, from_junit

ROOT = Path(__file__).resolve().parents[1]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.cli.test_cli" name="test_a" time="2.5" />
<testcase classname="tests.cli.test_cli" name="test_b[x]" time="1.0" />
<testcase classname="tests.test_tensors.TestViews" name="test_c" time="0.5" />
<testcase classname="tests.dev.inprocess.check_gate" name="test_d" time="40" />
<testcase classname="" name="tests.conftest" time="9" />
</testsuite></testsuites>
"""


def test_every_listed_file_exists_and_is_listed_above_the_floor():
    assert SECONDS and all((ROOT / path).is_file() for path in SECONDS), [p for p in SECONDS if not (ROOT / p).is_file()]
    assert min(SECONDS.values()) >= LISTED
    longest = max(SECONDS, key=SECONDS.__getitem__)
    assert file_seconds(ROOT / longest, ROOT) == SECONDS[longest]
    assert file_seconds(ROOT / "tests" / "no_such_test.py", ROOT) == 0.0
    assert file_seconds(Path("/elsewhere/test_x.py"), ROOT) == 0.0


def test_a_junit_xml_is_summed_per_file(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT)
    assert from_junit(str(xml)) == {"tests/cli/test_cli.py": 3.5, "tests/test_tensors.py": 0.5,
                                    "tests/dev/inprocess/check_gate.py": 40.0}
