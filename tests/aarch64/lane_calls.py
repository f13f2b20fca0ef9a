"""The aarch64 lane's calls (make test-aarch64, docs/aarch64.md): run by
tests/aarch64/lane.sh inside the arm64 root under qemu-user, never by the x86_64
suite (the file name is not test_*.py). etops installed there from this tree: the
README's snippet, `make demo`'s program, the registry against x86_64's, a kernel compiled from a source
string, a guarded call naming a planted write past an out, the fault trap reading
aarch64 signal frames (address and direction), KernelAborted from an ET_CHECK, and
what aarch64's integer division gives where x86_64's traps."""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess
import sys

import pytest
import torch

import etops
from etops._native import _core

SRC = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(os.environ.get("ETOPS_LANE_OUT", SRC / "build" / "aarch64"))
sys.path[:0] = [str(SRC / "tests" / "docs"), str(SRC / "tests" / "packaging")]

SCHEMA = "{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"

#: out = x + 1; x[0] == -1 reads 16 bytes past a null pointer, -2 writes there,
#: -3 reads and -4 writes the far unmapped address 0xdead0000 (not the null page)
FAULTS = r"""
Tensor& faults_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  volatile float* null_pointer = nullptr;
  volatile float* far = reinterpret_cast<volatile float*>(uintptr_t{0xdead0000});
  if (in[0] == -1.0f) o[0] = null_pointer[4];
  if (in[0] == -2.0f) null_pointer[4] = 1.0f;
  if (in[0] == -3.0f) o[0] = far[0];
  if (in[0] == -4.0f) far[0] = 2.0f;
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: writes one float past the end of its out
PAST_OUT = r"""
Tensor& past_out_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i];
  o[x.numel()] = 1.0f;
  return out;
}
"""

#: out = x + 1 unless x[0] is negative: the kernel's own ET_CHECK_MSG fails
PLANTED_CHECK = r"""
Tensor& planted_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  ET_CHECK_MSG(in[0] >= 0.0f, "planted: x[0] is %f", static_cast<double>(in[0]));
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: out = x / d in int64, truncating (volatile: the division happens)
DIVIDES = r"""
Tensor& divides_out(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& d, Tensor& out) {
  const int64_t* a = x.const_data_ptr<int64_t>();
  const int64_t* b = d.const_data_ptr<int64_t>();
  int64_t* o = out.mutable_data_ptr<int64_t>();
  for (ssize_t i = 0; i < x.numel(); i++) {
    volatile int64_t q = a[i] / b[i];
    o[i] = q;
  }
  return out;
}
"""

_KERNELS: dict = {}


def _kernel(name: str, source: str, schema: str | None = None):
    """The lane's kernel `name` (lane::NAME.out) compiled from `source` once."""
    if name not in _KERNELS:
        _KERNELS[name] = etops.register_kernel(f"lane::{name}.out", source, schema=schema or SCHEMA.format(name=name)).kernel
    return _KERNELS[name]


@pytest.fixture(autouse=True)
def untainted():
    """Each test starts with no kernel marked by an earlier fault (later calls of a
    faulted kernel run guarded)."""
    etops.clear_taint()
    yield
    etops.clear_taint()


def test_the_lane_runs_on_aarch64():
    assert platform.machine() == "aarch64" and sys.maxsize == 2**63 - 1
    assert _core.POOL_ITEMS_SKIPPED == 0  # fault_pool.c unwinds into the pool's frame on x86-64 only


def test_the_readme_snippet_runs():
    from docs_pages import run_page

    run_page(SRC / "README.md")


def test_make_demo_runs():
    """`make demo`'s program (examples/demo.py) in a process of its own, as on an ARM
    machine: the kernel table, then each of its kernels run, compared and timed
    against ATen (a row per kernel, none left untimed)."""
    run = subprocess.run([sys.executable, str(SRC / "examples" / "demo.py")], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("aten::")]
    assert [row.split()[0] for row in rows] == ["aten::add.out", "aten::mm.out", "aten::_softmax.out", "aten::gelu.out",
                                                "aten::max_pool2d_with_indices.out", "aten::native_layer_norm.out",
                                                "aten::cat.out", "aten::nonzero.out"], run.stdout
    assert not [row for row in rows if "not timed" in row], run.stdout
    differences = [float(row[52:66]) for row in rows]  # the "max abs diff" column against ATen
    assert max(differences) < 1e-3, run.stdout
    assert "total" in run.stdout, run.stdout


def test_the_registry_is_x86_64s_kernel_by_kernel(tmp_path):
    from registry_compare import differences, registry
    from etops.cli import main

    here = tmp_path / "registry-aarch64.json"
    saved = sys.stdout
    with open(here, "w") as sys.stdout:
        try:
            assert main(["list", "--json"]) in (0, None)
        finally:
            sys.stdout = saved
    found = differences(registry(here), registry(OUT / "registry-x86_64.json"))
    assert found == [], "\n".join(found)


def test_a_kernel_compiled_from_a_source_string_is_registered_and_called():
    scale = _kernel("triple", "Tensor& triple_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {\n"
                    "  const float* in = x.const_data_ptr<float>(); float* o = out.mutable_data_ptr<float>();\n"
                    "  for (ssize_t i = 0; i < x.numel(); i++) o[i] = 3.0f * in[i];\n  return out;\n}\n")
    x = torch.randn(7)
    assert torch.equal(scale(x, out=torch.empty(7)), 3 * x)
    assert torch.equal(etops.registry().get_kernel("lane::triple.out")(x, out=torch.empty(7)), 3 * x)


def test_a_guarded_call_names_a_planted_write_past_the_out():
    with pytest.raises(etops.KernelCrashed) as caught:
        etops.guard.call(_kernel("past_out", PAST_OUT), torch.arange(6.0), out=torch.empty(6))
    err = caught.value
    assert (err.signal, err.argument, err.access, err.where, err.offset) == ("SIGSEGV", "out", "write", "past the end", 0), str(err)


@pytest.mark.parametrize("marker, address, access", [
    (-1.0, 16, "read"), (-2.0, 16, "write"), (-3.0, 0xDEAD0000, "read"), (-4.0, 0xDEAD0000, "write")])
def test_a_fault_is_trapped_with_its_address_and_direction(marker, address, access):
    faults = _kernel("faults", FAULTS)
    with pytest.raises(etops.KernelCrashed) as caught:
        faults(torch.tensor([marker, 2.0]), out=torch.empty(2))
    err = caught.value
    assert (err.signal, err.address, err.access) == ("SIGSEGV", address, access), str(err)
    assert err.memory_may_be_corrupt == (access == "write")
    assert faults(torch.tensor([1.0, 2.0]), out=torch.empty(2)).tolist() == [2.0, 3.0]  # the next call works


def test_an_et_check_raises_kernel_aborted_and_the_next_call_works():
    planted = _kernel("planted", PLANTED_CHECK)
    with pytest.raises(etops.KernelAborted) as caught:
        planted(torch.tensor([-1.0]), out=torch.empty(1))
    assert caught.value.op == "lane::planted.out" and "planted: x[0] is -1" in str(caught.value)
    assert planted(torch.tensor([1.0]), out=torch.empty(1)).tolist() == [2.0]


def test_integer_division_does_not_trap_on_aarch64():
    """sdiv gives 0 for a zero divisor and INT64_MIN for INT64_MIN / -1 (x86_64's idiv
    raises SIGFPE: KernelCrashed there, tests/custom/inprocess/check_faults.py)."""
    divides = _kernel("divides", DIVIDES, schema="divides.out(Tensor x, Tensor d, *, Tensor(a!) out) -> Tensor(a!)")
    x = torch.tensor([7, -2**63, 9], dtype=torch.long)
    d = torch.tensor([0, -1, 2], dtype=torch.long)
    assert divides(x, d, out=torch.empty(3, dtype=torch.long)).tolist() == [0, -2**63, 4]


def test_the_a64_decoder_reads_loads_and_stores():
    """The fault direction's fallback without an exception syndrome (fault_frame.c)."""
    assert _core.a64_is_write(0xB9400020) == 0   # ldr w0, [x1]
    assert _core.a64_is_write(0xB9000020) == 1   # str w0, [x1]
    assert _core.a64_is_write(0xD503201F) == -1  # nop
