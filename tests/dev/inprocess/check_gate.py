"""``etops dev`` as a gate, on the miniature checkout committed to a git repository
the test makes (the base is the file at HEAD): a write past the out is a memory
finding with exit 1 and the JSON written; a kernel that never returns on one input
is a hang finding, the other cases judged; an unchanged file exits 0 with "no
difference" at every size; a 2x slowdown with --max-slowdown 1.3 exits 1; a
fault only the timing's inputs reach is a finding of the timing's process; an
int16 accumulator that overflows is a finding of the numerics axis only; an
overload no OpInfo sample reaches gets derived cases; a fresh cache plans the
same cases as a warm one; reproducers load the file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import etops
import minicheckout
from etops.cli import main as cli_main
from scripts import Scripts

CPU = "kernels/portable/cpu"


@pytest.fixture()
def repo(tmp_path):
    return minicheckout.git_checkout(tmp_path)


#: runs the script argv[1] as python would, then says whether torch._dynamo was imported (torch's meta
#: kernels import it at their first call); -P: the test's folder (its checkout named executorch) not on sys.path
RUN_TELLING_DYNAMO = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
finally:
    print("torch._dynamo imported:", "torch._dynamo" in sys.modules)
"""


def _dev(args, capsys):
    code = cli_main(["dev", *args])
    return code, capsys.readouterr().out


def test_a_write_past_the_out_is_a_memory_finding_and_the_json_is_written(repo, tmp_path, capsys):
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.OUT_OF_BOUNDS))
    out = tmp_path / "dev.json"
    # --opinfo mul: that OpInfo's cases (the other OpInfos reaching mul.out find the same write)
    code, printed = _dev([str(kernel), "--dtype", "float32", "--no-timing", "--budget", "20", "--opinfo", "mul", "--json",
                          str(out)], capsys)
    assert code == 1, printed
    data = json.loads(out.read_text())
    [f] = data["files"]
    assert f["base"]["kind"] == "git" and not f["base"]["unchanged"]
    memory = [x for x in f["findings"] if x["category"] == "memory"]
    assert memory and memory[0]["gating"] and not memory[0]["in_base"], f["findings"]
    assert memory[0]["memory"] == "write past the end of argument 'out'"
    assert "the edit (the base agrees)" in memory[0]["side"]
    assert "new findings (1)" in printed and "memory (write past the end of argument 'out')" in printed
    # the reproducer builds the edited file before its call and exits 1 while the bug stands; torch's
    # answers dev learned come with the file (etops.dev.load): its call asks torch's meta kernels nothing
    script = memory[0]["reproducer"]
    assert script and "etops.dev.load" in open(script).read()
    run = subprocess.run([sys.executable, "-P", "-c", RUN_TELLING_DYNAMO, script], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr[-2000:]
    assert "torch._dynamo imported: False" in run.stdout, run.stdout


def test_a_kernel_that_never_returns_on_one_input_is_a_hang_finding_and_the_rest_is_judged(repo, tmp_path, capsys,
                                                                                            monkeypatch):
    """op_mul.cpp spins forever when its first operand is (5, 1): each such case's task
    process is killed once past the case's limit (a 2 s floor here: ATen's time for
    these calls is far below it), replaced, and the rest of the task judged there. The
    hang is a gating finding naming that input and the limit (text, JSON, markdown);
    the edit gets as many cases as the base; the reproducer exits 1 while the plant
    stands and 0 once it is removed. --opinfo mul: the cases of that OpInfo alone
    (five OpInfos reach mul.out with that input: each hung case spins for the limit)."""
    monkeypatch.setenv("ETOPS_CASE_TIMEOUT_FLOOR", "2")
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.SPINS_ON_ONE_SHAPE))
    out, md = tmp_path / "dev.json", tmp_path / "dev.md"
    code, printed = _dev([str(kernel), "--dtype", "float32", "--no-timing", "--opinfo", "mul", "--json", str(out),
                          "--markdown", str(md)], capsys)
    assert code == 1, printed
    [f] = json.loads(out.read_text())["files"]
    assert f["sources"] == {"aten::mul.out": ["mul"]}, f["sources"]  # no other OpInfo's, no generated case
    gating = [x for x in f["findings"] if x["gating"]]
    [hang] = gating
    assert (hang["category"], hang["kind"], hang["in_base"], hang["limit_seconds"]) == ("hang", "hang", False, 2.0), hang
    assert hang["inputs"] == "Tensor[5, 1]:float32, Tensor[5]:float32" and hang["cases"] >= 1
    assert f["cases"]["aten::mul.out"] == f["base_cases"]["aten::mul.out"] > hang["cases"]  # every other case judged
    assert "new findings (1):" in printed and "hang: mul.out does not return within 2 s" in printed
    assert "- hang: mul.out does not return within 2 s" in md.read_text()
    script = hang["reproducer"]
    assert script and "etops.dev.load" in open(script).read()
    with Scripts(tmp_path) as scripts:  # each run as `python SCRIPT` runs it, torch and etops imported once
        code, stdout, stderr = scripts.run(script)
        assert code == 1 and "did not return within 2.0 s" in stderr, stdout + stderr[-2000:]
        kernel.write_text(minicheckout.MUL)  # the plant removed: the call returns in time
        code, stdout, stderr = scripts.run(script)
        assert code == 0 and "returned within 2.0 s" in stdout, stdout + stderr[-2000:]


def test_watch_carries_on_after_a_memory_bug_and_states_the_wheel_flags(repo, tmp_path):
    """--watch with the kernel isolated and guarded (the default): a write past the
    out is a memory finding each round, the watch process lives on to the next save,
    and each round says the flags it compiled with (the wheel's). The OpInfo mul's cases
    alone (opinfos=: the other OpInfos reaching mul.out find the same write)."""
    from etops.checkout.install import WHEEL_CFLAGS

    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.OUT_OF_BOUNDS))
    rounds = []

    def on_round(result):
        rounds.append(result)
        if len(rounds) == 1:
            kernel.write_text(kernel.read_text() + "\n// saved again\n")

    last = etops.dev.watch(kernel, on_round, rounds=2, poll=0.05, idle_timeout=60, dtypes=["float32"], timing=False,
                           budget=20, opinfos=["mul"])
    try:
        assert len(rounds) == 2
        for result in rounds:
            [f] = result.files
            assert result.exit_code == 1 and "memory" in [x.category for x in f.new_findings], f.findings
            assert f.build["flags"] == list(WHEEL_CFLAGS)
            assert "wheel flags -O3 -DNDEBUG -ffunction-sections -fdata-sections" in result.text()
    finally:
        last.restore()


def test_watch_carries_on_after_a_kernel_that_never_returns(repo, monkeypatch):
    """--watch: a kernel spinning forever on one input is a hang finding each round
    (its task processes killed and replaced), and the watch process lives on to the
    next save; the second round knows the base's times of the first (the cases of
    the OpInfo mul alone, as in the test above)."""
    from etops.conformance import case_clock

    monkeypatch.setenv("ETOPS_CASE_TIMEOUT_FLOOR", "2")
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.SPINS_ON_ONE_SHAPE))
    rounds = []

    def on_round(result):
        rounds.append((result, case_clock.known_base()))
        if len(rounds) == 1:
            kernel.write_text(kernel.read_text() + "\n// saved again\n")

    last = etops.dev.watch(kernel, on_round, rounds=2, poll=0.05, idle_timeout=60, dtypes=["float32"], timing=False,
                           dim_orders=False, opinfos=["mul"])
    try:
        assert len(rounds) == 2
        for result, _known in rounds:
            [f] = result.files
            assert result.exit_code == 1 and [x.category for x in f.new_findings] == ["hang"], f.findings
            assert f.cases["aten::mul.out"] == f.base_cases["aten::mul.out"] and f.sources == {"aten::mul.out": ["mul"]}
        assert not rounds[0][1] and rounds[1][1]  # the base's kernel times: known from the first round on
    finally:
        last.restore()
        case_clock.know_base({})


def test_an_edit_that_reads_tensors_as_contiguous_is_a_dim_order_finding(repo, tmp_path, capsys):
    """The dim-order axis is on by default: the edit drops op_mul.cpp's dim-order
    checks, so channels-last or transposed inputs (which the base refuses) are read
    as if contiguous: silently wrong, a new finding of that layout (exit 1)."""
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.IGNORES_DIM_ORDER))
    out = tmp_path / "dev.json"
    code, printed = _dev([str(kernel), "--dtype", "float32", "--no-timing", "--budget", "30", "--json", str(out)], capsys)
    assert code == 1, printed
    [f] = json.loads(out.read_text())["files"]
    assert set(f["layout_cases"]) == {"channels-last", "transposed"}
    assert sum(v["cases"]["aten::mul.out"] for v in f["layout_cases"].values()) > 0, f["layout_cases"]
    gating = [(x["layout"], x["category"]) for x in f["findings"] if x["gating"]]
    assert ("transposed", "wrong") in gating or ("channels-last", "wrong") in gating, f["findings"]
    assert all(layout is not None for layout, _ in gating), gating  # contiguous inputs: as the base
    assert "dim-order axis (etops.layout('preserve')): channels-last mul.out" in printed
    assert "inputs with transposed inputs" in printed or "inputs with channels-last inputs" in printed


def test_an_int16_accumulator_that_overflows_is_a_numerics_finding_missed_without_the_axis(repo, tmp_path, capsys):
    """The numerics axis is on by default for an accumulating operator: op_sum.cpp
    accumulating int16 in int16 passes OpInfo's small samples, and overflows once the
    axis offsets them (ATen accumulates in int64): a new wrong finding of the
    transform, exit 1; with --no-numerics the same edit exits 0; unchanged, 0. The
    OpInfo sum's samples alone (--opinfo; eleven other OpInfos reach sum.IntList_out)."""
    kernel = repo / CPU / "op_sum.cpp"
    # --no-generated: the generated cases find the overflow too (their value classes); the axis is judged here
    args = [str(kernel), "--dtype", "int16", "--no-timing", "--no-dim-orders", "--no-generated", "--budget", "120",
            "--opinfo", "sum"]
    code, printed = _dev([*args, "--json", str(tmp_path / "clean.json")], capsys)
    assert code == 0, printed
    [clean] = json.loads((tmp_path / "clean.json").read_text())["files"]
    assert clean["numerics_cases"]["offset"]["cases"]["aten::sum.IntList_out"] > 0, clean["numerics_cases"]
    kernel.write_text(minicheckout.sum_source(overflowing=True))
    code, printed = _dev([*args, "--json", str(tmp_path / "planted.json")], capsys)
    assert code == 1, printed
    [f] = json.loads((tmp_path / "planted.json").read_text())["files"]
    gating = [x for x in f["findings"] if x["gating"]]
    assert gating and all(x["layout"].startswith("numerics:") for x in gating), f["findings"]
    assert ("numerics:offset", "wrong", ["int16"]) in [(x["layout"], x["category"], x["input_dtypes"]) for x in gating]
    assert set(f["numerics_cases"]) == {"offset", "cancel", "huge", "tiny", "long"}
    assert "numerics axis (inputs transformed): offset sum.IntList_out" in printed
    assert "transformed by the numerics axis (offset)" in printed
    code, printed = _dev([*args, "--no-numerics", "--json", str(tmp_path / "without.json")], capsys)
    assert code == 0, printed  # OpInfo's samples as they are sum to far less than max(int16)
    [f] = json.loads((tmp_path / "without.json").read_text())["files"]
    assert f["numerics_cases"] == {} and f["cases"]["aten::sum.IntList_out"] > 0
    assert "numerics axis" not in printed


def test_an_unchanged_file_exits_0_with_no_difference_at_every_size(repo, tmp_path, capsys):
    out = tmp_path / "dev.json"
    md = tmp_path / "dev.md"
    code, printed = _dev([str(repo / CPU / "op_mul.cpp"), "--dtype", "float32", "--no-isolate", "--json", str(out), "--markdown",
                          str(md)], capsys)
    assert code == 0, printed
    [f] = json.loads(out.read_text())["files"]
    assert f["base"]["unchanged"] and f["cases"]["aten::mul.out"] == f["base_cases"]["aten::mul.out"] > 0
    assert [r["label"] for r in f["timing"]] == ["small", "medium", "large"]
    assert all(r["verdict"] == "no difference" for r in f["timing"]), [(r["label"], r.get("vs_builtin")) for r in f["timing"]]
    assert all(r["threads"] == 1 for r in f["timing"])
    assert "| `mul.out` | small |" in md.read_text() and "verdict: the edit introduces no finding" in printed


def test_a_2x_slowdown_beyond_max_slowdown_exits_1(repo, capsys):
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.SLOWDOWN))
    code, printed = _dev([str(kernel), "--no-check", "--max-slowdown", "1.3"], capsys)
    assert code == 1, printed
    assert "slowdown finding" in printed
    code, printed = _dev([str(kernel), "--no-check"], capsys)  # without the threshold: a timing line, exit 0
    assert code == 0, printed


def test_a_kernel_that_faults_on_a_timing_input_is_a_finding_not_a_dead_process(repo, tmp_path, capsys):
    """The timing runs the edit unguarded, in a forked process: an abort only the
    large size reaches ends that process; the round reports it (exit 1, JSON written)."""
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.ABORTS_WHEN_LARGE))
    out = tmp_path / "dev.json"
    code, printed = _dev([str(kernel), "--no-check", "--json", str(out)], capsys)
    assert code == 1, printed
    [f] = json.loads(out.read_text())["files"]
    [row] = [r for r in f["timing"] if r.get("crashed")]
    assert "SIGABRT" in row["error"] and row["kernel"] == "aten::mul.out", row
    assert "timing mul.out all sizes: the timing's process" in printed and "<- finding" in printed


def test_a_kernel_spinning_on_a_timing_input_is_a_finding_and_the_round_ends(repo, capsys, monkeypatch):
    """The timing calls the edit unguarded, in a process of its own per operator: a
    kernel that never returns on the large size is killed after the timing's limit
    (ETOPS_TIMING_LIMIT), a finding (exit 1), and the round ends."""
    # the spinning process burns a core until then (the small and medium sizes before it: under 1 s)
    monkeypatch.setenv("ETOPS_TIMING_LIMIT", "5")
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.SPINS_WHEN_LARGE))
    code, printed = _dev([str(kernel), "--no-check", "--no-gtest"], capsys)
    assert code == 1, printed
    assert "did not end within 5 s" in printed and "<- finding" in printed, printed


def test_a_fault_on_the_timing_input_is_a_finding_of_that_size_not_a_missing_sample(repo, capsys):
    """A fault the call path traps while the timing sizes its input (the edit's
    kernel on the large size only) is that size's finding, not "no sample"."""
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.FAULTS_WHEN_LARGE))
    code, printed = _dev([str(kernel), "--no-check"], capsys)
    assert code == 1, printed
    assert "timing mul.out large: the edit's kernel faulted on the timing input of about 1M elements" in printed
    assert "SIGSEGV" in printed and "no sample" not in printed
    assert "timing mul.out small (float32" in printed  # the sizes it does not fault on are timed


def test_an_overload_no_opinfo_reaches_gets_derived_cases(repo):
    result = etops.dev(repo / CPU / "op_floor_divide.cpp", timing=False, dtypes=["float32"])
    try:
        [f] = result.files
        assert f.error is None, f.error
        assert f.ops == ["aten::floor_divide.Scalar_out"] and f.replaced == []  # no kernel in the wheel
        assert f.cases["aten::floor_divide.Scalar_out"] > 0, result.text()
        assert any(s.startswith("derived:aten::floor_divide.Scalar_out|aten::floor_divide.out|") for s in f.sources[f.ops[0]])
        assert result.exit_code in (0, 1) and "cases" in result.text()
    finally:
        result.restore()


def test_a_fresh_cache_plans_the_same_cases_as_a_warm_one(tmp_path, monkeypatch):
    from etops.conformance import opinfos as runner
    from etops.dev import cases

    everything = runner.opinfos()
    # a small OpInfo universe: discovery over it is quick (its cache key is its own)
    subset = {k: v for k, v in everything.items() if k in ("mul", "add", "sub", "isclose", "nn.functional.rms_norm", "abs", "cat")}
    monkeypatch.setattr(runner, "_OPS", subset)
    names = ["aten::mul.out", "aten::add.Scalar_out"]
    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path / "fresh"))
    fresh = cases.plan(names, ["float32"])
    assert list((tmp_path / "fresh").glob("conformance-discovery-*.json"))  # computed here, then cached
    warm = cases.plan(names, ["float32"])
    assert fresh == warm and all(fresh[n] for n in names)
    assert any(t["opinfo"] == "isclose" for t in fresh["aten::add.Scalar_out"])  # reached through a decomposition


def test_changed_finds_edited_kernels_and_those_including_an_edited_header(repo):
    from etops.dev.changes import changed_kernel_files

    assert changed_kernel_files(repo, "HEAD").files == []
    (repo / CPU / "op_mul.cpp").write_text(minicheckout.MUL + "\n// edited\n")
    assert [p.name for p in changed_kernel_files(repo, "HEAD").files] == ["op_mul.cpp"]
    header = repo / CPU / "util/mini_broadcast.h"
    header.write_text(header.read_text() + "\n// edited\n")
    change = changed_kernel_files(repo, "HEAD")
    assert sorted(p.name for p in change.files) == ["op_add.cpp", "op_floor_divide.cpp", "op_mul.cpp"]
    assert "1 header" in change.notes[0] and "op_add.cpp" in change.notes[1]


def test_changed_leads_from_a_helper_source_to_the_kernels_using_it(repo):
    """A changed helper source (no operator of the YAML) is never a kernel file: it
    leads to the kernel files including its header, which are built with it."""
    from etops.dev.changes import changed_kernel_files

    minicheckout.commit_helper(repo)
    helper = repo / CPU / "util/mini_times.cpp"
    helper.write_text(helper.read_text() + "// edited\n")
    change = changed_kernel_files(repo, "HEAD")
    [kernel] = change.files
    assert kernel.name == "op_mul.cpp" and change.helpers == {kernel: [helper.resolve()]}
    assert "1 helper source" in change.notes[0] and "util/mini_times.cpp" in change.notes[1]


def test_dev_changed_judges_the_kernels_of_a_changed_header_and_helper_not_the_helper(repo, tmp_path, capsys):
    """`etops dev --changed` after a no-op edit of the util header and of a helper
    source: the three kernel files including the header are judged (the helper is
    built with the one using it), the helper is not, and the round exits 0; a bug
    planted in the helper then is a finding of the kernel using it (exit 1), its
    reproducer building the helper too. The cases of the operators' own OpInfos
    (--opinfo): which files are judged, and with which helper, is the point."""
    minicheckout.commit_helper(repo)
    header = repo / CPU / "util/mini_broadcast.h"
    header.write_text(header.read_text().replace("inline bool is_float", "// a comment\ninline bool is_float"))
    helper = repo / CPU / "util/mini_times.cpp"
    helper.write_text("// a comment\n" + minicheckout.TIMES_SOURCE)
    out = tmp_path / "dev.json"
    args = ["--changed", "--root", str(repo), "--dtype", "float32", "--no-timing", "--no-gtest", "--no-dim-orders",
            "--budget", "30", "--opinfo", "add", "--opinfo", "mul", "--opinfo", "floor_divide", "--json", str(out)]
    code, printed = _dev(args, capsys)
    assert code == 0, printed
    files = json.loads(out.read_text())["files"]
    assert sorted(f["path"].rsplit("/", 1)[-1] for f in files) == ["op_add.cpp", "op_floor_divide.cpp", "op_mul.cpp"]
    assert all(f["error"] is None for f in files), [f["error"] for f in files]
    [mul] = [f for f in files if f["path"].endswith("op_mul.cpp")]
    assert mul["helpers"] == [str(helper.resolve())] and mul["cases"]["aten::mul.out"] > 0
    assert all(not f["helpers"] for f in files if f is not mul)
    assert "mini_times.cpp implements none" not in printed and "did not build" not in printed

    helper.write_text(minicheckout.TIMES_SOURCE.replace(*minicheckout.DOUBLED_PRODUCT))
    subprocess.run(["git", "-C", str(repo), "checkout", "--", str(header)], check=True)
    md = tmp_path / "dev.md"
    code, printed = _dev([*args, "--markdown", str(md)], capsys)
    assert code == 1, printed
    # the markdown: the text's verdict, its findings, no absolute path
    comment = md.read_text()
    assert comment.splitlines()[0] == "### etops dev " + printed.strip().splitlines()[-1]
    # the report's lines (those streamed before it start with the round's seconds)
    found = [line.strip() for line in printed.splitlines() if "recorded case" in line and not line.startswith("  [")]
    assert found and all(f"- {line}" in comment.splitlines() for line in found)
    assert "`kernels/portable/cpu/op_mul.cpp`" in comment and str(repo) not in comment
    [mul] = json.loads(out.read_text())["files"]
    assert mul["path"].endswith("op_mul.cpp") and mul["base"]["kind"] == "git"
    [wrong] = [x for x in mul["findings"] if x["gating"]]
    assert wrong["category"] == "wrong", wrong
    assert wrong["reproducer"], wrong
    run = subprocess.run([sys.executable, wrong["reproducer"]], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr


def test_a_finding_labels_its_inputs_by_their_own_dtype():
    from etops.conformance.clusters import group
    from etops.conformance.runner import CaseResult
    from etops.dev.verdict import Finding
    from etops.dev.text import finding_line

    # an OpInfo variant's task at float32 whose samples are float64 (softmax.with_dtype's way)
    case = CaseResult("aten::_softmax.out", "aten::_softmax", "softmax.with_dtype", "float32", 2, 0, "mismatch",
                      message="Tensor-likes are not close!", inputs="Tensor[5, 5]:float64, 1, False", verdict="wrong")
    [cluster] = group([case])
    line = finding_line(Finding(cluster, "wrong", False, "git"))
    assert "on float64 inputs" in line and "float32" not in line, line


def test_a_round_names_each_phase_on_the_status_line_of_a_terminal(repo, monkeypatch):
    """Every phase of a round goes through etops.dev.progress: the builds, discovery,
    the recording of the judge's cases and its passes with their tasks counted, the timing (the status line, on a
    terminal; a Status that records what it is told stands in for it). The OpInfo mul's cases alone."""
    import io

    from etops.dev import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    told: list = []

    class Recording(progress.Status):
        def phase(self, label):
            told.append(("phase", label))
            return super().phase(label)

        def count(self, done, total):
            told.append(("count", done, total))
            super().count(done, total)

    monkeypatch.setattr(progress, "STATUS", Recording(Terminal(), thread=False))
    result = etops.dev(repo / CPU / "op_mul.cpp", dtypes=["float32"], budget=20, gtest=False, opinfos=["mul"])
    try:
        assert result.exit_code == 0, result.text()
    finally:
        result.restore()
    phases = [t[1] for t in told if t[0] == "phase"]
    for wanted in ("op_mul.cpp", "building the edit", "building the base", "discovery: the OpInfos reaching its operators",
                   "judging", "recording the cases", "base tasks", "timing"):
        assert wanted in phases, phases
    assert any(p.startswith("edit +") and p.endswith(" tasks") for p in phases), phases
    counts = [t for t in told if t[0] == "count"]
    assert counts and all(0 <= done <= total for _, done, total in counts)
    assert any(done == total > 0 for _, done, total in counts)
