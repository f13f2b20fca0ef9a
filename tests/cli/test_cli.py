"""The etops command line: ``python -m etops ...`` in a fresh interpreter as a user
runs it (the plain listing, a one-line error), the other commands by
etops.cli.main, the function `python -m etops` calls, in two fresh interpreters
(the slow commands in one, the cheap ones in the other: torch's import paid three
times, not ten). They are queued at import time in the background
(fresh_python.in_background), and the tests collect them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

import etops
from fresh_python import in_background

SRC = str(Path(etops.__file__).resolve().parent.parent)
ROOT = Path(__file__).resolve().parents[2]
TMP = tempfile.mkdtemp(prefix="etops-cli-test-")
PLOT = os.path.join(TMP, "add.png")
REPORT = os.path.join(TMP, "all.md")
CHECK_REPORT = os.path.join(TMP, "check.json")


def _env() -> dict[str, str]:
    """The fresh interpreters' environment: this etops importable, no forced colour."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    return env


#: A hang guard, not a timing: under AddressSanitizer on a loaded 2-core machine
#: `bench --all` (OpInfo import, its budget) took longer than 240 s once.
def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "etops", *args], capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -9, exc.stdout or "", f"timed out\n{exc.stderr or ''}")


def _start(*args: str):
    return in_background(_run, *args)


ALL_NAMES = sorted(etops.registry().operator_names)

# Run as a user runs them: the plain listing (piped) and a one-line error.
LIST = _start("list")
UNKNOWN_KERNEL = _start("show", "aten::add.Tensor")


def _driver(cases: dict[str, list[str]], timeout: float = 600):
    """`cases` (name -> argv) run in one fresh interpreter by etops.cli.main, the
    function both `python -m etops` and the `etops` script call, one after another
    with stdout and stderr captured (an argparse SystemExit taken as the process's
    exit code); name -> [exit code, stdout, stderr]."""
    return in_background(lambda: subprocess.run(
        [sys.executable, "-c", (
            "import contextlib, io, json, sys\n"
            "from etops.cli import main\n"
            "results = {}\n"
            f"for name, argv in {cases!r}.items():\n"
            "    out, err = io.StringIO(), io.StringIO()\n"
            "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
            "        try:\n"
            "            rc = main(argv)\n"
            "        except SystemExit as exc:\n"
            "            rc = exc.code\n"
            "    results[name] = [rc, out.getvalue(), err.getvalue()]\n"
            "sys.stdout.write(json.dumps(results))\n")],
        capture_output=True, text=True, timeout=timeout, env=_env()))


#: The slow commands share one interpreter (torch's import and OpInfo's once): bench
#: --all, bench, etops check.
SLOW = {
    "bench all": ["bench", "--all", "--grep", "::add.out", "--budget", "240", "--size", "1k", "--report", REPORT],
    "bench": ["bench", "aten::add.out", "--sizes", "16,4k", "--dtype", "float32,float16", "--repeats", "3", "--warmup", "1",
              "--target", "0.0005", "--plot", PLOT, "--json"],
    "check": ["check", "aten::add.out", "--dtype", "float32", "--no-progress", "--quiet", "--json", CHECK_REPORT],
}
SLOW_DRIVER = _driver(SLOW, timeout=900)

#: The cheaper ones share another.
CASES = {
    "list json": ["list", "--json"],
    "show all json": ["show", *ALL_NAMES, "--json"],
    "show all": ["show", *ALL_NAMES],
    "unknown command": ["frobnicate"],
    "bad size": ["bench", "aten::add.out", "--sizes", "lots"],
    "bad dtype": ["bench", "aten::add.out", "--dtype", "float33"],
    "unknown namespace": ["list", "--ns", "nope"],
    "bad threads": ["threads", "0"],
    "nothing to bench": ["bench"],
    "bad check option": ["check", "--no-such-option"],
    "debug": ["--debug", "show", "aten::add.Tensor"],
    "list filtered": ["list", "--ns", "quantized_decomposed", "--grep", "embed", "--json"],
    "threads": ["threads", "1", "--json"],
    "backends": ["backends", "--json"],
    "backends table": ["backends"],
}
DRIVER = _driver(CASES)
ERROR_CASES = ["unknown command", "bad size", "bad dtype", "unknown namespace", "bad threads", "nothing to bench"]


def _case(name, driver=DRIVER, cases=CASES):
    proc = driver.result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    rc, out, err = json.loads(proc.stdout)[name]
    return subprocess.CompletedProcess(cases[name], rc, out, err)


def _slow(name) -> subprocess.CompletedProcess:
    proc = _case(name, SLOW_DRIVER, SLOW)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _ok(future) -> subprocess.CompletedProcess:
    proc = future.result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_list_plain_names_every_kernel():
    out = _ok(LIST).stdout
    assert "\x1b[" not in out  # plain when piped
    header = out.splitlines()[0].split()
    assert header[:2] == ["name", "kernel"] and "library" in header and "schema" in header
    for name in ("aten::add.out", "aten::convolution.out", "quantized_decomposed::embedding_byte.out"):
        assert any(line.split()[0] == name for line in out.splitlines()[1:])
    assert f"{len(ALL_NAMES)} kernels" in out


def test_list_json_matches_the_registry():
    proc = _case("list json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    reg = etops.registry()
    assert [d["name"] for d in data] == ALL_NAMES
    for d in data:
        k = reg.get_kernel(d["name"])
        assert d["schema_known"] == (k._schema is not None)
        assert d["callable"] == k.callable
        assert [e["key"] for e in d["kernels"]] == [e.key for e in k.kernels]
        assert d["libraries"] == sorted({os.path.basename(e.library) for e in k.kernels})


def test_list_filters():
    proc = _case("list filtered")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data and all(d["name"].startswith("quantized_decomposed::") and "embed" in d["name"] for d in data)
    expected = [n for n in ALL_NAMES if n.startswith("quantized_decomposed::") and "embed" in n]
    assert [d["name"] for d in data] == expected


def test_show_every_registered_kernel():
    proc = _case("show all json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    reg = etops.registry()
    assert [d["name"] for d in data] == ALL_NAMES
    for d in data:
        k = reg.get_kernel(d["name"])
        assert d["schema"] == (str(k._schema) if k._schema is not None else None)
        assert len(d["kernels"]) == len(k.kernels) >= 1
        assert d["status"] in ("built-in", "custom", "overridden")
        for e in d["kernels"]:
            assert e["origin"] in ("built-in", "custom") and os.path.exists(e["library"])
    shown = _case("show all")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    for name in ALL_NAMES:
        assert f"\n{name}\n" in f"\n{text}"
    conv = text.split("aten::convolution.out\n", 1)[1].split("\n\n", 1)[0]
    assert "schema:   aten::convolution.out(Tensor input, Tensor weight" in conv
    assert "built-in" in conv and "libexecutorch_kernels" in conv


def _one_line_error(proc):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("etops: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_unknown_kernel_is_one_line_exit_2_with_suggestions():
    line = _one_line_error(UNKNOWN_KERNEL.result())
    assert "aten::add.Tensor" in line and "aten::add.out" in line


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_are_one_line_and_exit_2(case):
    _one_line_error(_case(case))


def test_debug_shows_the_traceback():
    proc = _case("debug")
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and proc.stderr.strip().splitlines()[-1].startswith("etops: error: ")


def test_threads_sets_and_reports():
    proc = _case("threads")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["executorch"] == 1
    assert data["previous"] == data["default"] >= 1
    assert data["torch"] >= 1


def test_backends_lists_the_wheel_backends():
    data = json.loads(_case("backends").stdout)
    found = {b["name"]: b["available"] for b in data["backends"]}
    assert found["XnnpackBackend"] is True
    assert "libexecutorch_backend_xnnpack.so" in data["libraries"] and data["failed_libraries"] == {}
    table = _case("backends table")
    assert table.returncode == 0 and "XnnpackBackend" in table.stdout and "available" in table.stdout


def test_bench_json_and_plot():
    data = json.loads(_slow("bench").stdout)
    rows = data["rows"]
    assert [(r["dtype"], r["size"]) for r in rows] == [("float32", 16), ("float32", 4096), ("float16", 16), ("float16", 4096)]
    for r in rows:
        assert r["kernel"] == "aten::add.out" and r["error"] is None
        for side in ("etops", "aten", "etops_zero", "aten_zero"):
            assert 0 < r[side]["min"] <= r[side]["median"], (side, r[side])
            assert len(r[side]["samples"]) == 3
        assert r["ratio"]["median"] > 0 and r["agree"] is True
    assert data["threads"]["torch"] == data["threads"]["executorch"] >= 1
    with open(PLOT, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(PLOT) > 10_000


def test_bench_all_ranks_and_writes_reports():
    proc = _slow("bench all")
    assert "aten::add.out" in proc.stdout
    with open(REPORT) as f:
        md = f.read()
    assert md.startswith("## ExecuTorch / ATen") and "| `aten::add.out` |" in md
    with open(os.path.splitext(REPORT)[0] + ".json") as f:
        data = json.load(f)
    names = {r["kernel"] for r in data["rows"]}
    assert names == {n for n in ALL_NAMES if n.startswith("aten::") and "::add.out" in n} == {"aten::add.out"}
    (row,) = data["rows"]
    assert row["etops"]["median"] > 0 and row["aten"]["median"] > 0, row
    assert "OpInfo 'add'" in row["input"]
    assert data["settings"]["budget"] == 240
    assert "1 rows: 1 measured" in proc.stderr


def test_console_script_entry_point():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["etops"] == "etops.cli:main"
    from etops.cli import main

    assert main(["--help"]) == 0


def test_help_lists_the_commands(capsys):
    from etops.cli import main

    assert main([]) == 0
    out = capsys.readouterr().out
    for cmd in ("list", "show", "bench", "threads"):
        assert cmd in out


def test_check_is_the_conformance_command():
    """`etops check` hands its arguments to etops.conformance's command line."""
    _slow("check")
    with open(CHECK_REPORT) as f:
        data = json.load(f)
    assert "aten::add.out" in json.dumps(data)
    bad = _case("bad check option")
    assert bad.returncode == 2
