"""etops.load_library: a library built with the user's own CMake against the wheel,
and one that would register a kernel twice (refused, interpreter alive)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import etops

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/custom
_BUILT: list = []


@pytest.fixture
def userlibs():
    if not _BUILT:
        cmake = shutil.which("cmake", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        if cmake is None:
            pytest.skip("cmake is not installed")
        out = tempfile.mkdtemp(prefix="etops-userlib-")
        prefix = os.path.join(os.path.dirname(etops._native.executorch_lib_dir()), "lib", "cmake", "executorch")
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        subprocess.run([cmake, "-G", "Ninja", "-S", os.path.join(HERE, "userlib"), "-B", out, f"-DCMAKE_PREFIX_PATH={prefix}"],
                       check=True, capture_output=True, env=env)
        subprocess.run([cmake, "--build", out], check=True, capture_output=True, env=env)
        _BUILT.append(out)
    return _BUILT[0]


def test_load_library_registers_its_kernels(userlibs):
    path = os.path.join(userlibs, "libuserlib.so")
    assert etops.load_library(path) == ["userlib::triple.out"]
    k = etops.registry().get_kernel("userlib::triple.out", schema="userlib::triple.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    assert k(torch.arange(3.0), out=torch.empty(3)).tolist() == [0.0, 3.0, 6.0]
    [origin] = k.origins
    assert origin.kind == "library" and origin.library == path
    assert k.kernels[0].library == path
    assert etops.load_library(path) == ["userlib::triple.out"]  # loading again is a no-op


def test_duplicating_library_refused(userlibs):
    before = list(etops._native.registered_kernels())
    with pytest.raises(etops.DuplicateKernelError, match=r"aten::add.out \(fallback\)"):
        etops.load_library(os.path.join(userlibs, "libduplib.so"))
    # still here, nothing registered (not even the library's other kernel)
    assert list(etops._native.registered_kernels()) == before
    assert "duplib::fine.out" not in etops.registry()
    assert etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
