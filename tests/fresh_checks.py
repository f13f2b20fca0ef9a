"""The check files of an ``inprocess`` folder (``tests/custom/inprocess``,
``tests/dev/inprocess``, ...): tests that register, override and deregister kernels in
ExecuTorch's process-wide registry (deregistered entries stay as free slots), which
every other test expects to find as the wheel left it. So they never run in the
suite's interpreter: each test function of a ``check_*.py`` file is a pytest item
of its own (its name, ``-k``, its own pass, failure or skip), and the selected
items of one check file run together in one fresh interpreter, once, started in the
background as soon as collection has selected them (``start_check_runs``, the
largest file first) so that it overlaps the suite's in-process tests; each item
then waits for its file's run and reports what the fresh interpreter's pytest said of it
(its JUnit XML; when the interpreter died before writing it, its verbose
output). A test the fresh interpreter never finished (it died in it or before it)
fails with the interpreter's output.

Run a folder in-process while developing (it then collects them as plain tests):

    .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/custom/inprocess
"""

from __future__ import annotations

import ast
import concurrent.futures
import fnmatch
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: The folder etops is imported from (the source tree, or wherever PYTHONPATH
#: points; found without importing it): fresh interpreters import the same etops.
SRC = str(Path(importlib.util.find_spec("etops").origin).resolve().parent.parent)

#: how long one check file's fresh interpreter may take
TIMEOUT = 900


def collect_check_file(file_path: Path, parent: pytest.Collector) -> "CheckFile | None":
    """A collector for `file_path` when it is a check file of an ``inprocess``
    folder and this session does not collect check files as plain tests."""
    if not (file_path.name.startswith("check_") and file_path.suffix == ".py" and file_path.parent.name == "inprocess"):
        return None
    if any(fnmatch.fnmatch(file_path.name, pattern) for pattern in parent.config.getini("python_files")):
        return None  # run in-process, as asked (this is the fresh interpreter, or a developer)
    return CheckFile.from_parent(parent, path=file_path)


def _test_names(path: Path) -> list[tuple[str, int]]:
    """The test functions (and ``Test*`` classes) of a check file and their lines
    (0-based), read without importing it (importing would load what it registers
    into this process)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.name, node.lineno - 1) for node in tree.body
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"))
            or (isinstance(node, ast.ClassDef) and node.name.startswith("Test"))]


class CheckFile(pytest.File):
    """A ``check_*.py`` file: one CheckItem per test function."""

    def collect(self):
        for name, line in _test_names(self.path):
            yield CheckItem.from_parent(self, name=name, line=line)


@dataclass
class _Outcome:
    """What the fresh interpreter's pytest said of one test function (all its
    parametrizations): failures (their text), skips (their reasons), how many ran."""

    failures: list[str] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)
    xfails: list[str] = field(default_factory=list)
    ran: int = 0


@dataclass
class _FileRun:
    """One fresh interpreter's run of a check file's selected checks."""

    outcomes: dict[tuple[str, str], _Outcome]
    output: str
    returncode: int


#: the outcome key of what concerns a whole check file (an error importing it)
_FILE = ""

#: check file -> its run (a future), started by start_check_runs (or by its first item)
_RUNS: dict[Path, "concurrent.futures.Future[_FileRun]"] = {}

#: the check files' fresh interpreters, one at a time, beside fresh_python's pool
_CHECK_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="etops-check-file")


def start_check_runs(session: pytest.Session) -> None:
    """Starts, in the background, one fresh interpreter per check file for the
    check items collection selected (the file with the most items first)."""
    if session.config.option.collectonly:
        return
    by_file: dict[Path, list[CheckItem]] = {}
    for item in session.items:
        if isinstance(item, CheckItem):
            by_file.setdefault(item.path, []).append(item)
    for path, items in sorted(by_file.items(), key=lambda kv: -len(kv[1])):
        if path not in _RUNS:
            _RUNS[path] = _CHECK_POOL.submit(_run_file, items, session.config.rootpath)


def stop_check_runs() -> None:
    """Drops check-file runs nobody will look at (after -x, say)."""
    _CHECK_POOL.shutdown(wait=False, cancel_futures=True)


class CheckItem(pytest.Item):
    """One test function of a check file; its result is read from its file's run
    in a fresh interpreter."""

    def __init__(self, *, line: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.line = line

    def runtest(self) -> None:
        if self.path not in _RUNS:  # not started with the session (an item run on its own)
            selected = [item for item in self.session.items if isinstance(item, CheckItem) and item.path == self.path]
            _RUNS[self.path] = _CHECK_POOL.submit(_run_file, selected, self.config.rootpath)
        run = _RUNS[self.path].result()
        whole_file = run.outcomes.get((self.path.name, _FILE))
        if whole_file is not None and whole_file.failures:
            raise CheckFailed("\n\n".join(whole_file.failures))
        outcome = run.outcomes.get((self.path.name, self.name))
        if outcome is None or outcome.ran == 0:
            raise CheckFailed(f"{self.nodeid} did not finish in the fresh interpreter (its pytest exited {run.returncode}; "
                              "the last test it started is the one it died in):\n"
                              f"{run.output[-20000:]}")
        if outcome.failures:
            raise CheckFailed("\n\n".join(outcome.failures))
        if outcome.xfails and not outcome.skips and len(outcome.xfails) == outcome.ran:
            pytest.xfail("; ".join(sorted(set(outcome.xfails))))
        if outcome.skips and len(outcome.skips) + len(outcome.xfails) == outcome.ran:
            raise pytest.skip.Exception("; ".join(sorted(set(outcome.skips))), _use_item_location=True)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, self.line, f"{self.path.name}::{self.name} (fresh interpreter)"


class CheckFailed(Exception):
    """A check failed in the fresh interpreter (its text is pytest's report there)."""


def _run_file(items: list[CheckItem], rootpath: Path) -> _FileRun:
    """Runs `items` (test functions of one check file) with pytest in one
    fresh interpreter (etops importable from where this process imported it), and
    reads each test's outcome from its JUnit XML (from its verbose output when it
    died before writing that)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}  # a plain interpreter
    # no empty entry (it would put the working folder first: a test's folder holding a
    # checkout named executorch would shadow the package)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="etops-checks-") as tmp:
        xml = Path(tmp) / "junit.xml"
        # no Hypothesis plugin: no check file uses it, and loading it costs 1.2 s of CPU per interpreter
        command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:warnings",
                   "-p", "no:hypothesispytest", "-o", "python_files=check_*.py", "-o", "junit_logging=all", f"--junitxml={xml}",
                   *[f"{item.path}::{item.name}" for item in items]]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(rootpath), timeout=TIMEOUT)
            output, returncode = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            captured = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part
                               for part in (exc.stdout, exc.stderr) if part)  # bytes, even with text=True
            output, returncode = f"timed out after {TIMEOUT}s\n{captured}", -9
        outcomes = _read_junit(xml) if xml.is_file() else _read_verbose(output)
    return _FileRun(outcomes, output, returncode)


#: the section headers pytest writes into a JUnit test case's captured output
_HEADER = re.compile(r"^-+ Captured \w+ -+$", re.M)


def _read_junit(xml: Path) -> dict[tuple[str, str], _Outcome]:
    """(file name, test function) -> its outcome, from pytest's JUnit XML (a test's
    name there carries its parameters: ``test_x[a-b]``; its classname the module's
    dotted path, then its class)."""
    outcomes: dict[tuple[str, str], _Outcome] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        parts = classname.split(".")
        module = next((p for p in reversed(parts) if p.startswith("check_")), None)
        if module is None:  # the file itself (it failed to import): classname "", name its dotted path
            module, after, function = name.split(".")[-1], [], _FILE
        else:
            after = parts[parts.index(module) + 1:]
            function = after[0] if after else name.split("[")[0]  # a Test* class: the item is the class
        outcome = outcomes.setdefault((module + ".py", function), _Outcome())
        outcome.ran += 1
        label = f"{module}.py::{'::'.join(after + [name])}"
        for failed in list(case.iter("failure")) + list(case.iter("error")):
            captured = "\n".join(el.text for tag in ("system-out", "system-err") for el in case.iter(tag)
                                 if el.text and _HEADER.sub("", el.text).strip())
            outcome.failures.append(f"{label}: {failed.get('message', '')}\n{failed.text or ''}\n{captured}".rstrip())
        for skipped in case.iter("skipped"):
            target = outcome.xfails if skipped.get("type") == "pytest.xfail" else outcome.skips
            target.append(skipped.get("message", "") or label)
    return outcomes


_VERBOSE_LINE = re.compile(r"^(\S+\.py)::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)


def _read_verbose(output: str) -> dict[tuple[str, str], _Outcome]:
    """(file name, test function) -> its outcome, from pytest's ``-v`` lines (the
    tests finished before the interpreter died; the one it died in has no line)."""
    outcomes: dict[tuple[str, str], _Outcome] = {}
    for path, test, word in _VERBOSE_LINE.findall(output):
        outcome = outcomes.setdefault((Path(path).name, test.split("::")[0].split("[")[0]), _Outcome())
        outcome.ran += 1
        if word in ("FAILED", "ERROR"):
            outcome.failures.append(f"{Path(path).name}::{test} {word} (the interpreter died later: no report kept)")
        elif word == "SKIPPED":
            outcome.skips.append(f"{Path(path).name}::{test} skipped")
        elif word == "XFAIL":
            outcome.xfails.append(f"{Path(path).name}::{test} xfailed")
    return outcomes
