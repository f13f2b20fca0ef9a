"""Register, override, deregister: key-specialised selection, every refusal with the
registry unchanged, restoring exactly, 10,000 cycles, concurrent calls, the
executorch.runtime spelling."""

from __future__ import annotations

import threading

import pytest
import torch
from custom_helpers import INSTRUMENTED_ADD, SCALE_SOURCE, TWICE_SCHEMA, cache, failures, registry_snapshot, run_fresh  # noqa: F401

import etops
from etops import custom

_MEMO: dict = {}


@pytest.fixture
def scale_kernels(cache):
    """ctest::scale.out: a fallback (x2) and a float32 1-D specialisation (x3)."""
    if not _MEMO:
        schema = TWICE_SCHEMA.replace("twice", "scale")
        _MEMO["fallback"] = etops.register_kernel("ctest::scale.out", SCALE_SOURCE.replace("K *", "2 *"), schema=schema)
        _MEMO["special"] = etops.register_kernel("ctest::scale.out", SCALE_SOURCE.replace("K *", "3 *"), [(torch.float32, 1)])
    return _MEMO["fallback"], _MEMO["special"]


@pytest.fixture
def instrumented(cache):
    """The address of a compiled aten::add.out replacement (adds 100 more)."""
    if "add" not in _MEMO:
        h = etops.register_kernel("ctest::instrumented_add.out", INSTRUMENTED_ADD,
                                  schema=str(etops.registry().aten.add.out._schema).replace("aten::add.out", "ctest::instrumented_add.out"))
        _MEMO["add"] = h
    return _MEMO["add"]


def test_key_specialised_kernel_is_picked(scale_kernels):
    fallback, special = scale_kernels
    assert special.key == "v1/6;0|6;0|6;0"  # x, out, and out again as the return slot
    op = etops.registry().ctest.scale.out
    x = torch.arange(4.0)
    torch.testing.assert_close(op(x, out=torch.empty(4)), 3 * x)  # float32 1-D: specialised
    xd = x.double()
    torch.testing.assert_close(op(xd, out=torch.empty(4, dtype=torch.double)), 2 * xd)  # fallback
    x2 = torch.ones(2, 2)
    torch.testing.assert_close(op(x2, out=torch.empty(2, 2)), 2 * x2)  # other rank: fallback
    explained = op.explain(x, out=torch.empty(4))
    assert "kernel key: v1/6;0|6;0|6;0" in explained
    assert "runs: the custom kernel registered for exactly this key" in explained and special.build_dir in explained
    assert "fallback kernel (no kernel is registered for this key)" in op.explain(xd, out=torch.empty(4, dtype=torch.double))
    kinds = {o.key: o.kind for o in op.origins}
    assert kinds == {None: "custom", "v1/6;0|6;0|6;0": "custom"}


def test_key_forms():
    schema = etops.registry().aten.add.out._schema
    assert etops.kernel_key([(torch.float32, 2)], schema) == "v1/6;0,1|6;0,1|6;0,1|6;0,1"
    assert etops.kernel_key([(torch.float32, (0, 2, 3, 1))] * 3, schema) == "v1/6;0,2,3,1|6;0,2,3,1|6;0,2,3,1|6;0,2,3,1"
    assert etops.kernel_key("v1/6;0,1|6;0,1") == "v1/6;0,1|6;0,1"
    assert etops.kernel_key(None) is None


@pytest.mark.parametrize(
    "name, impl_kind, key, error",
    [
        ("aten::add.out", "pointer", None, etops.DuplicateKernelError),  # built-in fallback exists
        ("not a name", "pointer", None, etops.RegistrationError),
        ("ctest::x.out", "pointer", "v2/garbage", etops.RegistrationError),
        ("ctest::x.out", "pointer", "v1/6;0,0", etops.RegistrationError),  # not a dim order
        ("ctest::x.out", "pointer", "v1/99;0", etops.RegistrationError),  # no such dtype
        ("aten::add.out", "pointer", [(torch.float32, 1)] * 2, etops.RegistrationError),  # wrong tensor count
        ("aten::add.out", "pointer", [("float", 1)], etops.RegistrationError),
        ("ctest::x.out", 0, None, etops.RegistrationError),  # null pointer
        ("ctest::x.out", object(), None, etops.RegistrationError),
        ("ctest::noschema.out", "source", None, etops.RegistrationError),  # no schema known
    ],
)
def test_registration_errors_leave_registry_unchanged(name, impl_kind, key, error):
    missing = etops._native._core.reg_missing_fn()
    impl = {"pointer": missing, "source": "Tensor& f(KernelRuntimeContext& ctx, Tensor& out) { return out; }"}.get(impl_kind, impl_kind) if isinstance(impl_kind, str) else impl_kind
    before = registry_snapshot()
    with pytest.raises(error):
        etops.register_kernel(name, impl, key, schema="x.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)" if name == "ctest::x.out" else None)
    assert registry_snapshot() == before


def test_duplicate_of_custom_kernel_refused(scale_kernels):
    before = registry_snapshot()
    with pytest.raises(etops.DuplicateKernelError, match="already has a kernel for key v1/6;0"):
        etops.register_kernel("ctest::scale.out", scale_kernels[1].address, [(torch.float32, 1)])
    assert registry_snapshot() == before


def test_override_errors_leave_registry_unchanged(instrumented):
    before = registry_snapshot()
    with pytest.raises(etops.KernelNotFoundError):
        etops.override("aten::no_such_op.out", instrumented.address)
    with pytest.raises(etops.KernelNotFoundError, match="no kernel for"):
        etops.override("aten::add.out", instrumented.address, "v1/6;0|6;0|6;0|6;0")
    with pytest.raises(etops.RegistrationError):
        etops.override("aten::add.out", instrumented.address, "bad key")
    assert registry_snapshot() == before


def test_override_builtin_and_restore(instrumented):
    reg = etops.registry()
    add = reg.aten.add.out
    a = torch.ones(3)
    original = registry_snapshot()
    with etops.override("aten::add.out", instrumented.address) as ov:
        assert ov.active
        torch.testing.assert_close(add(a, a, out=torch.empty(3)), torch.full((3,), 102.0))
        [origin] = add.origins
        assert origin.kind == "built-in" and origin.overridden and origin.overrides == ("pointer",)
    assert not ov.active
    assert registry_snapshot() == original
    torch.testing.assert_close(add(a, a, out=torch.empty(3)), torch.full((3,), 2.0))
    assert not add.origins[0].overridden



def test_one_handle_for_registrations_and_overrides(instrumented):
    """register_kernel and override return the same kind of handle: each undoes its
    own edit (undo(), or leaving with), and refuses the other's."""
    x = torch.ones(2)
    schema = TWICE_SCHEMA.replace("twice", "undone")
    with etops.register_kernel("ctest::undone.out", SCALE_SOURCE.replace("K *", "2 *"), schema=schema) as h:
        assert isinstance(h, etops.KernelHandle) and not h.overrides and h.active
        with pytest.raises(etops.RegistrationError, match="restore"):
            h.restore()
        assert h(x, out=torch.empty(2)).tolist() == [2.0, 2.0]
    assert not h.active and "ctest::undone.out" not in etops.registry()
    original = registry_snapshot()
    ov = etops.override("aten::add.out", instrumented.address)
    assert isinstance(ov, etops.Override) and isinstance(ov, etops.KernelHandle) and ov.overrides and ov.active
    with pytest.raises(etops.RegistrationError, match="deregister"):
        ov.deregister()
    assert ov.previous(x, x, out=torch.empty(2)).tolist() == [2.0, 2.0]  # the built-in it replaced
    ov.undo()
    assert not ov.active and registry_snapshot() == original

#: aten::add.out (1-D float) whose out says how it arrived: 1 where the out is
#: STATIC, 2 where it is DYNAMIC_BOUND
DYNAMISM_PROBE = r"""
Tensor& dynamism_probe(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other,
                       const Scalar& alpha, Tensor& out) {
  float v = out.shape_dynamism() == ::executorch::runtime::TensorShapeDynamism::STATIC ? 1.0f : 2.0f;
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = v;
  return out;
}
"""

#: aten::add.out (1-D float) that shrinks its out by one element, then adds
SHRINKING_ADD = r"""
Tensor& shrinking_add(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other,
                      const Scalar& alpha, Tensor& out) {
  executorch::aten::SizesType n = static_cast<executorch::aten::SizesType>(out.size(0) - 1);
  ET_KERNEL_CHECK(ctx, ::executorch::runtime::resize_tensor(out, ArrayRef<executorch::aten::SizesType>(&n, 1)) == Error::Ok,
                  InvalidArgument, out);
  const float* a = self.const_data_ptr<float>();
  const float* b = other.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = a[i] + b[i];
  return out;
}
"""

#: aten::add.out (1-D float) that grows its out by one element, past its memory
GROWING_ADD = SHRINKING_ADD.replace("shrinking_add", "growing_add").replace("out.size(0) - 1", "out.size(0) + 1")


def _add_like(name, source):
    """A compiled kernel with aten::add.out's schema under ctest::<name>.out."""
    if name not in _MEMO:
        schema = str(etops.registry().aten.add.out._schema).replace("aten::add.out", f"ctest::{name}.out")
        _MEMO[name] = etops.register_kernel(f"ctest::{name}.out", source, schema=schema)
    return _MEMO[name]


def test_outs_whose_shape_torch_fixed_reach_the_kernel_static(cache):
    """As in a program exported with static shapes: an out of the shape torch's checks
    gave it is a STATIC tensor; under an operator torch does not know (no checks) the
    out is DYNAMIC_BOUND, which the kernel may shrink."""
    probe = _add_like("dynamism_probe", DYNAMISM_PROBE)
    a = torch.ones(3)
    with etops.override("aten::add.out", probe.address):
        assert torch.equal(etops.registry().aten.add.out(a, a, out=torch.empty(3)), torch.full((3,), 1.0))
        assert torch.equal(etops.registry().aten.add.out(a, a, out=torch.empty(3)), torch.full((3,), 1.0))  # remembered
    assert torch.equal(etops.registry().ctest.dynamism_probe.out(a, a, out=torch.empty(3)), torch.full((3,), 2.0))


def test_a_kernel_that_resizes_a_static_out_runs_again_dynamic(cache, failures):
    """A kernel that sizes an out otherwise than torch (ExecuTorch's eval batch norm
    shrinks save_mean to [0]) refuses the STATIC out before computing; etops calls it
    again with the out DYNAMIC_BOUND, as before outs went STATIC, and remembers that
    for the signature."""
    shrinking = _add_like("shrinking_add", SHRINKING_ADD)
    probe = _add_like("dynamism_probe", DYNAMISM_PROBE)
    a = torch.ones(5)  # a signature of its own: the test before remembers (3,)
    add = etops.registry().aten.add.out
    with etops.override("aten::add.out", shrinking.address):
        for _ in range(2):
            out = torch.empty(5)
            with pytest.warns(UserWarning, match="was resized"):  # etops mirrors the shrink, as torch warns
                add(a, a, out=out)
            assert out.shape == (4,) and torch.equal(out, torch.full((4,), 2.0))
    with etops.override("aten::add.out", probe.address):  # the signature stays DYNAMIC_BOUND
        assert torch.equal(add(a, a, out=torch.empty(5)), torch.full((5,), 2.0))
    assert failures == [], "the refused resize was told by its kind and run again in C"


def test_a_resize_executorch_refuses_is_the_failures_kind(cache, failures):
    """ExecuTorch refuses to grow a DYNAMIC_BOUND out past its memory: the bridge
    tells it by where the refusal was logged (TensorImpl's resize), not by its words."""
    _add_like("growing_add", GROWING_ADD)
    a = torch.ones(3)  # under ctest torch has no checks: the out reaches the kernel DYNAMIC_BOUND
    with pytest.raises(etops.KernelError) as caught:
        etops.registry().ctest.growing_add.out(a, a, out=torch.empty(3))
    assert [(f.kind, f.name, f.kernel) for f in failures] == [("resize_refused", "InvalidArgument", "ctest::growing_add.out")]
    assert caught.value.site == f"{failures[0].file}:{failures[0].line}" and str(caught.value).endswith(f"[{caught.value.site}]")


def test_override_restored_on_exception(instrumented):
    original = registry_snapshot()
    with pytest.raises(ZeroDivisionError):
        with etops.override("aten::add.out", instrumented.address):
            1 / 0
    assert registry_snapshot() == original


def test_nested_overrides_restore_out_of_order(instrumented, cache):
    add = etops.registry().aten.add.out
    a = torch.ones(2)
    original = registry_snapshot()
    first = etops.override("aten::add.out", instrumented.address)
    second = etops.override("aten::add.out", lambda self, other, alpha=1, out=None: self * 0 + 7,
                            schema=None)  # a Python kernel on top
    assert add(a, a, out=torch.empty(2)).tolist() == [7.0, 7.0]
    first.restore()  # under the top one: nothing visible changes
    assert add(a, a, out=torch.empty(2)).tolist() == [7.0, 7.0]
    second.restore()  # back to the built-in, not to `first`
    assert registry_snapshot() == original
    assert add(a, a, out=torch.empty(2)).tolist() == [2.0, 2.0]
    second.restore()  # restoring twice is harmless
    assert registry_snapshot() == original


def test_deregister(scale_kernels, cache):
    h = etops.register_kernel("ctest::gone.out", scale_kernels[0].address, schema="gone.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    x = torch.ones(2)
    assert h(x, out=torch.empty(2)).tolist() == [2.0, 2.0]
    kernel = h.kernel
    h.deregister()
    assert not h.active
    assert "ctest::gone.out" not in etops.registry()
    assert "ctest::gone.out" not in etops.registry().operator_names
    with pytest.raises(etops.NoMatchingKernelError):
        kernel(x, out=torch.empty(2))
    with pytest.raises(etops.RegistrationError):
        h.deregister()
    # registering again reuses the freed slot
    again = etops.register_kernel("ctest::gone.out", scale_kernels[0].address)
    assert again.index == h.index
    assert again(x, out=torch.empty(2)).tolist() == [2.0, 2.0]
    etops.deregister("ctest::gone.out")
    assert "ctest::gone.out" not in etops.registry()


def test_runtime_registry_register_kernel(scale_kernels):
    from executorch.runtime import Runtime

    ops = Runtime.get().operator_registry
    h = ops.register_kernel("ctest::rt.out", SCALE_SOURCE.replace("K *", "2 *"), None,
                            schema="rt.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    try:
        assert isinstance(h, etops.KernelHandle)
        assert h.kernel is ops.get_kernel("ctest::rt.out") is etops.registry().get_kernel("ctest::rt.out")
        assert h(torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
        assert "ctest::rt.out" in ops.operator_names
    finally:
        h.deregister()
    assert "ctest::rt.out" not in etops.registry()


def test_override_under_concurrent_calls(instrumented):
    """Threads call aten::add.out while the main thread overrides and restores it:
    every result is the built-in's or the override's, never anything else."""
    add = etops.registry().aten.add.out
    a = torch.ones(64)
    stop = threading.Event()
    bad = []

    def caller():
        out = torch.empty(64)
        while not stop.is_set():
            add(a, a, out=out)
            v = out[0].item()
            if v not in (2.0, 102.0) or not bool((out == v).all()):
                bad.append(v)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(300):
            with etops.override("aten::add.out", instrumented.address):
                pass
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert bad == []
    assert add(a, a, out=torch.empty(64))[0].item() == 2.0


def test_eight_callers_while_a_thread_registers_and_overrides(instrumented):
    """Eight threads call built-in kernels on their own tensors (big enough that the
    GIL is released inside the kernel) while one more thread registers, overrides and
    deregisters custom kernels: no crash, and every result equals ATen's."""
    reg = etops.registry()
    fn = etops._native._core.reg_missing_fn()
    schema = "thr.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
    kernels = [(reg.aten.mul.out, torch.mul), (reg.aten.sub.out, torch.sub), (reg.aten.maximum.out, torch.maximum)]
    stop = threading.Event()
    bad, errors = [], []

    def caller(seed):
        g = torch.Generator().manual_seed(seed)
        op, ref = kernels[seed % len(kernels)]
        a, b = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
        out = torch.empty(256, 256)
        while not stop.is_set():
            op(a, b, out=out)
            if not torch.equal(out, ref(a, b)):
                bad.append(seed)
                return

    def registrar():
        try:
            for i in range(200):
                h = etops.register_kernel("thr::thr.out", fn, schema=schema if i == 0 else None)
                with etops.override("thr::thr.out", instrumented.address):
                    pass
                h.deregister()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    writer = threading.Thread(target=registrar)
    writer.start()
    writer.join()
    stop.set()
    for t in threads:
        t.join()
    assert errors == [] and bad == []
    assert "thr::thr.out" not in reg


def test_10000_cycles_and_full_registry(cache):
    """In a fresh process: 10,000 register/deregister cycles use one slot; filling
    the registry to 2000 raises RegistryFullError (no abort), registry unchanged."""
    result = run_fresh(
        """
        import etops, torch
        core = etops._native._core
        fn = core.reg_missing_fn()
        schema = "cyc.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
        n0 = len(etops._native.registered_kernels())
        for i in range(10000):
            h = etops.register_kernel("cyc::cyc.out", fn, schema=schema if i == 0 else None)
            h.deregister()
        assert len(etops._native.registered_kernels()) == n0 + 1, len(etops._native.registered_kernels())
        handles = []
        try:
            for i in range(core.REG_CAPACITY + 10):
                handles.append(etops.register_kernel(f"cyc::k{i}.out", fn, schema=schema.replace("cyc.out", f"k{i}.out")))
        except etops.RegistryFullError as e:
            print("full after", len(handles), e)
        before = list(etops._native.registered_kernels())
        assert len(before) == core.REG_CAPACITY
        try:
            etops.register_kernel("cyc::one_more.out", fn, schema=schema.replace("cyc.out", "one_more.out"))
        except etops.RegistryFullError:
            pass
        else:
            raise AssertionError("no RegistryFullError")
        assert list(etops._native.registered_kernels()) == before
        handles.pop().deregister()
        etops.register_kernel("cyc::one_more.out", fn, schema=schema.replace("cyc.out", "one_more.out"))
        print("ok")
        """,
        cache,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_register_from_library_symbol(scale_kernels):
    """A kernel given as (library, symbol) and as "path.so:symbol"."""
    lib = scale_kernels[0].origin["library"]
    schema = "sym.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
    h = etops.register_kernel("ctest::sym.out", (lib, "etops_boxed_0"), schema=schema)
    try:
        assert h.origin["kind"] == "symbol"
        assert h(torch.ones(2, 2), out=torch.empty(2, 2)).tolist() == [[2.0, 2.0]] * 2
    finally:
        h.deregister()
    h = etops.register_kernel("ctest::sym.out", f"{lib}:etops_boxed_0")
    h.deregister()
    before = registry_snapshot()
    with pytest.raises(etops.RegistrationError, match="no symbol"):
        etops.register_kernel("ctest::sym.out", (lib, "no_such_symbol"))
    assert registry_snapshot() == before


def test_signature_helper():
    schema = etops.registry().aten.add.out._schema
    assert custom.signature("aten::add.out", schema, "my_add") == (
        "Tensor& my_add(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out)"
    )
