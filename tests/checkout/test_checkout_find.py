"""etops.checkout.find_checkout: one rule for a kernel file (etops dev, --load) and
a kernel test file (etops gtest), and --load building a kernel file without
etops dev's round."""

from __future__ import annotations

import json

import pytest

from etops.checkout import find_checkout
from etops.errors import CheckoutError
from fresh_python import run_python

GENERATED = "executorch/kernels/test/FunctionHeaderWrapper.h"


def _write(path, text=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_kernel_file_of_an_out_of_tree_folder_is_in_the_folder_of_its_yaml(tmp_path):
    kernel = _write(tmp_path / "mine/op_x.cpp", "#include <executorch/runtime/kernel/kernel_includes.h>\n")
    _write(tmp_path / "mine/functions.yaml", "- op: add.out\n")
    assert find_checkout(kernel) == (tmp_path / "mine").resolve()


def test_a_kernel_file_under_kernels_set_is_in_the_checkout_above(tmp_path):
    kernel = _write(tmp_path / "co/kernels/portable/cpu/op_x.cpp")
    _write(tmp_path / "co/kernels/portable/functions.yaml", "- op: add.out\n")
    assert find_checkout(kernel) == (tmp_path / "co").resolve()


def test_a_file_is_in_the_folder_where_its_checkout_includes_resolve(tmp_path):
    _write(tmp_path / "co/kernels/portable/cpu/util/helper_etops_only.h")
    kernel = _write(tmp_path / "co/elsewhere/deep/op_x.cpp", "#include <executorch/kernels/portable/cpu/util/helper_etops_only.h>\n")
    assert find_checkout(kernel) == (tmp_path / "co").resolve()
    lost = _write(tmp_path / "lost/op_y.cpp", "#include <executorch/kernels/portable/cpu/util/helper_etops_only.h>\n")
    with pytest.raises(CheckoutError, match="no folder above it holds executorch/kernels/portable/cpu/util/helper_etops_only.h"):
        find_checkout(lost)


def test_a_test_file_is_in_the_folder_holding_kernels_its_generated_headers_aside(tmp_path):
    test = _write(tmp_path / "co/kernels/test/op_x_test.cpp", f"#include <{GENERATED}>\n")
    with pytest.raises(CheckoutError, match="FunctionHeaderWrapper.h"):  # a header no checkout holds
        find_checkout(test)
    assert find_checkout(test, provided=lambda include: include == GENERATED) == (tmp_path / "co").resolve()


def test_a_root_given_is_the_checkout_and_must_exist(tmp_path):
    kernel = _write(tmp_path / "op_x.cpp")
    assert find_checkout(kernel, tmp_path) == tmp_path.resolve()
    with pytest.raises(CheckoutError, match="--root"):
        find_checkout(kernel, tmp_path / "missing")


def test_load_builds_a_kernel_file_through_the_checkout_package_not_devs_round(tmp_path):
    """--load FILE.cpp locates, builds and swaps the file (etops.checkout.install)
    and loads nothing of etops.dev, gtest or conformance (no judge, timing or
    upstream test run for a file only loaded)."""
    kernel = _write(tmp_path / "op_x.cpp")
    result = run_python(
        f"""
        import json, sys
        from etops.checkout import install, load

        class Target:
            names = ["aten::add.out"]

        class Installed:
            target = Target()
            replaced = {{}}
            def restore(self):
                print("restored")

        asked = []
        install.locate = lambda path, root, yaml, helpers: asked.append(("locate", str(path), tuple(helpers))) or Target()
        install.build_target = lambda target: asked.append(("build",)) or "library"
        install.install = lambda target, library: asked.append(("install", library)) or Installed()
        names = load.load_all([{str(kernel)!r}])
        load.unload_all()
        print(json.dumps({{"names": names, "asked": asked,
                          "tools": sorted(m for m in sys.modules if m.split(".")[:2] in (["etops", "dev"], ["etops", "gtest"], ["etops", "conformance"]))}}))
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == "restored"
    found = json.loads(lines[-1])
    assert found["names"] == ["aten::add.out"]
    assert found["asked"] == [["locate", str(kernel), []], ["build"], ["install", "library"]]
    assert found["tools"] == []
