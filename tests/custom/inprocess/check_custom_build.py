"""Compiling kernels from source: call vs torch, compile errors on the user's lines,
the cache (checked by the build log), the wheel's compile definitions."""

from __future__ import annotations

import json
import os

import pytest
import torch
from custom_helpers import SCALE_SOURCE, TWICE_SCHEMA, cache, registry_snapshot, run_fresh  # noqa: F401

import etops
from etops import custom


_TWICE: list = []


@pytest.fixture
def twice(cache):
    if not _TWICE:
        _TWICE.append(etops.register_kernel("ctest::twice.out", SCALE_SOURCE.replace("K *", "2 *"), schema=TWICE_SCHEMA))
    return _TWICE[0]


def test_compiled_kernel_matches_torch(twice):
    x = torch.randn(3, 5)
    out = torch.empty_like(x)
    assert twice(x, out=out) is out
    torch.testing.assert_close(out, 2 * x)
    # doubles, through the registry's attribute spelling
    xd = x.double()
    torch.testing.assert_close(etops.registry().ctest.twice.out(xd, out=torch.empty_like(xd)), 2 * xd)
    assert twice.kernel is etops.registry().get_kernel("ctest::twice.out")


def test_handle_describes_the_build(twice):
    assert twice.origin["kind"] == "custom"
    assert os.path.exists(os.path.join(twice.build_dir, "kernels.so"))
    [origin] = twice.kernel.origins
    assert origin.kind == "custom" and origin.source_hash == twice.source_hash and origin.build_dir == twice.build_dir
    assert "custom" in origin.describe()


def test_compile_error_points_at_user_line(cache):
    before = registry_snapshot()
    source = "\n".join([
        "Tensor& broken_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {",
        "  float* o = out.mutable_data_ptr<float>();",
        "  this_is_not_declared(o);",
        "  return out;",
        "}",
    ])
    with pytest.raises(etops.BuildError) as info:
        etops.register_kernel("ctest::broken.out", source, schema="broken.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    err = info.value
    assert [(d[0], d[1]) for d in err.diagnostics if d[3] == "error"] == [("<source>", 3)]
    assert "<source>:3:" in str(err) and "this_is_not_declared" in str(err)
    assert "wrappers.cpp" not in str(err)
    assert registry_snapshot() == before
    assert "ctest::broken.out" not in etops.registry()


def test_signature_mismatch_names_expected_signature(cache):
    source = "Tensor& sig_out(KernelRuntimeContext& ctx, const Tensor& x, float wrong, Tensor& out) { return out; }"
    with pytest.raises(etops.BuildError) as info:
        etops.register_kernel("ctest::sig.out", source, schema="sig.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    assert "Tensor& sig_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out)" in str(info.value)


def test_error_in_a_source_file_maps_to_its_path(cache, tmp_path):
    path = tmp_path / "my_kernel.cpp"
    path.write_text("// a comment\nTensor& f_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {\n  return nope;\n}\n")
    with pytest.raises(etops.BuildError) as info:
        etops.register_kernel("ctest::fromfile.out", sources=[path], schema="fromfile.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    assert (str(path), 3) in [(d[0], d[1]) for d in info.value.diagnostics]


def test_several_sources_and_flags(cache, tmp_path):
    helper = tmp_path / "helper.cpp"
    helper.write_text("float helper_scale() { return SCALE; }\n")
    main = r"""
float helper_scale();
Tensor& multi_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = helper_scale() * in[i];
  return out;
}
"""
    h = etops.register_kernel("ctest::multi.out", main, sources=[helper], cflags=["-DSCALE=7.0f"],
                              schema="multi.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    try:
        x = torch.randn(4)
        torch.testing.assert_close(h(x, out=torch.empty(4)), 7 * x)
        with open(os.path.join(h.build_dir, "build.ninja")) as f:
            assert f.read().count(": cxx ") == 2  # one edge per translation unit
    finally:
        h.deregister()


def test_second_registration_compiles_nothing(twice, cache):
    """Same source in a new process: the cache answers; Ninja's log and etops' build
    log are untouched (no compiler started)."""
    ninja_log = os.path.join(twice.build_dir, ".ninja_log")
    build_log = os.path.join(twice.build_dir, "build.log")
    before = (open(ninja_log).read(), open(build_log).read())
    result = run_fresh(
        f"""
        import json, etops
        from custom_helpers import SCALE_SOURCE, TWICE_SCHEMA
        h = etops.register_kernel("ctest::twice.out", SCALE_SOURCE.replace("K *", "2 *"), schema=TWICE_SCHEMA)
        import torch
        assert torch.equal(h(torch.ones(2), out=torch.empty(2)), torch.full((2,), 2.0))
        print(json.dumps([h.origin["compiled"], h.build_dir]))
        """,
        cache,
        extra_path=os.path.dirname(__file__),
    )
    assert result.returncode == 0, result.stderr
    compiled, build_dir = json.loads(result.stdout.strip().splitlines()[-1])
    assert compiled is False and build_dir == twice.build_dir
    assert (open(ninja_log).read(), open(build_log).read()) == before
    # and in this process too
    again = custom.build.build(*_same_set(twice))
    assert again.compiled is False


def _same_set(handle):
    from etops.custom.build import Source
    from etops.custom.codegen import KernelSpec

    spec = KernelSpec("ctest::twice.out", etops.registry().get_kernel("ctest::twice.out")._schema, "scale_out")
    return [Source("<source>", SCALE_SOURCE.replace("K *", "2 *"))], [spec]


def test_compile_definitions_come_from_the_wheel_config():
    tc = custom.toolchain()
    assert "C10_USING_CUSTOM_GENERATED_MACROS" in tc.defines
    assert "ET_EVENT_TRACER_ENABLED" in tc.defines
    threadpool = os.path.exists(os.path.join(tc.lib_dir, "libexecutorch_threadpool.so"))
    assert ("ET_USE_THREADPOOL" in tc.defines) == threadpool
    assert any(d.endswith("portable_type/c10") for d in tc.include_dirs)
    assert os.path.basename(tc.ninja) == "ninja"
