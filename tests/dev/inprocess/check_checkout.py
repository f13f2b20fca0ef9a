"""What etops dev works out from a kernel file (etops.checkout.layout): the operators a
file defines (functions and macro-defined kernels, with their namespaces), the YAML
entries, the source root; and an out-of-tree folder whose custom_ops.yaml names an
operator with no kernel, which is registered (not overridden) and removed again."""

from __future__ import annotations

import textwrap

import torch

import etops
import minicheckout
from etops.checkout import layout as co


def test_defined_functions_with_namespaces_and_macros():
    text = textwrap.dedent("""
        #include <executorch/runtime/kernel/kernel_includes.h>
        // Tensor& not_me_out(KernelRuntimeContext& ctx, const Tensor& a, Tensor& out) { return out; }
        namespace torch { namespace executor {
        namespace native {
        Tensor& relu_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) {
          ET_KERNEL_CHECK(ctx, helper_out(ctx, in, out), InvalidArgument, out);
          return out;
        }
        Tensor& declared_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out);
        DEFINE_UNARY_UFUNC_REALHBBF16_TO_FLOATHBF16(acos_out, std::acos)
        }  // namespace native
        } }
        Tensor& global_out(executorch::runtime::KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) { return out; }
    """)
    assert co.defined_functions(text) == {
        "relu_out": "torch::executor::native::relu_out",
        "acos_out": "torch::executor::native::acos_out",
        "global_out": "global_out",
    }


def test_yaml_entries_op_and_func(tmp_path):
    yaml = tmp_path / "custom_ops.yaml"
    yaml.write_text(textwrap.dedent("""
        - op: add.out
          kernels:
            - arg_meta: null
              kernel_name: torch::executor::add_out
        - func: my_ops::twice.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
          kernels:
            - arg_meta:
                dtype: float
              kernel_name: my_ops::twice_out
    """))
    add, twice = co.read_yaml(yaml)
    assert (add.op, add.function, add.schema, add.keyed) == ("aten::add.out", "torch::executor::add_out", None, False)
    assert twice.op == "my_ops::twice.out" and twice.schema.startswith("my_ops::twice.out(") and twice.keyed


def test_source_root_and_headers(tmp_path):
    checkout = minicheckout.write(tmp_path, name="not-named-executorch")
    path = checkout / "kernels/portable/cpu/op_mul.cpp"
    assert co.find_checkout(path) == checkout.resolve()
    root = co.include_root(checkout.resolve(), tmp_path / "cache")
    assert (root / "executorch" / "kernels/portable/cpu/util/mini_broadcast.h").is_file()  # a link to the checkout
    assert co.checkout_headers(path, [root, checkout]) == {(checkout / "kernels/portable/cpu/util/mini_broadcast.h").resolve()}
    assert co.find_yamls(path) == [(checkout / "kernels/portable/functions.yaml").resolve()]


OUT_OF_TREE_YAML = """\
- func: etops_devtest::twice.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  kernels:
    - arg_meta: null
      kernel_name: my_kernels::twice_out
"""

OUT_OF_TREE_KERNEL = """\
namespace my_kernels {
Tensor& twice_out(KernelRuntimeContext& ctx, const Tensor& self, Tensor& out) {
  if (self.scalar_type() != ScalarType::Float || out.scalar_type() != ScalarType::Float ||
      executorch::runtime::resize_tensor(out, self.sizes()) != Error::Ok) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  for (ssize_t i = 0; i < self.numel(); ++i) out.mutable_data_ptr<float>()[i] = 2 * self.const_data_ptr<float>()[i];
  return out;
}
}  // namespace my_kernels
"""


def test_an_out_of_tree_operator_with_no_kernel_is_registered():
    folder = minicheckout.stable_folder() / "out-of-tree"
    folder.mkdir(parents=True, exist_ok=True)
    minicheckout.write_file(folder / "custom_ops.yaml", OUT_OF_TREE_YAML)
    minicheckout.write_file(folder / "op_twice.cpp", OUT_OF_TREE_KERNEL)
    minicheckout.write_file(folder / "helpers.cpp", "int helper() { return 1; }\n")  # implements no operator
    result = etops.dev(folder, timing=False)
    try:
        assert [p.rsplit("/", 1)[-1] for p in result.skipped] == ["helpers.cpp"]  # a folder's helper: skipped, not an error
        [f] = result.files
        assert f.error is None, f.error
        assert f.ops == ["etops_devtest::twice.out"] and f.replaced == []
        assert etops.registry().get_kernel("etops_devtest::twice.out").origins[0].kind == "custom"
        assert etops.registry().etops_devtest.twice.out(torch.ones(3), out=torch.empty(3)).tolist() == [2.0, 2.0, 2.0]
        assert "registered (no built-in)" in result.text()
        assert f.no_case() == ["etops_devtest::twice.out"] and "<- no case" in result.text()
        assert result.exit_code == 3  # no evidence does not read as agreement
    finally:
        result.restore()
    assert "etops_devtest::twice.out" not in etops.registry().operator_names


def test_a_kernel_using_a_third_party_header_of_the_checkout_builds(tmp_path):
    """kernels/optimized's FFT kernels include <pocketfft_hdronly.h> from the
    checkout's third-party/pocketfft (a git submodule): etops dev puts the folder on
    the include path; a submodule not checked out is a build error saying so."""
    checkout = minicheckout.write(tmp_path)
    kernel = checkout / "kernels/portable/cpu/op_mul.cpp"
    kernel.write_text("#include <pocketfft_hdronly.h>\n" + minicheckout.MUL.replace(
        "o[i] = x[", "o[i] = pocketfft::one() * x["))
    (checkout / "third-party/pocketfft").mkdir(parents=True)
    empty = etops.dev.dev(kernel, check=False, timing=False, gtest=False)
    try:
        [f] = empty.files
        assert empty.exit_code == 2 and "pocketfft_hdronly.h" in f.error
        assert "third-party/pocketfft is empty" in f.error and "git -C" in f.error and "submodule update --init" in f.error
    finally:
        empty.restore()
    (checkout / "third-party/pocketfft/pocketfft_hdronly.h").write_text(
        "#pragma once\nnamespace pocketfft { inline float one() { return 1.0f; } }\n")
    built = etops.dev.dev(kernel, check=False, timing=False, gtest=False)
    try:
        [f] = built.files
        assert f.error is None and f.ops == ["aten::mul.out"]
        a, b = torch.randn(2, 3), torch.randn(2, 3)
        assert torch.equal(etops.registry().aten.mul.out(a, b, out=torch.empty(2, 3)), a * b)
    finally:
        built.restore()


#: what ATen's headers do (c10::ScalarType, used unqualified in namespace at through
#: `using namespace c10`): a global ScalarType beside it makes the use ambiguous
_ATEN_LIKE = """namespace c10 { enum class ScalarType { Float }; }
namespace at { using namespace c10; inline int float_code() { return static_cast<int>(ScalarType::Float); } }
"""


def test_a_checkout_file_sees_only_the_names_it_declares(tmp_path):
    """A checkout's kernel file is compiled against ExecuTorch's headers alone, as
    its own CMake build compiles it: no short type names at global scope from etops
    (kernels/optimized's op_log_softmax.cpp includes ATen headers that a global
    ScalarType made ambiguous)."""
    checkout = minicheckout.write(tmp_path)
    kernel = checkout / "kernels/portable/cpu/op_mul.cpp"
    kernel.write_text(_ATEN_LIKE + minicheckout.MUL.replace("o[i] = x[", "o[i] = (at::float_code() + 1) * x["))
    built = etops.dev.dev(kernel, check=False, timing=False, gtest=False)
    try:
        [f] = built.files
        assert f.error is None, f.error
        a, b = torch.randn(2, 3), torch.randn(2, 3)
        assert torch.equal(etops.registry().aten.mul.out(a, b, out=torch.empty(2, 3)), a * b)
    finally:
        built.restore()
