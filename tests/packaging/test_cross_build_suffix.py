"""A cross build names the extension for the target's CPython: CMakeLists.txt takes the
suffix scikit-build-core passes (SKBUILD_SOABI, from SETUPTOOLS_EXT_SUFFIX) when
FindPython, asking no interpreter of another architecture, leaves it empty. The aarch64
lane's cross build (tests/aarch64/cross_build.sh) relies on it; here a configure of the
real CMakeLists with CMAKE_SYSTEM_NAME set (CMake then cross-compiles) shows it on any
host, with this venv's compilers, executorch and torch."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[2]
CMAKE = shutil.which("cmake", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("cmake")
NINJA = shutil.which("ninja", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("ninja")


def test_a_cross_build_names_the_extension_with_the_suffix_it_is_given(tmp_path):
    assert CMAKE is not None and NINJA is not None, "cmake and ninja come with the venv's build tools (make install)"
    soabi = "cpython-311-lanetarget-linux-gnu"
    result = subprocess.run(
        [CMAKE, "-S", str(SOURCE), "-B", str(tmp_path), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}", "-DCMAKE_SYSTEM_NAME=Linux",
         f"-DPython_EXECUTABLE={sys.executable}", f"-DSKBUILD_SOABI={soabi}", "-DCMAKE_BUILD_TYPE=Release"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    build_rules = (tmp_path / "build.ninja").read_text()
    assert f"_core.{soabi}.so" in build_rules, "the extension is not named with the given suffix"
