"""Findings grouped by root cause: the keys, shrinking, the literal reproducers,
the dim-order axis and the reports leading with the findings, on a few real
kernels (one `etops check` run in this process, shared by the tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import etops
from etops.conformance import cli
from etops.conformance.clusters import KINDS, cluster_key, dtype_class, group, normalized_message, signature
from etops.conformance.runner import CaseResult
from etops.conformance.shrink import shrink, shrink_isolated, total_elements

SRC = str(Path(etops.__file__).resolve().parent.parent)
#: unfold_copy.out: aborts on 0-d inputs (etops' direct calls refuse them); constant_pad_nd.out: silently wrong on
#: channels-last inputs, refuses negative pads; clone.out: honours channels-last
KERNELS = ["aten::unfold_copy.out", "aten::constant_pad_nd.out", "aten::clone.out"]


def _case(status, message="", dtype="float32", kernel="aten::k.out", **kw):
    return CaseResult(kernel, "aten::k", "k", dtype, 0, 0, status, message=message, **kw)


def _run_script(path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    out = tmp_path_factory.mktemp("clusters")
    argv = ["check", *KERNELS, "--dtype", "float32", "--dim-order-axis", "--no-progress",
            "--json", str(out / "r.json"), "--report", str(out / "r.md"), "--html", str(out / "r.html")]
    assert cli.main(argv) == 0
    return out, json.loads((out / "r.json").read_text())


# ---- keys ------------------------------------------------------------------------


def test_normalized_messages_merge_what_varies_between_cases():
    a = "KernelError: ExecuTorch kernel aten::x.out failed with Error::InvalidArgument (0x12): got pad[0] = -1 for Float [guards.py:58]"
    b = "KernelError: ExecuTorch kernel aten::x.out failed with Error::InvalidArgument (0x12): got pad[3] = -7 for Double"
    assert normalized_message(a) == normalized_message(b)
    assert normalized_message(a) != normalized_message("KernelError: Unhandled dtype Float")


def test_dtype_classes():
    assert [dtype_class(d) for d in ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "bool", "complex64")] == \
        ["float", "float", "half", "half", "int", "int", "bool", "complex"]


def test_mismatch_signature_is_the_shape_of_the_difference():
    some = _case("mismatch", "Tensor-likes are not close!\nMismatched elements: 3 / 25 (12.0%)", max_abs_error=2.0, max_rel_error=0.5)
    every = _case("mismatch", "Tensor-likes are not close!\nMismatched elements: 25 / 25 (100.0%)", max_abs_error=2.0, max_rel_error=0.5)
    tiny = _case("mismatch", "Mismatched elements: 3 / 25 (12.0%)", max_abs_error=1e-4, max_rel_error=1e-5)
    shape = _case("mismatch", "shape [2, 3] (ExecuTorch) vs [3, 2] (ATen)")
    sigs = {signature(c) for c in (some, every, tiny, shape)}
    assert len(sigs) == 4
    assert signature(shape) == "another shape"
    # the same difference at other sizes and dtypes of one class is one cluster
    other = _case("mismatch", "Mismatched elements: 7 / 99 (7.0%)", dtype="float64", max_abs_error=3.0, max_rel_error=0.9)
    assert cluster_key(other) == cluster_key(some)
    assert cluster_key(_case("mismatch", some.message, dtype="float16", max_abs_error=2.0, max_rel_error=0.5)) != cluster_key(some)


def test_group_orders_worst_kind_first_and_picks_the_smallest_case():
    cases = [_case("unsupported", "KernelError: no", inputs="Tensor[9, 9]:float32"),
             _case("crash", "worker killed by SIGSEGV"),
             _case("guarded", "ValueError: x", rule="min_dim(low=1, name='self')", inputs="Tensor[4]:float32"),
             _case("guarded", "ValueError: x", rule="min_dim(low=1, name='self')", inputs="tensor(1.0, float32)"),
             _case("pass")]
    clusters = group(cases)
    assert [c.kind for c in clusters] == ["crash", "guarded", "unsupported"]
    assert list(KINDS[:3]) == ["crash", "abort", "guarded"]
    guarded = clusters[1]
    assert len(guarded.cases) == 2 and guarded.inputs == "tensor(1.0, float32)"
    assert "min_dim" in guarded.summary and "smallest input: tensor(1.0, float32)" in guarded.summary


# ---- shrinking -------------------------------------------------------------------


def test_shrink_cuts_shared_sizes_together_while_the_case_still_fails():
    args = [torch.randn(8, 6), torch.randn(6, 5)]  # mm: the inner sizes must agree
    small_args, _, tries = shrink(torch.ops.aten.mm.default, args, {}, lambda a, k: a[0].shape[-1] >= 3)
    assert [tuple(t.shape) for t in small_args] == [(1, 3), (3, 1)]
    assert 0 < tries and torch.equal(small_args[0], args[0][:1, :3])  # the values are kept
    assert total_elements(small_args, {}) < total_elements(args, {})


def test_shrink_search_that_kills_its_process_gives_the_originals_back():
    args = [torch.randn(4, 4)]

    def dies_when_small(a, k):
        if a[0].numel() < 16:
            os.kill(os.getpid(), signal.SIGKILL)  # as a kernel that kills its process
        return True

    out_args, _, _, how = shrink_isolated(torch.ops.aten.relu.default, args, {}, dies_when_small)
    assert how == "search died" and torch.equal(out_args[0], args[0])


# ---- the sweep's findings ----------------------------------------------------------


def test_json_leads_with_the_findings(checked):
    _, data = checked
    keys = list(data)
    assert keys[:3] == ["schema", "headline", "findings"]
    assert data["headline"].startswith("3 kernels checked, ") and "distinct findings" in data["headline"]
    assert len(data["findings"]) == int(data["headline"].split(", ")[1].split()[0])
    kinds = [f["kind"] for f in data["findings"]]
    assert kinds == sorted(kinds, key=KINDS.index)
    aborts = [f for f in data["findings"] if f["kind"] == "abort"]
    assert aborts and aborts[0]["kernel"] == "aten::unfold_copy.out" and "Dimension out of range" in aborts[0]["signature"]
    assert aborts[0]["dtype_class"] == "any"  # one ExecuTorch check is one finding, whatever the dtype
    for f in data["findings"]:
        assert f["summary"] and f["reproducer"] and Path(f["reproducer"]).is_file()


def test_markdown_and_terminal_lead_with_the_findings(checked):
    out, _ = checked
    md = (out / "r.md").read_text()
    assert md.index("## Findings") < md.index("## Dim-order axis") < md.index("## Summary")


def test_abort_reproducer_is_standalone_and_reproduces(checked):
    _, data = checked
    f = next(f for f in data["findings"] if f["kind"] == "abort")
    assert "etops' direct calls refuse this" in f["summary"]
    text = Path(f["reproducer"]).read_text()
    assert "torch.tensor(" in text and "torch.ops.aten.unfold" in text and "torch.load" not in text
    assert 'etops.as_program("aten::unfold_copy.out")' in text
    assert len(text.splitlines()) < 40
    proc = _run_script(f["reproducer"])
    assert proc.returncode == 1 and "KernelAborted" in proc.stderr and "Dimension out of range" in proc.stderr, proc.stdout + proc.stderr


def test_dim_order_axis_verdicts_and_shrunk_reproducer(checked):
    _, data = checked
    axis = data["dim_order_axis"]
    assert axis["layouts"] == ["channels-last", "transposed"]
    rows = {r["kernel"]: r["layouts"] for r in axis["kernels"]}
    assert axis["kernels"][0]["kernel"] == "aten::constant_pad_nd.out"  # the worst first
    pad = rows["aten::constant_pad_nd.out"]["channels-last"]
    assert pad["verdict"] == "silently wrong" and pad["findings"] > 0
    assert rows["aten::clone.out"]["channels-last"]["verdict"] == "honours"
    assert rows["aten::clone.out"]["transposed"]["verdict"] == "refuses"
    finding = next(f for f in axis["findings"]["channels-last"] if f["kernel"] == "aten::constant_pad_nd.out" and f["kind"] == "mismatch")
    assert finding["shrink"] == "shrunk" and finding["layout"] == "channels-last"
    text = Path(finding["reproducer"]).read_text()
    assert "channels_last" in text and 'etops.layout("preserve")' in text
    proc = _run_script(finding["reproducer"])
    assert proc.returncode == 1 and "MISMATCH" in proc.stderr, proc.stdout + proc.stderr


def test_axis_counts_only_cases_with_an_input_laid_out_anew(checked):
    _, data = checked
    base = {r["kernel"]: r["cases"] for r in data["kernels"]}
    for row in data["dim_order_axis"]["kernels"]:
        for v in row["layouts"].values():
            assert 0 <= v["cases"] <= base[row["kernel"]]
    assert data["dim_order_axis"]["kernels"][-1]["layouts"]["channels-last"]["cases"] < base[data["dim_order_axis"]["kernels"][-1]["kernel"]]
