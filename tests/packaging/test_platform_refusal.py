"""A platform etops cannot build on stops the build at configure time with a
message naming it (cmake/platform.cmake): 32-bit targets (armv7l, i686) and musl.
The check runs alone as a CMake script, with the platform's facts as arguments."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

CHECK = pathlib.Path(__file__).resolve().parents[2] / "cmake" / "platform.cmake"
CMAKE = shutil.which("cmake", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("cmake")


def _check(processor: str, pointer_size: int, c_library: str) -> subprocess.CompletedProcess:
    assert CMAKE is not None, "cmake is installed with the venv's build tools (make install)"
    return subprocess.run([CMAKE, f"-DPROCESSOR={processor}", f"-DPOINTER_SIZE={pointer_size}", f"-DC_LIBRARY={c_library}",
                           "-P", str(CHECK)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("processor, pointer_size, c_library, named", [
    ("armv7l", 4, "glibc", "32-bit ARM"),
    ("i686", 4, "glibc", "i686"),
    ("x86_64", 8, "musl", "musl"),
    ("aarch64", 8, "musl", "musl"),
])
def test_a_platform_etops_cannot_build_on_is_refused_by_name(processor, pointer_size, c_library, named):
    result = _check(processor, pointer_size, c_library)
    message = " ".join(result.stderr.split())
    assert result.returncode != 0 and f"etops cannot build on {processor}" in message and named in message, message


@pytest.mark.parametrize("processor, c_library", [("x86_64", "glibc"), ("aarch64", "glibc"), ("arm64", "")])
def test_the_supported_platforms_pass(processor, c_library):
    result = _check(processor, 8, c_library)
    assert result.returncode == 0, result.stderr
