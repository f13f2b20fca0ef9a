"""Sources and helpers shared by the custom-kernel tests, and their fixtures (test
modules import them: a conftest.py here would shadow tests/conftest.py, which other
test modules import by name). State is module-global, so a kernel compiles once per
session whichever test asks first."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch

import etops
from etops import custom

#: The folder etops was imported from: fresh interpreters import the same etops.
SRC = str(Path(etops.__file__).resolve().parent.parent)

TWICE_SCHEMA = "twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"

#: y = k * x for float tensors; `K` replaced per variant
SCALE_SOURCE = r"""
Tensor& scale_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == out.scalar_type() && x.numel() == out.numel(), InvalidArgument, out);
  ET_SWITCH_FLOAT_TYPES(x.scalar_type(), ctx, "scale.out", CTYPE, [&]() {
    const CTYPE* in = x.const_data_ptr<CTYPE>();
    CTYPE* o = out.mutable_data_ptr<CTYPE>();
    for (ssize_t i = 0; i < x.numel(); i++) o[i] = K * in[i];
  });
  return out;
}
"""


def _example_source() -> str:
    """The scaled-add kernel of examples/custom_kernel_pte.py: the tests build the
    same source the example shows."""
    import runpy

    example = Path(__file__).resolve().parents[3] / "examples" / "custom_kernel_pte.py"
    return runpy.run_path(str(example), run_name="custom_kernel_pte")["SOURCE"]


SCALED_ADD_SOURCE = _example_source()


#: aten::add.out that adds 100 more and counts its calls
INSTRUMENTED_ADD = r"""
#include <atomic>
static std::atomic<long> g_calls{0};
extern "C" __attribute__((visibility("default"))) long instrumented_add_calls() { return g_calls.load(); }
Tensor& instrumented_add(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other,
                         const Scalar& alpha, Tensor& out) {
  g_calls++;
  ET_KERNEL_CHECK(ctx, self.scalar_type() == ScalarType::Float && self.numel() == out.numel() &&
                  other.numel() == out.numel(), InvalidArgument, out);
  const float* a = self.const_data_ptr<float>();
  const float* b = other.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = a[i] + b[i] + 100.0f;
  return out;
}
"""


def registry_snapshot():
    return list(etops._native.registered_kernels())


def run_fresh(code: str, cache_path, timeout: float = 180, extra_path: str = "",
              dies_of_a_fault: bool = False) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter using the kernel cache `cache_path`.
    `dies_of_a_fault`: the code ends its process with a SIGSEGV on purpose, which
    AddressSanitizer (make test-asan) must not report as a finding of its own."""
    env = dict(os.environ)
    if dies_of_a_fault and "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":handle_segv=0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, extra_path, env.get("PYTHONPATH", "")) if p)
    env["ETOPS_CACHE_DIR"] = str(cache_path)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env)


_THREAD_RUNS: dict = {}


def a_thread_ending_run(cache_path, name: str, source: str, function: str,
                        dies_of_a_fault: bool = False) -> subprocess.CompletedProcess:
    """Registers `source` as kernel `name` (x, *, out) in a fresh interpreter, calls
    it once and prints "survived" after: what that interpreter did, run once per
    kernel and kept (the tests asking different things of the same death share it)."""
    key = (str(cache_path), name, source, function, dies_of_a_fault)
    if key not in _THREAD_RUNS:
        _THREAD_RUNS[key] = run_fresh(f"""
            import torch, etops
            etops.register_kernel({name!r}, {source!r}, function={function!r},
                                  schema="{name.split('::')[1]}(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
            etops.registry().get_kernel({name!r})(torch.ones(1), out=torch.empty(1))
            print("survived")
        """, cache_path, dies_of_a_fault=dies_of_a_fault)
    return _THREAD_RUNS[key]


def assert_a_thread_ends_the_process(cache_path, name: str, source: str, function: str, says: tuple,
                                     dies_of_a_fault: bool = False) -> None:
    """Registers `source` as kernel `name` (x, *, out) in a fresh interpreter and
    calls it: the kernel's worker thread must end the process, which must name the
    kernel and print every one of `says` on stderr."""
    result = a_thread_ending_run(cache_path, name, source, function, dies_of_a_fault)
    assert result.returncode != 0 and "survived" not in result.stdout
    for text in (name, *says):
        assert text in result.stderr, (text, result.stderr[-2000:])


_CACHE: list = []


@pytest.fixture
def cache():
    """One kernel cache directory for the whole test session (made on first use),
    empty of kernels. Its precompiled preludes are the default cache's (its prelude
    folder a link to that one): a prelude is the toolchain's headers, the same for
    every cache, so each check file neither makes one again (1.5 s of CPU) nor compiles
    its first kernels without it."""
    if not _CACHE:
        shared = custom.cache_dir() / "prelude"
        shared.mkdir(parents=True, exist_ok=True)
        _CACHE.append(Path(tempfile.mkdtemp(prefix="etops-kernel-cache-")))
        (_CACHE[0] / "prelude").symlink_to(shared, target_is_directory=True)
        custom.set_cache_dir(_CACHE[0])
    return _CACHE[0]


_MEMO: dict = {}


@pytest.fixture
def scaled_add(cache):
    """mylib::scaled_add as a custom op (torch op + ExecuTorch kernel), made once."""
    if "scaled_add" not in _MEMO:
        _MEMO["scaled_add"] = etops.custom_op("mylib::scaled_add(Tensor a, Tensor b, float alpha) -> Tensor", SCALED_ADD_SOURCE, function="scaled_add_out")
    return _MEMO["scaled_add"]


@pytest.fixture
def export_to_pte():
    """model, example inputs -> .pte bytes (torch.export -> to_edge -> to_executorch)."""

    def export(model, inputs) -> bytes:
        from executorch.exir import to_edge

        return to_edge(torch.export.export(model, inputs)).to_executorch().buffer

    return export


_PTE_DIR: list = []


@pytest.fixture
def run_pte():
    """Loads .pte bytes through executorch.runtime; returns the loaded Method."""
    if not _PTE_DIR:
        _PTE_DIR.append(Path(tempfile.mkdtemp(prefix="etops-pte-")))
    folder = _PTE_DIR[0]
    counter = _COUNTER

    def load(buffer: bytes):
        from executorch.runtime import Runtime

        path = folder / f"program_{next(counter)}.pte"
        path.write_bytes(buffer)
        return Runtime.get().load_program(str(path)).load_method("forward")

    return load


_COUNTER = iter(range(10**9))


@pytest.fixture
def failures(monkeypatch):
    """The failures (etops._native's CallFailure) the bridge hands the slow path
    during the test, in order; the slow path handles each as before."""
    from etops.slow_path import SLOW_PATH

    seen: list = []
    failed = SLOW_PATH.failed

    def record(kernel, values, failure):
        seen.append(failure)
        return failed(kernel, values, failure)

    monkeypatch.setattr(SLOW_PATH, "failed", record)
    return seen
