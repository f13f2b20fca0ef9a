"""The import-time version guard: etops built against one torch/executorch pair
refuses, with an ImportError naming both pairs and how to rebuild, to load with
another. The mismatch is faked in a fresh interpreter by replacing the recorded
build versions before etops is imported (no second torch is installed)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

FAKE_BUILD = '''
import sys, types
info = types.ModuleType("etops._native.build_info")
info.TORCH_VERSION = {torch!r}
info.EXECUTORCH_VERSION = {executorch!r}
sys.modules["etops._native.build_info"] = info
try:
    import etops
except ImportError as e:
    print("IMPORTERROR", e)
else:
    print("IMPORTED", etops.registry().aten.add.out is not None)
'''


def run_with_build_versions(torch: str, executorch: str) -> str:
    code = FAKE_BUILD.format(torch=torch, executorch=executorch)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


INSTALLED_TORCH = importlib.metadata.version("torch")
INSTALLED_EXECUTORCH = importlib.metadata.version("executorch")


def test_recorded_build_versions_are_the_installed_ones():
    from etops._native import build_info

    assert build_info.TORCH_VERSION == INSTALLED_TORCH
    assert build_info.EXECUTORCH_VERSION == INSTALLED_EXECUTORCH


@pytest.mark.parametrize(
    "built_torch, built_executorch",
    [("2.99.0", INSTALLED_EXECUTORCH), (INSTALLED_TORCH, "0.9.0")],
    ids=["torch", "executorch"],
)
def test_other_versions_raise_import_error_naming_both_pairs(built_torch, built_executorch):
    out = run_with_build_versions(built_torch, built_executorch)
    assert out.startswith("IMPORTERROR"), out
    assert f"built against torch {built_torch}, executorch {built_executorch}" in out, out
    assert f"has torch {INSTALLED_TORCH}, executorch {INSTALLED_EXECUTORCH}" in out, out
    assert f"pip install torch=={built_torch} executorch=={built_executorch}" in out, out
    assert "--no-build-isolation" in out, out


def test_matching_versions_import():
    out = run_with_build_versions(INSTALLED_TORCH, INSTALLED_EXECUTORCH)
    assert out == "IMPORTED True", out
