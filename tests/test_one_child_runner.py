"""One way to run work in a child: etops.child_process (a fork running a body, or
a fresh program: Child.program, for a process that must start anew). Every other
place in src/etops that starts a process (a fork, multiprocessing, a subprocess, an
exec) is in ALLOWED with why it is not work handed to a child of this process: a
tool (a compiler, ninja, git, upstream's generator), or etops itself run as a user
runs it. An AST scan, so a word in a string or a comment is no
match."""

from __future__ import annotations

import ast
from pathlib import Path

import etops

SOURCES = Path(etops.__file__).resolve().parent
#: the one runner: its fork is the only one
RUNNER = "child_process.py"

#: (file under src/etops, text of the line, why it is no work in a child of this process)
ALLOWED = [
    ("dev/base.py", 'subprocess.run(["git", "-C", str(cwd), *args]', "a tool: git reads the checkout's history"),
    ("dev/base.py", 'subprocess.run(["git", "-C", str(top), "cat-file", "--batch"]', "a tool: git reads files at a revision"),
    ("custom/build.py", 'subprocess.Popen(["sh", "-c", command]', "a tool: the compiler precompiling the prelude header "
     "in the background"),
    ("custom/build.py", "subprocess.run([tc.ninja, \"-C\", str(build_dir)]", "a tool: ninja builds a kernel's sources"),
    ("gtest/build.py", "subprocess.run([tc.ninja, \"-C\", str(folder)", "a tool: ninja builds upstream's test binaries"),
    ("gtest/glue.py", "subprocess.run([sys.executable, str(generator), str(yaml_path)]", "a tool: upstream's own code "
     "generator script (ExecuTorch's, not etops' work) writes a test's registration source"),
    ("upstream/source.py", "subprocess.run(cmd, capture_output=True, text=True, timeout=timeout", "the etops check "
     "command run as a user runs it (its registry the wheel's kernels, none this process loaded), its JSON the answer"),
]

#: calls that start a process, by module and name (a name ending in "*": every name with that start)
_STARTS = {"os": ("fork", "forkpty", "spawn*", "exec*", "posix_spawn*", "system", "popen"), "pty": ("fork",),
           "subprocess": ("Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput")}
#: modules whose import is a way to run work in a child
_MODULES = ("multiprocessing", "concurrent.futures.process")


def _starts(module: str, name: str) -> bool:
    return any(name.startswith(n[:-1]) if n.endswith("*") else name == n for n in _STARTS.get(module, ()))


def process_starts(text: str) -> list[tuple[int, str]]:
    """(line, what) of every call that starts a process and every import of a
    module that does (ProcessPoolExecutor's too), in Python source `text`."""
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            if _starts(node.func.value.id, node.func.attr):
                found.append((node.lineno, f"{node.func.value.id}.{node.func.attr}"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith(_MODULES)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(_MODULES):
                found.append((node.lineno, node.module))
            elif node.module == "os" or node.module == "subprocess":
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if _starts(node.module, a.name)]
            elif node.module.startswith("concurrent.futures"):
                found += [(node.lineno, a.name) for a in node.names if a.name == "ProcessPoolExecutor"]
        elif isinstance(node, ast.Attribute) and node.attr == "ProcessPoolExecutor":
            found.append((node.lineno, "ProcessPoolExecutor"))
    return sorted(found)


def starts_in_sources() -> list[tuple[str, int, str]]:
    """(file, line number, the line's text) of every process start in src/etops."""
    out = []
    for path in sorted(SOURCES.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for lineno, _what in process_starts(text):
            out.append((str(path.relative_to(SOURCES)), lineno, lines[lineno - 1].strip()))
    return out


def test_every_process_start_is_the_runner_or_allowed_with_a_reason():
    unexplained = [f"{file}:{n}: {line}" for file, n, line in starts_in_sources()
                   if file != RUNNER and not any(f == file and text in line for f, text, _why in ALLOWED)]
    assert not unexplained, ("work run in a child outside etops.child_process (use Child or ChildCall), or a tool "
                             "missing from ALLOWED:\n" + "\n".join(unexplained))


def test_the_runner_forks_and_every_allowed_entry_still_matches_and_says_why():
    found = starts_in_sources()
    assert any(file == RUNNER and "os.fork()" in line for file, _n, line in found)
    for file, text, why in ALLOWED:
        assert len(why.split()) >= 4, f"{file}: an allowed process start needs its reason"
        assert any(f == file and text in line for f, _n, line in found), f"stale allow-list entry: {file}: {text}"


def test_the_scan_sees_every_way_to_start_a_child():
    source = (
        "import os, subprocess, sys\n"
        "import multiprocessing\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from os import fork\n"
        "pid = os.fork()\n"
        "ctx = multiprocessing.get_context('forkserver')\n"
        "subprocess.Popen([sys.executable, '-m', 'etops.conformance._worker'])\n"
        "os.execv(sys.executable, [sys.executable])\n"
        "text = 'os.fork() in a string is no fork'\n"
    )
    assert [n for n, _what in process_starts(source)] == [2, 3, 4, 5, 7, 8]
