"""The check files of an ``inprocess`` folder (fresh_checks.py): each test
function is an item with its own result (a failure, a skip, a parametrized test
failing one of its cases, a file that fails to import), selectable with -k, run in an interpreter other than
the suite's; a test that kills its interpreter fails, the tests before it keep
their results."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = str(Path(__file__).resolve().parent)

CONFTEST = f"""
import os, sys
sys.path.insert(0, {TESTS!r})
os.environ.setdefault("SUITE_PID", str(os.getpid()))
from fresh_checks import collect_check_file

def pytest_collect_file(file_path, parent):
    return collect_check_file(file_path, parent)
"""

CHECKS = """
import os
import pytest

def test_passes_in_another_interpreter():
    assert os.getpid() != int(os.environ["SUITE_PID"])

def test_fails():
    assert 1 == 2, "planted failure"

@pytest.mark.parametrize("x", [1, 2])
def test_one_case_fails(x):
    assert x == 1

def test_skips():
    pytest.skip("planted skip")
"""

DIES = """
import os

def test_before():
    pass

def test_dies():
    os._exit(3)

def test_after():
    pass
"""


def _folder(pytester, monkeypatch, **files):
    """An ``inprocess`` folder of check files for a pytest run in a subprocess
    (without the installed plugins: seconds less a start, the checks need none)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(CONFTEST)
    folder = pytester.mkdir("inprocess")
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text)


def test_each_check_is_an_item_with_its_own_result(pytester, monkeypatch):
    _folder(pytester, monkeypatch, check_a=CHECKS)
    result = pytester.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    for line in ("*check_a.py::test_fails: AssertionError: planted failure*", "*check_a.py::test_one_case_fails[[]2[]]: assert 2 == 1*",
                 "SKIPPED *check_a.py:15: planted skip", "PASSED inprocess/check_a.py::test_passes_in_another_interpreter"):
        result.stdout.fnmatch_lines([line])


def test_k_selects_checks(pytester, monkeypatch):
    _folder(pytester, monkeypatch, check_a=CHECKS)
    result = pytester.runpytest_subprocess("-k", "passes or skips")
    result.assert_outcomes(passed=1, skipped=1, deselected=2)


def test_a_check_file_that_fails_to_import_fails_each_of_its_checks(pytester, monkeypatch):
    _folder(pytester, monkeypatch, check_broken="import no_such_module_here\n\ndef test_one():\n    pass\n\ndef test_two():\n    pass\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*No module named 'no_such_module_here'*"])


def test_a_check_that_kills_its_interpreter_fails_and_the_earlier_ones_keep_their_results(pytester, monkeypatch):
    _folder(pytester, monkeypatch, check_dies=DIES)
    result = pytester.runpytest_subprocess("-rA")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*check_dies.py::test_dies did not finish in the fresh interpreter*"])
    result.stdout.fnmatch_lines(["PASSED inprocess/check_dies.py::test_before"])


PID_WRITER = """
import os

def test_first():
    with open("pids", "a") as out:
        out.write(f"{{__name__}}.first {{os.getpid()}}\\n")

def test_second():
    with open("pids", "a") as out:
        out.write(f"{{__name__}}.second {{os.getpid()}}\\n")
"""


def test_each_check_file_runs_in_an_interpreter_of_its_own_shared_by_its_checks(pytester, monkeypatch):
    """One interpreter per check file (not per folder): the suite's two workers
    can share a folder's long files between them."""
    _folder(pytester, monkeypatch, check_one=PID_WRITER.format(), check_two=PID_WRITER.format())
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=4)
    pids = dict(line.split() for line in (pytester.path / "pids").read_text().splitlines())
    assert pids["check_one.first"] == pids["check_one.second"]
    assert pids["check_two.first"] == pids["check_two.second"]
    assert pids["check_one.first"] != pids["check_two.first"]
