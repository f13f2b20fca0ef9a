"""etops' build refuses an executorch layout it cannot use (cmake/executorch_layout.cmake),
naming what is missing, at configure time: a fake install tree without the shared
runtime, and one with 1.4's fused extension and no lib/. Configure only (a few
seconds): the fake package shadows the installed one through PYTHONPATH, which is
where CMakeLists.txt asks Python for executorch's directory."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# cmake is a build requirement of etops (the Makefile installs it into the venv).
CMAKE = shutil.which("cmake", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("cmake") or "cmake"


def fake_executorch(root: pathlib.Path, files: list[str]) -> pathlib.Path:
    """An importable executorch package under root holding these (empty) files."""
    package = root / "site" / "executorch"
    for name in ["__init__.py", *files]:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    return package


def configure(tmp_path: pathlib.Path, package: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(package.parent))
    return subprocess.run(
        [CMAKE, "-S", str(ROOT), "-B", str(tmp_path / "build"), f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_a_tree_without_the_shared_runtime_is_refused_naming_it(tmp_path):
    package = fake_executorch(tmp_path, [
        "include/executorch/runtime/kernel/operator_registry.h",
        "lib/cmake/executorch/executorch-config.cmake",
        "lib/libexecutorch_kernels_optimized.so",
    ])
    done = configure(tmp_path, package)
    assert done.returncode != 0, done.stdout
    message = " ".join(done.stderr.split())
    assert f"etops cannot build against the executorch at {package}: missing lib/libexecutorch.so." in message, done.stderr
    assert "EXECUTORCH_BUILD_SHARED" in message and "docs/installation.md" in message, done.stderr


def test_the_fused_layout_of_1_4_is_refused_as_such(tmp_path):
    package = fake_executorch(tmp_path, [
        "include/executorch/runtime/kernel/operator_registry.h",
        "extension/pybindings/_portable_lib.cpython-311-x86_64-linux-gnu.so",
    ])
    done = configure(tmp_path, package)
    assert done.returncode != 0, done.stdout
    message = " ".join(done.stderr.split())
    assert "fused layout of executorch 1.4 and earlier" in message, done.stderr
    assert "lacks lib/libexecutorch.so, lib/cmake/executorch/executorch-config.cmake" in message, done.stderr
    assert "executorch >=1.5,<1.6" in message, done.stderr


def test_the_installed_wheel_passes_the_check(tmp_path):
    """The same check on the installed executorch (script mode: no compiler, no project)."""
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    assert spec is not None and spec.submodule_search_locations
    installed = list(spec.submodule_search_locations)[0]
    script = tmp_path / "check.cmake"
    script.write_text(
        f'include("{ROOT}/cmake/executorch_layout.cmake")\n'
        f'etops_check_executorch_layout("{installed}")\n'
        'message(STATUS "layout ok")\n'
    )
    done = subprocess.run([CMAKE, "-DCMAKE_SHARED_LIBRARY_SUFFIX=.so", "-P", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "layout ok" in done.stdout
