"""``etops dev`` on a miniature checkout written by the tests (minicheckout.py, not a
git repository: the base is the wheel's built-in): a file is found, built, swapped
in, judged as check judges and timed against the built-in; a planted broadcast bug
is a new finding saying the edit is the side that is wrong; ``--watch`` picks up edits and
survives a compile error; ``--load`` gives check/bench/needs/fuzz the kernels; an
override calls the kernel it replaced, from Python and from C++."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

import etops
import minicheckout
from etops.cli import main as cli_main
from etops.bench.ab import ab_sample, time_ab
from etops.checkout import load as dev_load
from etops.dev import timing

FAST = dict(dtypes=["float32"], repeats=3, isolate=False)  # unguarded: check_gate.py tests the guarded default


@pytest.fixture(scope="module")
def checkout():
    return minicheckout.write(minicheckout.stable_folder())


@pytest.fixture(scope="module")
def buggy_checkout():
    # not named executorch: etops links it into its cache as executorch/ for the includes
    return minicheckout.write(minicheckout.stable_folder(), buggy=True, name="buggy-checkout")


def _only_refusals(result) -> bool:
    """The new findings of every file are refusals (and there is one at least)."""
    found = [x.category for f in result.files for x in f.new_findings]
    return bool(found) and set(found) == {"unsupported"}


def _not_overridden(name: str) -> bool:
    return not any(o.overridden for o in etops.registry().get_kernel(name).origins)


def test_a_file_is_found_built_swapped_checked_and_timed(checkout):
    path = checkout / "kernels/portable/cpu/op_add.cpp"
    result = etops.dev(path, **FAST)
    try:
        [f] = result.files
        assert f.error is None, f.error
        assert f.checkout == str(checkout)
        assert [p.rsplit("/", 1)[-1] for p in f.yamls] == ["functions.yaml"]
        assert f.ops == ["aten::add.out", "aten::add.Scalar_out"]  # one file, two operators
        assert f.replaced == ["aten::add.Scalar_out", "aten::add.out"]
        origins = etops.registry().get_kernel("aten::add.out").origins
        assert origins[0].overridden and origins[0].overrides == ("custom",)
        a, b = torch.randn(3, 4), torch.randn(3, 1)
        torch.testing.assert_close(etops.registry().aten.add.out(a, b, alpha=2), a + 2 * b)
        assert f.base["kind"] == "built-in" and "not a git checkout" in f.base["describe"]
        assert f.cases["aten::add.out"] > 0 and f.cases["aten::add.out"] == f.base_cases["aten::add.out"]
        assert f.cases["aten::add.Scalar_out"] > 0  # reached through decompositions (discovery)
        # the miniature kernels refuse what the built-in takes (a wrapped int scalar, other dtypes):
        # a refusal where the base passed is a new finding; nothing else is
        assert _only_refusals(result), result.text()
        rows = [r for r in f.timing if r["kernel"] == "aten::add.out"]
        assert [r["label"] for r in rows] == ["small", "medium", "large"]
        for row in rows:
            # 3 rounds asked for: more while too noisy (fewer than 5 never reach the interval's 90%)
            assert row["threads"] == 1 and 3 <= row["repeats"] <= timing.MAX_ROUNDS
            assert row["new"]["median"] > 0 and row["builtin"]["median"] > 0
            assert row["vs_builtin"]["q1"] <= row["vs_builtin"]["median"] <= row["vs_builtin"]["q3"]
            assert row["verdict"] in timing.VERDICTS
        assert result.exit_code == 1
        text = result.text()
        assert "base: the wheel's built-in kernel" in text and "add.out: " in text and "verdict: the edit introduces" in text
    finally:
        result.restore()
    assert _not_overridden("aten::add.out") and _not_overridden("aten::add.Scalar_out")
    assert not [n for n in etops.registry().operator_names if n.startswith("etops_previous::")]


def test_a_planted_broadcast_bug_is_a_finding_against_aten_and_the_builtin(buggy_checkout):
    result = etops.dev(buggy_checkout / "kernels/portable/cpu/op_add.cpp", timing=False, dtypes=["float32"], isolate=False)
    try:
        [f] = result.files
        assert f.error is None, f.error
        [wrong] = [x for x in f.new_findings if x.category == "wrong"]
        assert wrong.cluster.kernel == "aten::add.out" and not wrong.in_base
        assert wrong.side().startswith("the edit (the base agrees)")  # the side that disagrees with the reference
        assert all(c.dtype == "float32" for c in wrong.cluster.cases)  # one finding per root cause, dtypes an attribute
        assert result.exit_code == 1
        assert "new findings (" in result.text() and "computes wrong values" in result.text()
    finally:
        result.restore()


def test_cli_dev_json_and_exit_codes(checkout, tmp_path, capsys):
    out = tmp_path / "dev.json"
    code = cli_main(["dev", str(checkout / "kernels/portable/cpu/op_mul.cpp"), "--dtype", "float32",
                     "--repeats", "3", "--no-isolate", "--json", str(out)])
    try:
        printed = capsys.readouterr().out
        assert code == 1, printed
        data = json.loads(out.read_text())
        [f] = data["files"]
        assert f["ops"] == ["aten::mul.out"] and data["exit_code"] == 1
        assert {x["category"] for x in f["findings"] if x["gating"]} == {"unsupported"}
        assert f["timing"][0]["vs_builtin"]["median"] > 0 and f["cases"]["aten::mul.out"] > 0
        assert "aten::mul.out" in printed and "verdict:" in printed
    finally:
        assert _not_overridden("aten::mul.out")  # the command puts the built-in back when it ends
    code = cli_main(["dev", str(tmp_path / "missing.cpp")])
    assert code == 2 and "no such file" in capsys.readouterr().err
    code = cli_main(["dev", str(checkout / "kernels/portable/cpu/op_mul.cpp"), "--watch", "--max-rounds", "1", "--no-timing",
                     "--dtype", "float32", "--no-isolate"])
    assert code == 1 and "watching 1 path and the checkout headers" in capsys.readouterr().out
    assert _not_overridden("aten::mul.out")


def test_watch_picks_up_an_edit_and_survives_a_compile_error(tmp_path):
    checkout = minicheckout.write(tmp_path)
    kernel = checkout / "kernels/portable/cpu/op_mul.cpp"
    header = checkout / "kernels/portable/cpu/util/mini_broadcast.h"
    good = kernel.read_text()
    rounds, swapped = [], []

    def on_round(result):
        rounds.append(result)
        swapped.append(not _not_overridden("aten::mul.out"))
        if len(rounds) == 1:  # a compile error on line 14 of the user's file
            kernel.write_text(good.replace("const float* y = b.const_data_ptr<float>();", "const float* y = b.const_data_ptr<float>()"))
        elif len(rounds) == 2:  # fixed, and the header edited: both are watched
            kernel.write_text(good)
            header.write_text(header.read_text() + "\n// edited\n")

    last = etops.dev.watch(kernel, on_round, rounds=3, idle_timeout=30, timing=False, dtypes=["float32"], isolate=False)
    try:
        assert len(rounds) == 3
        assert rounds[0].exit_code == 1 and _only_refusals(rounds[0])
        assert rounds[1].exit_code == 2
        error = rounds[1].files[0].error
        assert f"{kernel}:15:" in error and "error" in error, error  # the diagnostics on the user's own line
        assert swapped == [True, False, True]  # nothing swapped in while the file does not build
        assert rounds[2].exit_code == 1 and _only_refusals(rounds[2]) and rounds[2].files[0].build["compiled"]
    finally:
        last.restore()
    assert _not_overridden("aten::mul.out")


def test_an_override_calls_the_kernel_it_replaced_from_python_and_cpp():
    source = textwrap.dedent("""
        // fast path for same-shape float tensors with alpha 1, else the kernel this override replaced
        Tensor& my_add(KernelRuntimeContext& ctx, const Tensor& a, const Tensor& b, const Scalar& alpha, Tensor& out) {
          bool fast = a.scalar_type() == ScalarType::Float && b.scalar_type() == ScalarType::Float &&
                      out.scalar_type() == ScalarType::Float && a.sizes() == b.sizes() && a.sizes() == out.sizes() &&
                      alpha.isIntegral(false) && alpha.to<int64_t>() == 1;
          if (fast) {
            for (ssize_t i = 0; i < a.numel(); ++i)
              out.mutable_data_ptr<float>()[i] = a.const_data_ptr<float>()[i] + b.const_data_ptr<float>()[i] + 1000.0f;
            return out;
          }
          etops::BoxedKernel previous = etops::previous_kernel("aten::add.out");
          if (previous == nullptr) { ctx.fail(Error::NotFound); return out; }
          EValue ea(a), eb(b), ealpha(alpha), eout(out), eret(out);
          EValue* stack[] = {&ea, &eb, &ealpha, &eout, &eret};
          previous(ctx, Span<EValue*>(stack, 5));
          return out;
        }
    """)
    builtin = etops.registry().get_kernel("aten::add.out").kernels[0].address
    with etops.override("aten::add.out", source) as o:
        assert o.previous_address == builtin
        a, b = torch.ones(4), torch.ones(4)
        torch.testing.assert_close(etops.registry().aten.add.out(a, b), torch.full((4,), 1002.0))  # the fast path (marked)
        a2, b2 = torch.randn(2, 3), torch.randn(3)
        torch.testing.assert_close(etops.registry().aten.add.out(a2, b2, alpha=3), a2 + 3 * b2)  # through the built-in
        c = torch.empty(4)
        torch.testing.assert_close(o.previous(a, b, out=c), a + b)  # the built-in, from Python
    assert _not_overridden("aten::add.out")
    assert not [n for n in etops.registry().operator_names if n.startswith("etops_previous::")]


def test_load_gives_check_and_bench_the_kernels(checkout, capsys, tmp_path):
    path = str(checkout / "kernels/portable/cpu/op_add.cpp")
    try:
        code = cli_main(["check", "--load", path, "aten::add.out", "--dtype", "float32", "--quiet", "--no-progress",
                         "--report-dir", str(tmp_path), "--strict"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert origins_custom("aten::add.out")
        code = cli_main(["bench", "aten::add.out", "--against", "builtin", "--sizes", "1k", "--repeats", "3", "--json"])
        rows = json.loads(capsys.readouterr().out)
        assert code == 0 and rows[0]["kernel"] == "aten::add.out" and rows[0]["vs_builtin"]["median"] > 0
        assert rows[0]["agree_builtin"] is True and rows[0]["threads"] == 1
    finally:
        dev_load.unload_all()
    assert _not_overridden("aten::add.out")
    code = cli_main(["bench", "aten::add.out", "--against", "builtin"])
    assert code == 2 and "is not overridden" in capsys.readouterr().err


def origins_custom(name: str) -> bool:
    return any(o.overrides == ("custom",) for o in etops.registry().get_kernel(name).origins)


def test_load_a_python_function_and_an_isolated_check(checkout, buggy_checkout, tmp_path, capsys):
    module = tmp_path / "my_kernels.py"
    module.write_text(textwrap.dedent(f"""
        import etops
        def install():
            return etops.override("aten::mul.out", None, sources=[{str(checkout / 'kernels/portable/cpu/op_mul.cpp')!r}],
                                  function="torch::executor::native::mul_out", cflags=["-I{checkout.parent}"])
    """))
    try:
        assert dev_load.load_all([f"{module}:install"]) == ["aten::mul.out"]
        assert origins_custom("aten::mul.out")
    finally:
        dev_load.unload_all()
    assert _not_overridden("aten::mul.out")
    # an --isolated sweep: the worker process loads the (buggy) kernel file too, and finds the bug
    code = cli_main(["check", "--load", str(buggy_checkout / "kernels/portable/cpu/op_add.cpp"), "aten::add.out", "--dtype",
                     "float32", "--isolated", "--quiet", "--no-progress", "--no-shrink", "--report-dir", str(tmp_path),
                     "--strict", "--json", str(tmp_path / "r.json")])
    try:
        capsys.readouterr()
        assert code == 1
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["totals"]["mismatch"] > 0, report["totals"]
    finally:
        dev_load.unload_all()
    assert _not_overridden("aten::add.out")


def test_checkout_errors_name_the_file(tmp_path):
    stray = tmp_path / "op_nothing.cpp"
    stray.write_text("int f() { return 1; }\n")
    result = etops.dev(stray)
    assert result.exit_code == 2 and "no kernel YAML" in result.files[0].error
    (tmp_path / "functions.yaml").write_text(minicheckout.FUNCTIONS_YAML)
    result = etops.dev(stray)
    assert result.exit_code == 2 and "implements none of the operators" in result.files[0].error


def test_time_ab_against_the_kernel_an_override_replaced():
    def slow_add(self, other, alpha=1, out=None):  # a Python kernel: much slower than the built-in
        return self + alpha * other

    with etops.override("aten::add.out", slow_add) as o:
        kernel = etops.registry().get_kernel("aten::add.out")
        sample = ab_sample(kernel, "1k")
        row = time_ab(kernel, o.previous.kernel, sample, repeats=5, warmup=1, target=0.002)
    assert row["error"] is None and row["threads"] == 1
    assert row["agree_aten"] and row["agree_builtin"]
    assert row["vs_builtin"]["median"] > 1 and row["verdict_builtin"] == "slower", row["vs_builtin"]
    assert torch.get_num_threads() >= 1  # restored
