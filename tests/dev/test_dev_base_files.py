"""etops.dev.base.files_at: the contents of many files at a commit from one git
process (the base's file and the checkout headers it includes)."""

from __future__ import annotations

import subprocess

import pytest

from etops.dev.base import files_at
from etops.errors import CheckoutError

def _git(top, *args):
    subprocess.run(["git", "-C", str(top), *args], check=True, capture_output=True)


def test_files_at_a_commit_come_back_in_order_with_none_for_what_was_not_a_file(tmp_path):
    top = tmp_path / "checkout"
    (top / "kernels").mkdir(parents=True)
    (top / "kernels" / "op_a.cpp").write_bytes(b"int a;\n")
    (top / "kernels" / "op_b.h").write_bytes(b"\x00binary\nbytes\n" * 100)
    (top / "empty.h").write_bytes(b"")
    _git(top, "init", "-q")
    _git(top, "add", ".")
    _git(top, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    (top / "kernels" / "op_a.cpp").write_bytes(b"int a = 2;\n")  # the work tree moved on
    got = files_at(top, "HEAD", [top / "kernels" / "op_b.h", top / "kernels" / "new.cpp", top / "kernels",
                                 top / "empty.h", top / "kernels" / "op_a.cpp"])
    assert got == [b"\x00binary\nbytes\n" * 100, None, None, b"", b"int a;\n"]
    with pytest.raises(CheckoutError, match="git cat-file"):
        files_at(tmp_path, "HEAD", [tmp_path / "x"])  # not a git checkout
