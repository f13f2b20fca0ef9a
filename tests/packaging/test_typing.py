"""The typed API: py.typed and the C extension's stub ship with the package, and the
stub names exactly what the compiled extension has. (mypy itself runs in make lint.)"""

from __future__ import annotations

import ast
import pathlib

import pytest

import etops
from etops import _native
from etops.errors import BuildError

PACKAGE = pathlib.Path(etops.__file__).parent


def test_py_typed_and_stubs_are_installed():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "_native" / "_core.pyi").is_file()
    assert (PACKAGE / "_native" / "build_info.pyi").is_file()


def test_the_stub_names_what_the_extension_has():
    stub = ast.parse((PACKAGE / "_native" / "_core.pyi").read_text())
    names = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    names.discard("_TensorMeta")  # the stub's own alias
    compiled = {name for name in dir(_native._core) if not name.startswith("__")}
    assert names == compiled, (sorted(names - compiled), sorted(compiled - names))


def test_missing_ninja_is_a_build_error(monkeypatch):
    """A missing Ninja is the clear BuildError (make lint found a NameError there)."""
    import builtins
    import importlib
    import shutil

    toolchain = importlib.import_module("etops.custom.toolchain")  # the package exports a function of that name

    real_import = builtins.__import__

    def no_ninja_package(name, *args, **kwargs):
        if name == "ninja":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ninja_package)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(BuildError, match="Ninja"):
        toolchain._find_ninja()
