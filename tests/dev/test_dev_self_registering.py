"""etops dev on a kernel file that registers its kernels itself (the LLM custom
ops' op_update_cache.cpp, op_sdpa.cpp, ...): its registrations read from the
source, the file built with them captured instead of made (the wheel's LLM library
registered the same names: a second registration aborts the process), each
operator overridden with the kernel the file registered, judged against the
references' math and witness and against the file at git HEAD; a file whose
registrations cannot be swapped in is refused before any build, saying why."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import minillm
from etops.checkout.self_registering import Registration, refusal, registrations, static_registrations

#: the shapes of upstream's registrations (op_fallback.cpp's macro, op_sdpa.cpp's boxed kernel)
SOURCE = '''
Tensor& fallback_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) { return out; }
EXECUTORCH_LIBRARY(
    llama,
    "fallback.out",
    torch::executor::native::fallback_out);
const auto gated_delta_rule_out_registration =
    executorch::runtime::register_kernel(executorch::runtime::Kernel(
        "llama::gated_delta_rule.out",
        gated_delta_rule_out_boxed));
'''

#: what dev keeps fast: the reference cases only, no axis, no timing, no upstream test
QUICK = ["--no-timing", "--no-gtest", "--no-dim-orders", "--no-numerics", "--no-generated"]


def test_registrations_are_read_from_the_source():
    assert registrations(SOURCE) == [Registration("llama::fallback.out", 3, "torch::executor::native::fallback_out"),
                                     Registration("llama::gated_delta_rule.out", 8, "gated_delta_rule_out_boxed")]
    assert static_registrations(SOURCE) == [("llama::fallback.out", 3), ("llama::gated_delta_rule.out", 8)]
    assert registrations("Tensor& add_out(KernelRuntimeContext& ctx) { return out; }") == []


def test_only_registrations_that_cannot_be_swapped_in_are_refused():
    assert refusal("op_fallback.cpp", SOURCE) is None  # swapped in now
    assert refusal("op_add.cpp", "Tensor& add_out(KernelRuntimeContext& ctx);") is None
    keyed = SOURCE + 'static auto r = register_kernel(Kernel("llama::fallback.out", "v1/6;0,1", fn));\n'
    assert "line 11: a registration etops cannot read" in refusal("op_keyed.cpp", keyed)
    named = SOURCE + "EXECUTORCH_LIBRARY(llama, OP_NAME, fn);\n"
    assert "line 11: a registration etops cannot read" in refusal("op_named.cpp", named)
    twice = SOURCE + 'EXECUTORCH_LIBRARY(llama, "fallback.out", other_fallback);\n'
    assert "llama::fallback.out is registered 2 times" in refusal("op_twice.cpp", twice)


def test_a_yaml_given_for_a_self_registering_file_is_refused(tmp_path):
    from etops.checkout.install import locate
    from etops.errors import CheckoutError

    path = minillm.write(tmp_path)
    with pytest.raises(CheckoutError, match="--yaml custom_ops.yaml: op_mini_cache.cpp registers its kernels itself"):
        locate(path, yaml="custom_ops.yaml")


def _dev(path, *more, json_path=None):
    extra = ["--json", str(json_path)] if json_path else []
    return subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *QUICK, *extra, *more],
                          capture_output=True, text=True, timeout=900)


def test_a_planted_bug_in_a_self_registering_file_is_a_new_finding(tmp_path):
    path = minillm.write(tmp_path / "checkout")
    minillm.plant(tmp_path / "checkout")
    proc = _dev(path, json_path=tmp_path / "dev.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "dev.json").read_text())["files"][0]
    new = [f for f in result["findings"] if not f["in_base"]]
    assert [(f["kernel"], f["category"], f["gating"]) for f in new] == [("llama::update_cache.out", "wrong", True)]
    assert "ref:llama::update_cache.out" in new[0]["opinfos"]  # the references' cases (math and witness)


def test_the_upstream_python_tests_next_to_the_file_gate_the_edit_against_the_base(tmp_path):
    path = minillm.write(tmp_path / "checkout", python_test=True)
    minillm.plant(tmp_path / "checkout", minillm.SHORT_CACHE)
    proc = _dev(path, json_path=tmp_path / "dev.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "dev.json").read_text())["files"][0]
    assert [f for f in result["findings"] if not f["in_base"]] == []  # the references' caches hold 64: missed
    tests = result["python_tests"]
    assert tests["base"] == "git" and tests["not_run"] == []
    [ran] = tests["files"]
    assert ran["file"] == f"{minillm.FOLDER}/test_mini_cache.py"
    statuses = {t["test"].rsplit(".", 1)[-1]: (t["base"], t["status"]) for t in ran["tests"]}
    assert statuses == {"test_update_cache_at_start": ("passed", "passed"),
                        "test_update_cache_in_the_middle": ("passed", "failed"),
                        "test_update_cache_of_a_model": ("skipped", "skipped")}
    [regression] = tests["regressions"]
    assert regression["test"].endswith("test_update_cache_in_the_middle") and regression["before"] == "passed"


def test_unchanged_a_self_registering_file_is_swapped_in_judged_and_its_upstream_python_tests_pass(tmp_path):
    """The unchanged file (one run pays the build, the references and the upstream
    Python tests): swapped in and judged against the references and the base, its
    Python tests passing on both, then the base's run loaded from the disk store."""
    path = minillm.write(tmp_path / "checkout", python_test=True)
    path.with_name("op_mini_cache_test.cpp").write_text("// upstream's test of it lives next to it\n")
    proc = _dev(path, json_path=tmp_path / "dev.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "dev.json").read_text())["files"][0]
    assert result["replaced"] == ["llama::update_cache.out"]  # an override of the wheel's kernel, no abort
    assert result["base"]["kind"] == "git" and result["base"]["unchanged"]
    assert result["cases"]["llama::update_cache.out"] == result["base_cases"]["llama::update_cache.out"] > 0
    assert result["findings"] == []
    [not_run] = result["gtest"]["not_run"]  # a C++ test next to it that includes none of its headers
    assert not_run == {"file": f"{minillm.FOLDER}/op_mini_cache_test.cpp", "why": "it compiles no function of op_mini_cache.cpp"}
    assert "aborted" not in proc.stdout + proc.stderr
    tests = result["python_tests"]
    assert tests["regressions"] == [] and tests["counts"] == {"passed": 2, "failed": 0, "skipped": 1}
    proc = _dev(path, json_path=tmp_path / "dev.json")  # a new process: the base's run from the disk store
    assert proc.returncode == 0, proc.stdout + proc.stderr
    learned = json.loads((tmp_path / "dev.json").read_text())["files"][0]["learned"]
    assert learned["base-python-tests"] == {"loaded": 1, "recomputed": 0}
    proc = _dev(path, "--no-python-tests", json_path=tmp_path / "dev.json")
    [not_run] = json.loads((tmp_path / "dev.json").read_text())["files"][0]["python_tests"]["not_run"]
    assert not_run == {"file": f"{minillm.FOLDER}/test_mini_cache.py", "why": "not asked for (--no-python-tests)"}


def test_the_upstream_cpp_test_runs_with_the_edit_and_with_the_base_compiled_in(tmp_path):
    path = minillm.write(tmp_path / "checkout", gtest=True)
    quick = [flag for flag in QUICK if flag != "--no-gtest"]
    proc = subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *quick, "--json", str(tmp_path / "dev.json")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gtest = json.loads((tmp_path / "dev.json").read_text())["files"][0]["gtest"]
    assert gtest["base"] == "git" and gtest["not_run"] == [] and gtest["regressions"] == []
    [ran] = gtest["files"]
    assert ran["file"] == f"{minillm.FOLDER}/op_mini_cache_test.cpp" and ran["counts"]["passed"] == 1
    minillm.plant(tmp_path / "checkout", minillm.SHORT_CACHE)  # the references miss it; the C++ test does not
    proc = subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *quick, "--json", str(tmp_path / "dev.json")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "dev.json").read_text())["files"][0]
    assert [f for f in result["findings"] if not f["in_base"]] == []
    [regression] = result["gtest"]["regressions"]
    assert (regression["name"], regression["status"]) == ("MiniCacheTest.WritesTwoRowsInTheMiddleOfTheCache", "failed")


def test_the_upstream_cpp_test_links_the_objects_the_judge_ran(tmp_path):
    """The test binaries link the edit's and the base's kernel library objects
    (built once, with the wheel's flags on both sides), not the file compiled again
    (at etops gtest's -O0): a file that writes a row late unless optimized passes its
    C++ test only in the optimized object the judge ran."""
    path = minillm.write(tmp_path / "checkout", gtest=True)
    late = minillm.SOURCE.replace("const int64_t first = START;", "#ifdef __OPTIMIZE__\n    const int64_t first = START;\n"
                                  "#else\n    const int64_t first = START + 1;\n#endif")
    path.write_text(late.replace("START", minillm.RIGHT))
    subprocess.run(["git", "-C", str(tmp_path / "checkout"), "-c", "user.name=etops", "-c", "user.email=etops@localhost",
                    "commit", "-qam", "a row late unless optimized"], check=True)
    quick = [flag for flag in QUICK if flag != "--no-gtest"]
    proc = subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *quick, "--json", str(tmp_path / "dev.json")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gtest = json.loads((tmp_path / "dev.json").read_text())["files"][0]["gtest"]
    [ran] = gtest["files"]
    assert ran["counts"]["passed"] == 1 and ran["counts"]["failed"] == 0 and gtest["base_failing"] == []


def test_changed_finds_a_self_registering_file_and_the_one_including_a_changed_header(tmp_path):
    from etops.dev.changes import changed_kernel_files

    path = minillm.write(tmp_path)
    assert changed_kernel_files(path, "HEAD").files == []
    header = path.with_name("op_mini_cache.h")
    header.write_text(minillm.HEADER + "// edited\n")
    change = changed_kernel_files(path, "HEAD")
    assert change.files == [path.resolve()] and change.helpers == {}
    subprocess.run(["git", "-C", str(tmp_path), "checkout", str(header)], check=True)
    minillm.plant(tmp_path)
    assert changed_kernel_files(path, "HEAD").files == [path.resolve()]


def test_a_registration_the_source_does_not_show_fails_the_build(tmp_path):
    path = minillm.write(tmp_path / "checkout")
    # a second registration the source's text does not show (register_kernels of a Kernel defined apart):
    # captured at load, not read from the source
    path.write_text(path.read_text() + """
namespace {
void boxed_too(executorch::runtime::KernelRuntimeContext&, executorch::runtime::Span<executorch::runtime::EValue*>) {}
const executorch::runtime::Kernel too("llama::fallback.out", boxed_too);
const auto too_registered = executorch::runtime::register_kernels({&too, 1});
}  // namespace
""")
    proc = _dev(path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "llama::fallback.out (fallback) was registered besides" in proc.stdout + proc.stderr
