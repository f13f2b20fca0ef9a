"""etops.checkout.layout.read_yaml: a kernel YAML is parsed again only when it
changed (a --watch round reads the same one each time)."""

from __future__ import annotations

import os

from etops.checkout import layout as checkout


def test_a_kernel_yaml_is_parsed_again_only_when_it_changed(tmp_path, monkeypatch):
    path = tmp_path / "functions.yaml"
    path.write_text("- op: add.out\n  kernels:\n    - arg_meta: null\n      kernel_name: torch::executor::add_out\n")
    parsed = []
    real = checkout._parse_yaml
    monkeypatch.setattr(checkout, "_parse_yaml", lambda p: parsed.append(p) or real(p))
    first = checkout.read_yaml(path)
    assert [(e.op, e.function) for e in first] == [("aten::add.out", "torch::executor::add_out")]
    assert checkout.read_yaml(path) == first and len(parsed) == 1
    path.write_text(path.read_text() + "- op: mul.out\n  kernels:\n    - arg_meta: null\n      kernel_name: torch::executor::mul_out\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new time even on a coarse clock
    assert [e.op for e in checkout.read_yaml(path)] == ["aten::add.out", "aten::mul.out"] and len(parsed) == 2
