"""``etops gtest`` on a miniature checkout written by the tests (gtest_mini.py): each
outcome a test can have (passed, failed with gtest's message, skipped by a
SupportedFeatures flag with its reason, a death test, a crash named and the tests
after it still run, an operator with no kernel), the kernel reached through the
registry (an override changes the verdict), --kernel-set, --filter, --json and the
exit codes, a clear build error without googletest, a kernel folder's own test
calling kernels by their C++ names (NativeFunctions.h, as kernels/quantized/test/
does), and etops dev running the kernel file's upstream tests on the base and on
the edit with its folder's kernel set, and saying why a test file did not run."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

import etops
import gtest_mini
from googletest_available import needs_googletest
from etops.cli import main as cli_main
from etops.gtest import build as gtest_build



@pytest.fixture(scope="module")
def mini():
    root = Path(tempfile.gettempdir()) / f"etops-test-gtest-{os.getuid()}"
    test = gtest_mini.write(root)
    handle = etops.register_kernel(gtest_mini.OP, gtest_mini.KERNEL, schema=gtest_mini.SCHEMA)
    yield test
    handle.deregister()


def _by_name(result):
    [f] = result.files
    assert f.built, f.build_error
    return {t.name.split(".", 1)[1]: t for t in f.tests}


@needs_googletest
def test_each_outcome_is_reported_by_name(mini):
    result = etops.gtest(mini)
    tests = _by_name(result)
    assert tests["SmallTensor"].status == "passed"
    assert tests["LargeTensor"].status == "failed"
    assert "the last element was not scaled" in tests["LargeTensor"].message
    assert "op_scale_test.cpp:" in tests["LargeTensor"].message  # gtest's file:line
    assert tests["NanFactorDies"].status == "passed"  # the death test saw the abort and its message
    assert tests["DoubleInputs"].status == "skipped"
    assert tests["DoubleInputs"].message == "this kernel set has no double scale"
    assert tests["UnluckyFactorCrashes"].status == "crashed"
    assert "SIGSEGV" in tests["UnluckyFactorCrashes"].message
    assert tests["ZyxAfterTheCrash"].status == "passed"  # the run went on after the crash
    missing = tests["ZzzUnregisteredOperator"]
    assert missing.status == "failed"
    assert "no kernel registered for etops_gtest_mini::unregistered.out" in missing.message
    [f] = result.files
    assert f.kernel_set == "portable"
    assert "googletest from the" in f.googletest
    assert result.exit_code == 1
    text = result.text()
    assert "CRASHED OpScaleOutTest.UnluckyFactorCrashes" in text and "FAILED OpScaleOutTest.LargeTensor" in text


@needs_googletest
def test_the_test_calls_the_kernel_registered_now(mini):
    fixed = etops.override(gtest_mini.OP, gtest_mini.FIXED_KERNEL, schema=gtest_mini.SCHEMA)
    try:
        result = etops.gtest(mini, test_filter="OpScaleOutTest.LargeTensor")
        assert [(t.name, t.status) for t in result.files[0].tests] == [("OpScaleOutTest.LargeTensor", "passed")]
        assert result.exit_code == 0
    finally:
        fixed.restore()
    again = etops.gtest(mini, test_filter="OpScaleOutTest.LargeTensor")
    assert again.files[0].tests[0].status == "failed"


@needs_googletest
def test_the_kernel_set_chooses_the_supported_features(mini):
    result = etops.gtest(mini, kernel_set="plain", test_filter="*DoubleInputs")
    assert result.files[0].kernel_set == "plain"
    assert [t.status for t in result.files[0].tests] == ["passed"]
    wrong = etops.gtest(mini, kernel_set="nope")
    assert "--kernel-set nope" in wrong.files[0].build_error and "plain, portable" in wrong.files[0].build_error
    assert wrong.exit_code == 2


@needs_googletest
def test_command_line_json_and_exit_codes(mini, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli_main(["gtest", str(mini), "--filter", "OpScaleOutTest.SmallTensor:*DoubleInputs", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    [f] = data["files"]
    assert data["exit_code"] == 0 and f["counts"] == {"passed": 1, "failed": 0, "skipped": 1, "crashed": 0}
    assert {t["name"]: t["status"] for t in f["tests"]} == {"OpScaleOutTest.SmallTensor": "passed",
                                                           "OpScaleOutTest.DoubleInputs": "skipped"}
    assert cli_main(["gtest", str(mini), "--filter", "*LargeTensor"]) == 1
    assert "FAILED OpScaleOutTest.LargeTensor" in capsys.readouterr().out
    # no evidence is not a pass: a filter that matches nothing, or only a skipped test, exits 3
    for nothing_ran in ("NoSuchTest.*", "*DoubleInputs"):
        assert cli_main(["gtest", str(mini), "--filter", nothing_ran, "--json", str(out)]) == 3, nothing_ran
        assert json.loads(out.read_text())["exit_code"] == 3
    capsys.readouterr()
    broken = mini.with_name("op_broken_test.cpp")
    broken.write_text(mini.read_text().replace("TEST_F(OpScaleOutTest, SmallTensor) {", "TEST_F(OpScaleOutTest, SmallTensor) { undeclared_thing();"))
    try:
        assert cli_main(["gtest", str(broken), "--json", str(out)]) == 2
        text = capsys.readouterr().out
        assert "NOT BUILT" in text and "undeclared_thing" in text
        assert json.loads(out.read_text())["files"][0]["built"] is False
    finally:
        broken.unlink()


def test_without_googletest_the_build_error_says_how_to_get_one(mini, monkeypatch):
    monkeypatch.setattr(gtest_build, "SYSTEM_GOOGLETEST", ())
    monkeypatch.delenv("ETOPS_GOOGLETEST", raising=False)
    result = etops.gtest(mini)
    [f] = result.files
    assert f.build_error == gtest_build.NO_GOOGLETEST and "apt-get install googletest" in f.build_error
    assert result.exit_code == 2


@needs_googletest
def test_dev_runs_the_files_upstream_test_on_the_base_and_the_edit(mini):
    kernel = mini.parents[1] / "mini" / "op_scale.cpp"  # the kernel file, planted bug and all
    fixed = etops.override(gtest_mini.OP, gtest_mini.FIXED_KERNEL, schema=gtest_mini.SCHEMA)  # the base: no bug
    try:
        result = etops.dev(kernel, check=False, timing=False)
        try:
            [f] = result.files
            assert f.error is None, f.error
            g = f.gtest
            assert g["file"].endswith("op_scale_test.cpp")
            assert [r["name"] for r in g["regressions"]] == ["OpScaleOutTest.LargeTensor"]  # pass -> fail: a finding
            assert "the last element was not scaled" in g["regressions"][0]["message"]
            assert sorted(g["base_failing"]) == ["OpScaleOutTest.UnluckyFactorCrashes", "OpScaleOutTest.ZzzUnregisteredOperator"]
            assert len(f.gtest_regressions()) == 1 and result.exit_code == 1
            assert f.seconds["gtest"] > 0
            text = result.text()
            assert "finding: OpScaleOutTest.LargeTensor passes on the replaced kernel, failed on the edit" in text
            assert "failing before the edit already: " in text
        finally:
            result.restore()
        # again (a --watch round): the base's run is the one kept, only the edit's runs
        from etops.dev import swap

        # (the test runs in a fork of this process: base swaps are counted in a file)
        installs = mini.parents[1] / "base-installs"
        installs.write_text("")
        real_install = swap.BaseSwap.install

        def counted(self):
            with open(installs, "a") as f:
                f.write("1")
            return real_install(self)

        swap.BaseSwap.install = counted
        try:
            again = etops.dev(kernel, check=False, timing=False)
        finally:
            swap.BaseSwap.install = real_install
        try:
            assert installs.read_text() == "" and again.files[0].gtest["regressions"] == g["regressions"]
            assert sorted(again.files[0].gtest["base_failing"]) == sorted(g["base_failing"])
        finally:
            again.restore()
        plain = etops.dev(kernel, check=False, timing=False, gtest=False)
        plain.restore()
        assert plain.files[0].gtest["files"] == [] and plain.files[0].gtest["not_run"] == [
            {"file": "kernels/test/op_scale_test.cpp", "why": "not asked for (--no-gtest)"}]
        assert "gtest kernels/test/op_scale_test.cpp not run: not asked for (--no-gtest)" in plain.text()
    finally:
        fixed.restore()


def _commit(checkout: Path) -> None:
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(checkout)}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(checkout), *args], check=True, env=env, capture_output=True)


@needs_googletest
def test_dev_runs_the_upstream_test_on_the_git_base_not_on_the_replaced_kernel(mini, tmp_path):
    """In a git checkout the base of the test is the file at HEAD (fixed there), not
    the kernel registered before (buggy: the module's registration of the planted bug):
    the edit (the bug again) turns LargeTensor from pass to fail."""
    test = gtest_mini.write(tmp_path / "checkout")
    kernel = test.parents[1] / "mini" / "op_scale.cpp"
    kernel.write_text(gtest_mini.FIXED_KERNEL)
    _commit(tmp_path / "checkout")
    kernel.write_text(gtest_mini.KERNEL)  # the edit plants the bug
    result = etops.dev(kernel, check=False, timing=False)
    try:
        [f] = result.files
        assert f.error is None, f.error
        assert f.base["kind"] == "git", f.base
        g = f.gtest
        assert g["base"] == "git"
        assert [r["name"] for r in g["regressions"]] == ["OpScaleOutTest.LargeTensor"], g
        assert result.exit_code == 1
        assert "passes on the git base, failed on the edit" in result.text()
    finally:
        result.restore()



@needs_googletest
def test_a_folder_test_calls_kernels_by_their_cpp_names_through_the_registry(mini, tmp_path):
    """A test in the style of kernels/quantized/test/: NativeFunctions.h of its folder
    is generated (no such file in the checkout), its functions reach the kernel
    registered now, with the test's context and with one of their own."""
    gtest_mini.write(tmp_path / "checkout")
    test = gtest_mini.write_folder_test(tmp_path / "checkout")
    result = etops.gtest(test)
    tests = _by_name(result)
    assert tests["WithContext"].status == "passed"
    assert tests["WithoutContextLarge"].status == "failed"  # the module's kernel: the planted bug
    assert "the last element was not scaled" in tests["WithoutContextLarge"].message
    refused = tests["WithoutContextRefused"]  # no context to look at: the kernel's failure fails the test
    assert refused.status == "failed"
    assert "etops_gtest_mini::scale.out, called without a context, failed it (Error 0x12)" in refused.message
    missing = tests["WithoutContextUnregistered"]  # said once, by the call
    assert missing.status == "failed" and "no kernel registered for etops_gtest_mini::unregistered.out" in missing.message
    assert "called without a context" not in missing.message
    fixed = etops.override(gtest_mini.OP, gtest_mini.FIXED_KERNEL, schema=gtest_mini.SCHEMA)
    try:
        again = etops.gtest(test, test_filter="*Context:*Large")
        assert {t.name: t.status for t in again.files[0].tests} == {
            "OpScaleNativeTest.WithContext": "passed", "OpScaleNativeTest.WithoutContextLarge": "passed"}
    finally:
        fixed.restore()


def _plain_checkout(root: Path) -> Path:
    """The miniature checkout with its kernel in kernels/plain/ (a kernel set whose
    supported features claim double) and that folder's own test, committed with the
    kernel fixed; the kernel file, the planted bug being the edit."""
    gtest_mini.write(root)
    import shutil

    (root / "kernels/plain/functions.yaml").write_text(gtest_mini.FUNCTIONS_YAML)
    shutil.rmtree(root / "kernels/mini")
    gtest_mini.write_folder_test(root, "kernels/plain")
    kernel = root / "kernels/plain/op_scale.cpp"
    kernel.write_text(gtest_mini.FIXED_KERNEL)
    _commit(root)
    kernel.write_text(gtest_mini.KERNEL)
    return kernel


@needs_googletest
def test_dev_runs_the_folders_tests_with_its_kernel_set_and_says_why_a_test_did_not_run(mini, tmp_path):
    kernel = _plain_checkout(tmp_path / "checkout")
    result = etops.dev(kernel, check=False, timing=False)
    try:
        [f] = result.files
        assert f.error is None, f.error
        g = f.gtest
        assert [x["file"] for x in g["files"]] == ["kernels/test/op_scale_test.cpp", "kernels/plain/test/op_scale_test.cpp"]
        assert {x["kernel_set"] for x in g["files"]} == {"plain"}  # the kernel file's folder, not the default (portable)
        assert g["files"][0]["counts"]["skipped"] == 0  # plain claims double: DoubleInputs runs
        assert sorted(r["name"] for r in g["regressions"]) == ["OpScaleNativeTest.WithoutContextLarge", "OpScaleOutTest.LargeTensor"]
        assert g["not_run"] == [] and result.exit_code == 1
        assert "gtest kernels/plain/test/op_scale_test.cpp on the edit: 1 passed, 3 failed [plain set;" in result.text()
    finally:
        result.restore()
    folder_test = kernel.parent / "test/op_scale_test.cpp"
    folder_test.write_text(folder_test.read_text().replace("TEST(OpScaleNativeTest, WithContext) {",
                                                           "TEST(OpScaleNativeTest, WithContext) { undeclared_thing();"))
    out = tmp_path / "r.json"
    result = etops.dev(kernel, check=False, timing=False)
    try:
        result.write_json(str(out))
        [n] = result.files[0].gtest["not_run"]
        assert n["file"] == "kernels/plain/test/op_scale_test.cpp"
        assert n["why"].startswith("does not build: ") and "undeclared_thing" in n["why"]
        assert json.loads(out.read_text())["files"][0]["gtest"]["not_run"] == [n]
        assert "gtest kernels/plain/test/op_scale_test.cpp not run: does not build: " in result.text()
        assert "- `kernels/plain/test/op_scale_test.cpp`: does not build: " in result.markdown()
        assert [x["file"] for x in result.files[0].gtest["files"]] == ["kernels/test/op_scale_test.cpp"]
    finally:
        result.restore()
    folder_test.unlink()
    (kernel.parents[1] / "test/op_scale_test.cpp").unlink()
    result = etops.dev(kernel, check=False, timing=False)
    try:
        [n] = result.files[0].gtest["not_run"]
        assert n == {"file": "", "why": "no upstream test: none of kernels/test/op_scale_test.cpp, "
                                        "kernels/plain/test/op_scale_test.cpp exists"}
        assert "gtest not run: no upstream test: none of kernels/test/op_scale_test.cpp" in result.text()
        assert "- no upstream test: none of" in result.markdown()
    finally:
        result.restore()
    (kernel.parents[1] / "test/op_scale_test.cpp").write_text(  # a test of another operator of the same name
        "void f() { torch::executor::etops_gtest_mini::unregistered_outf(c, a, o); }\n")
    result = etops.dev(kernel, check=False, timing=False)
    try:
        assert result.files[0].gtest["not_run"] == [{"file": "kernels/test/op_scale_test.cpp",
                                                     "why": "it calls none of the file's operators (etops_gtest_mini::scale.out)"}]
    finally:
        result.restore()


@needs_googletest
def test_dev_says_why_when_the_process_running_the_tests_died(mini, monkeypatch):
    from etops.dev import upstream_tests

    kernel = mini.parents[1] / "mini" / "op_scale.cpp"
    monkeypatch.setattr(upstream_tests, "gtest_runs", lambda *args: os._exit(3))  # the forked process ends without a result
    result = etops.dev(kernel, check=False, timing=False)
    try:
        [n] = result.files[0].gtest["not_run"]
        assert n["file"] == "kernels/test/op_scale_test.cpp" and n["why"].startswith("its process ended: "), n
        assert "exit" in n["why"] and result.files[0].gtest["files"] == [], n
        assert "gtest kernels/test/op_scale_test.cpp not run: its process ended: " in result.text()
    finally:
        result.restore()
