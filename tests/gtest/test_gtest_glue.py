"""etops gtest's pieces that need no compiler: the functions header generated for a
test's calls (overloads by schema, through the registry by name), a kernel folder's
NativeFunctions.h (kernels by their C++ names), the test files and checkout a path
names, the default kernel set and a kernel file's (by its folder), gtest filters,
the comparison of test files on the base and the edit and why a file did not run."""

from __future__ import annotations

import pytest

import etops
from etops.errors import CheckoutError
from etops.checkout import find_checkout
from etops.gtest import glue, layout
from etops.gtest.run import _filter


@pytest.fixture(scope="module")
def registered():
    return sorted(etops.registry().operator_names)


def test_every_out_overload_of_a_name_becomes_one_cpp_overload(registered):
    header, notes = glue.functions_header([("aten", "add_outf")], [], registered)
    assert '"aten::add.out"' in header and '"aten::add.Scalar_out"' in header
    assert "inline Tensor& add_outf(KernelRuntimeContext& context, const Tensor& a0, const Tensor& a1, const Scalar& a2, Tensor& a3)" in header
    assert 's.call(context, "aten::add.out", 3);' in header  # the return slot holds the out again
    assert "using ::etops_gtest::ops_aten::add_outf;" in header
    assert "namespace torch { namespace executor { namespace aten {" in header
    assert notes == []


def test_multiple_outs_in_place_variants_and_unknown_names(registered):
    header, notes = glue.functions_header([("aten", "max_outf"), ("aten", "copy_"), ("aten", "no_such_op_outf")], [], registered)
    assert "inline std::tuple<Tensor&, Tensor&> max_outf(" in header  # max.dim_max: two outs
    assert "inline Tensor& copy_(KernelRuntimeContext& context, Tensor& a0, const Tensor& a1, bool a2)" in header
    assert notes == ["aten::no_such_op_outf: no out variant of aten::no_such_op in the checkout's kernel YAMLs or the registry"]


def test_a_yaml_func_schema_names_an_operator_torch_does_not_know(tmp_path, registered, user_schemas):
    (tmp_path / "functions.yaml").write_text(
        "- func: etops_glue_test::twice.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  kernels:\n    - arg_meta: null\n      kernel_name: twice_out\n")
    from etops.checkout.layout import read_yaml

    header, notes = glue.functions_header([("etops_glue_test", "twice_outf")], read_yaml(tmp_path / "functions.yaml"), registered)
    assert "twice_outf(KernelRuntimeContext& context, const Tensor& a0, IntArrayRef a1, Tensor& a2)" in header
    assert "namespace torch { namespace executor { namespace etops_glue_test {" in header


def test_test_files_checkout_and_kernel_set(tmp_path):
    test = tmp_path / "co/kernels/test/op_x_test.cpp"
    test.parent.mkdir(parents=True)
    (tmp_path / "co/kernels/test/TestUtil.h").write_text("#pragma once\n")
    test.write_text("#include <executorch/kernels/test/FunctionHeaderWrapper.h>\n#include <executorch/kernels/test/TestUtil.h>\n"
                    "void f() { torch::executor::aten::add_outf(c, a, b, 1, o); torch::executor::aten::copy_ (c, a, b, false); }\n")
    (tmp_path / "co/kernels/test/helper_test.cpp").write_text("")  # not an op test file: folders skip it
    assert layout.test_files([test.parent]) == [test.resolve()]
    with pytest.raises(CheckoutError, match="no such file"):
        layout.test_files([tmp_path / "missing.cpp"])
    checkout = find_checkout(test, provided=layout.is_generated)
    assert checkout == (tmp_path / "co").resolve()
    described = layout.describe(test, checkout, checkout)
    assert described.functions == (("aten", "add_outf"), ("aten", "copy_"))
    assert layout.default_kernel_set(test, checkout) is None  # the checkout defines no set
    for name in ("portable", "optimized"):
        (tmp_path / f"co/kernels/{name}/test").mkdir(parents=True)
        (tmp_path / f"co/kernels/{name}/test/supported_features_def.yaml").write_text("# no override\n")
    assert layout.default_kernel_set(test, checkout) == "optimized"  # kernels/test/: the wheel's set
    own = tmp_path / "co/kernels/portable/test/op_y_test.cpp"
    own.write_text("")
    assert layout.default_kernel_set(own, checkout) == "portable"  # a set's own test folder
    with pytest.raises(CheckoutError, match="--kernel-set nope"):
        layout.features_inputs(checkout, "nope")


def test_reruns_exclude_what_ran_and_keep_the_users_filter():
    assert _filter(None, []) == "*"
    assert _filter(None, ["A.x", "A.y"]) == "*-A.x:A.y"
    assert _filter("A.*", ["A.x"]) == "A.*-A.x"
    assert _filter("A.*-A.slow", ["A.x"]) == "A.*-A.slow:A.x"


def test_against_a_base_pass_to_fail_is_a_regression_and_without_base_every_failure_is():
    """etops dev's comparison of an upstream test file on the base and the edit."""
    from etops.gtest.report import CRASHED, FAILED, PASSED, FileResult, GtestResult, TestResult, against_base

    def run(**statuses):
        return GtestResult([FileResult("op_x_test.cpp", tests=[TestResult(n, s) for n, s in statuses.items()])])

    edit = run(Keeps=PASSED, Breaks=FAILED, AlreadyBroken=FAILED, Dies=CRASHED)
    compared = against_base(run(Keeps=PASSED, Breaks=PASSED, AlreadyBroken=FAILED, Dies=PASSED), edit)
    assert [r["name"] for r in compared["regressions"]] == ["Breaks", "Dies"]
    assert compared["base_failing"] == ["AlreadyBroken"]
    new_operator = against_base(None, edit)  # no base to run: every failing test is the edit's
    assert [r["name"] for r in new_operator["regressions"]] == ["Breaks", "AlreadyBroken", "Dies"]
    assert new_operator["base_failing"] == []


def _checkout_with_sets(root, sets=("portable", "optimized", "quantized")):
    for name in sets:
        (root / f"kernels/{name}/test").mkdir(parents=True, exist_ok=True)
        (root / f"kernels/{name}/test/supported_features_def.yaml").write_text("# no override\n")
    return root


def test_a_kernel_files_kernel_set_is_its_folders(tmp_path):
    co = _checkout_with_sets(tmp_path / "co")
    for folder, expected in (("portable/cpu", "portable"), ("optimized/cpu", "optimized"), ("quantized/cpu", "quantized"),
                             ("portable/cpu/util", "portable"), ("aten/cpu", None)):
        assert layout.kernel_set_of(co / "kernels" / folder / "op_x.cpp", co) == expected, folder
    assert layout.kernel_set_of(tmp_path / "elsewhere/op_x.cpp", co) is None  # out of the checkout: the test's default
    assert layout.tests_of_kernel(co / "kernels/quantized/cpu/op_quantize.cpp", co) == [
        co / "kernels/test/op_quantize_test.cpp", co / "kernels/quantized/test/op_quantize_test.cpp"]
    assert layout.tests_of_kernel(tmp_path / "elsewhere/op_x.cpp", co) == [co / "kernels/test/op_x_test.cpp"]


def test_a_kernel_folders_generated_headers_are_not_looked_for_in_the_checkout(tmp_path):
    co = _checkout_with_sets(tmp_path / "co")
    test = co / "kernels/quantized/test/op_q_test.cpp"
    test.write_text("#include <executorch/kernels/quantized/NativeFunctions.h>\n"
                    "#include <executorch/kernels/portable/Functions.h>\n"
                    "using torch::executor::native::quantize_per_tensor_out;\n"
                    "void f() { torch::executor::native::add_out(c, a, b, 1, o); quantize_per_tensor_out(a, 1, 0, 0, 9, t, o); }\n")
    assert layout.is_generated("executorch/kernels/quantized/NativeFunctions.h")
    assert not layout.is_generated("executorch/kernels/quantized/cpu/embeddingxb.h")
    assert find_checkout(test, provided=layout.is_generated) == co.resolve()  # nothing it includes is missing: the generated headers aside
    described = layout.describe(test, co, co)
    assert described.natives == ("quantize_per_tensor_out", "add_out")
    assert described.generated == (("executorch/kernels/quantized/NativeFunctions.h", "kernels/quantized", "NativeFunctions"),
                                   ("executorch/kernels/portable/Functions.h", "kernels/portable", "Functions"))
    assert layout.default_kernel_set(test, co) == "quantized"
    # the test of a kernel file: it calls one of the file's operators, by <op>_outf or by its kernel's C++ name
    assert layout.calls_any(described, {"quantized_decomposed::quantize_per_tensor.out": "torch::executor::quantize_per_tensor_out"})
    assert layout.calls_any(described, {"aten::add.out": "torch::executor::add_out"})
    assert not layout.calls_any(described, {"quantized_decomposed::add.out": "torch::executor::quantized_add_out"})
    shared = co / "kernels/test/op_add_test.cpp"
    shared.parent.mkdir(parents=True, exist_ok=True)
    shared.write_text("void f() { torch::executor::aten::add_outf(c, a, b, 1, o); }\n")
    assert layout.calls_any(layout.describe(shared, co, co), {"aten::add.out": "torch::executor::opt_add_out"})
    assert not layout.calls_any(layout.describe(shared, co, co), {"quantized_decomposed::add.out": "torch::executor::quantized_add_out"})


def test_native_functions_come_from_the_folders_yaml_with_and_without_a_context(tmp_path, user_schemas):
    from etops.checkout.layout import read_yaml

    (tmp_path / "quantized.yaml").write_text(
        "- func: etops_glue_q::quantize.out(Tensor input, float scale, int zero_point, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)\n"
        "  kernels:\n    - arg_meta: null\n      kernel_name: torch::executor::quantize_out\n")
    (tmp_path / "functions.yaml").write_text(
        "- op: add.out\n  kernels:\n    - arg_meta: null\n      kernel_name: torch::executor::add_out\n")
    quantized, portable = read_yaml(tmp_path / "quantized.yaml"), read_yaml(tmp_path / "functions.yaml")
    texts, notes = glue.native_headers(["quantize_out", "add_out", "missing_out"],
                                       {"kernels/quantized": quantized, "kernels/portable": portable}, quantized + portable)
    q, p = texts["kernels/quantized"], texts["kernels/portable"]
    assert "inline Tensor& quantize_out(KernelRuntimeContext& context, const Tensor& a0, double a1, int64_t a2, ScalarType a3, Tensor& a4)" in q
    assert "inline Tensor& quantize_out(const Tensor& a0, double a1, int64_t a2, ScalarType a3, Tensor& a4) {" in q
    assert '  OwnContext own("etops_glue_q::quantize.out");' in q and "return quantize_out(own.context, a0, a1, a2, a3, a4);" in q
    assert "namespace torch { namespace executor { namespace native {" in q and "add_out" not in q
    assert 's.call(context, "aten::add.out", 3);' in p and "quantize_out" not in p  # each name in its folder's header
    assert notes == ["torch::executor::native::missing_out: no kernel of that name in the checkout's kernel YAMLs"]


def test_test_files_are_compared_one_by_one_and_a_file_not_built_says_why():
    from etops.gtest.build import NO_GOOGLETEST
    from etops.gtest.report import FAILED, PASSED, FileResult, GtestResult, TestResult, against_base, why_not_run

    def run(a_status):
        return GtestResult([FileResult("a_test.cpp", "portable", tests=[TestResult("A.x", a_status), TestResult("A.y", FAILED)]),
                            FileResult("b_test.cpp", "portable", build_error="b_test-1.o: b_test.cpp:3:1: error: 'nope' was not declared\nmore"),
                            FileResult("c_test.cpp", "portable", build_error=NO_GOOGLETEST)])

    out = against_base(run(PASSED), run(FAILED))
    assert [f["file"] for f in out["files"]] == ["a_test.cpp"]
    assert [(r["name"], r["file"]) for r in out["regressions"]] == [("A.x", "a_test.cpp")]
    assert out["base_failing"] == ["A.y"] and out["error"] is None and out["kernel_set"] == "portable"
    assert out["not_run"] == [
        {"file": "b_test.cpp", "why": "does not build: b_test-1.o: b_test.cpp:3:1: error: 'nope' was not declared"},
        {"file": "c_test.cpp", "why": why_not_run(run(PASSED).files[2])}]
    assert out["not_run"][1]["why"].startswith("no googletest (apt-get install googletest")


def test_the_gtest_lines_of_dev_say_why_each_test_file_did_not_run():
    from etops.dev.report import DevResult, FileResult

    gtest = {"file": "kernels/test/op_q_test.cpp", "base": "git", "regressions": [], "base_failing": [],
             "files": [{"file": "kernels/test/op_q_test.cpp", "kernel_set": "quantized", "regressions": [], "base_failing": [],
                        "counts": {"passed": 3, "failed": 0, "skipped": 0, "crashed": 0}}],
             "not_run": [{"file": "kernels/quantized/test/op_q_test.cpp", "why": "does not build: x.cpp:1:1: error: boom"}]}
    result = DevResult([FileResult("kernels/quantized/cpu/op_q.cpp", gtest=gtest)])
    text = result.text()
    assert "  gtest kernels/test/op_q_test.cpp on the edit: 3 passed [quantized set; " in text
    assert "  gtest kernels/quantized/test/op_q_test.cpp not run: does not build: x.cpp:1:1: error: boom" in text
    assert "**Upstream tests not run**" in result.markdown()
    assert "- `kernels/quantized/test/op_q_test.cpp`: does not build: x.cpp:1:1: error: boom" in result.markdown()
