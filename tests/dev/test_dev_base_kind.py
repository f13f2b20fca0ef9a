"""etops.dev.base.Base: the base asked for is a value (HEAD, a revision, the
built-in), never None / False / a string; find_base reads it (a revision git cannot
give is an error, HEAD outside git falls back to the built-in)."""

from __future__ import annotations

import pickle
import subprocess
import types

import pytest

import etops
from etops.dev import Base
from etops.dev.base import find_base
from etops.errors import CheckoutError


def _git(top, *args):
    subprocess.run(["git", "-C", str(top), *args], check=True, capture_output=True)


def _target(path):
    return types.SimpleNamespace(path=path, checkout=path.parent, headers=(), helpers=())


def test_a_base_is_head_a_revision_or_the_built_in():
    assert Base.parse(None) == Base.HEAD and Base.HEAD.git_rev == "HEAD"
    assert Base.parse("none") == Base.BUILT_IN and Base.BUILT_IN.git_rev is None
    assert Base.parse("v1.0") == Base.revision("v1.0") and Base.revision("v1.0").git_rev == "v1.0"
    assert pickle.loads(pickle.dumps(Base.revision("HEAD~2"))) == Base.revision("HEAD~2")
    with pytest.raises(ValueError, match="argument 'rev'"):
        Base.revision("")
    with pytest.raises(ValueError, match="argument 'kind'"):
        Base("tip")


@pytest.mark.parametrize("given", [None, False, "HEAD"])
def test_dev_takes_a_base_and_names_the_argument_otherwise(given):
    with pytest.raises(TypeError, match="argument 'base' must be an etops.dev.Base"):
        etops.dev.run_file("op_x.cpp", base=given)


def test_find_base_reads_the_kind(tmp_path):
    path = tmp_path / "op_x.cpp"
    path.write_text("int x;\n")
    assert find_base(_target(path), Base.HEAD).kind == "built-in"  # not a git checkout: the built-in
    assert find_base(_target(path), Base.BUILT_IN).why == "no git base asked for"
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    assert find_base(_target(path), Base.BUILT_IN).kind == "built-in"
    with pytest.raises(CheckoutError, match="names no commit"):
        find_base(_target(path), Base.revision("no-such-tag"))
