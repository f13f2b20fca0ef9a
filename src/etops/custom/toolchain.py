"""The toolchain custom kernels build with: the installed executorch wheel's headers,
libraries and CMake flags, the C++ compiler and Ninja, and the cache folder compiled
kernel sets live in. Found once per process. May import the core only."""

from __future__ import annotations

import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from ..cache_files import cache_root
from ..errors import BuildError



def executorch_root() -> Path:
    from .. import _native

    return Path(_native.executorch_lib_dir()).parent


_cache_dir: Path | None = None


def cache_dir() -> Path:
    """Where compiled kernel sets live: ``set_cache_dir()``, else $ETOPS_CACHE_DIR
    itself, else the ``kernels`` folder of etops' cache (cache_files.cache_root:
    $XDG_CACHE_HOME/etops, ~/.cache/etops)."""
    if _cache_dir is not None:
        return _cache_dir
    env = os.environ.get("ETOPS_CACHE_DIR")
    if env:
        return Path(env)
    return cache_root() / "kernels"


def set_cache_dir(path) -> None:
    """Sets the kernel cache directory for this process (None: back to the default)."""
    global _cache_dir
    _cache_dir = Path(path) if path is not None else None


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    cxx_id: str  #: path + size + mtime of the real compiler binary
    ninja: str
    defines: tuple[str, ...]
    include_dirs: tuple[str, ...]
    lib_dir: str
    libs: tuple[str, ...]
    executorch_version: str


_toolchain: Toolchain | None = None
_toolchain_lock = threading.Lock()


def _cmake_defines(config: Path, lib_dir: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The compile definitions the wheel's CMake config gives its consumers, and the
    libraries that go with them (the thread pool library with ET_USE_THREADPOOL)."""
    from .. import _native

    text = config.read_text()
    defines: list[str] = []
    m = re.search(r"set\(\s*EXECUTORCH_COMPILE_DEFINITIONS\s+([^)]*)\)", text)
    if m:
        defines += [t.strip('"') for t in m.group(1).split()]
    for m in re.finditer(r'INTERFACE_COMPILE_DEFINITIONS\s*\n?\s*"([^"]*)"', text):
        defines += [d for d in m.group(1).split(";") if d and "$" not in d]
    libs = ["executorch"]
    # The config turns ET_USE_THREADPOOL on exactly when the thread pool library shipped.
    if "ET_USE_THREADPOOL" in text and (lib_dir / _native.shared_library_name("executorch_threadpool")).exists():
        defines.append("ET_USE_THREADPOOL")
        libs.append("executorch_threadpool")
    else:
        defines = [d for d in defines if d != "ET_USE_THREADPOOL"]
    return tuple(dict.fromkeys(defines)), tuple(libs)


def _find_ninja() -> str:
    try:
        import ninja  # the PyPI package

        path = os.path.join(ninja.BIN_DIR, "ninja")
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    found = shutil.which("ninja")
    if found is None:
        raise BuildError("etops needs Ninja to compile kernels: pip install ninja")
    return found


def toolchain() -> Toolchain:
    global _toolchain
    if _toolchain is not None:
        return _toolchain
    with _toolchain_lock:
        if _toolchain is not None:
            return _toolchain
        root = executorch_root()
        lib_dir = root / "lib"
        config = lib_dir / "cmake" / "executorch" / "executorch-config.cmake"
        defines, libs = _cmake_defines(config, lib_dir)
        cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
        if cxx is None:
            raise BuildError("etops needs a C++17 compiler to compile kernels (set CXX or install g++)")
        real = os.path.realpath(shutil.which(cxx) or cxx)
        st = os.stat(real)
        try:
            from importlib.metadata import version

            et_version = version("executorch")
        except Exception:  # noqa: BLE001
            et_version = "unknown"
        include = root / "include"
        _toolchain = Toolchain(
            cxx=cxx,
            cxx_id=f"{real}:{st.st_size}:{st.st_mtime_ns}",
            ninja=_find_ninja(),
            defines=defines,
            include_dirs=(str(include), str(include / "executorch/runtime/core/portable_type/c10")),
            lib_dir=str(lib_dir),
            libs=libs,
            executorch_version=et_version,
        )
        return _toolchain

