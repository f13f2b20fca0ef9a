"""etops gtest's pieces that need no compiler: the functions header generated for a
test's calls (overloads by schema, through the registry by name), the test files
and checkout a path names, the default kernel set, gtest filters."""

from __future__ import annotations

import pytest

import etops
from etops.errors import CheckoutError
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
    from etops.dev.checkout import read_yaml

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
    checkout = layout.find_checkout(test)
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
