"""Findings grouped by root cause: the keys, shrinking, the literal reproducers,
the dim-order axis and the reports leading with the findings, on a few real
kernels (the session's one `etops check` run in this process, conftest.py's
dim_order_sweep, shared with the HTML report's test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import etops
from etops.conformance.clusters import KINDS, cluster_key, dtype_class, group, headline, normalized_message, signature
from etops.conformance.outcome import Outcome, of_death
from etops.conformance.runner import CaseResult
from etops.conformance.shrink import shrink, shrink_isolated, total_elements

SRC = str(Path(etops.__file__).resolve().parent.parent)


def _case(status, message="", dtype="float32", kernel="aten::k.out", what=None, **kw):
    """A case with the Outcome the runner would give it (`what`: a mismatch's difference)."""
    outcome = kw.pop("outcome", None) or Outcome(status, kw.get("verdict"), what or ("values" if status == "mismatch" else None),
                                                 abs_error=kw.get("max_abs_error"), rule=kw.get("rule"))
    return CaseResult(kernel, "aten::k", "k", dtype, 0, 0, status, message=message, outcome=outcome, **kw)


def _run_script(path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def checked(dim_order_sweep):
    """(the sweep's folder, its JSON report)"""
    return dim_order_sweep.out, dim_order_sweep.data


# ---- keys ------------------------------------------------------------------------


def test_normalized_messages_merge_what_varies_between_cases():
    a = "KernelError: ExecuTorch kernel aten::x.out failed with Error::InvalidArgument (0x12): got pad[0] = -1 for Float [guards.py:58]"
    b = "KernelError: ExecuTorch kernel aten::x.out failed with Error::InvalidArgument (0x12): got pad[3] = -7 for Double"
    assert normalized_message(a) == normalized_message(b)
    assert normalized_message(a) != normalized_message("KernelError: Unhandled dtype Float")


def test_dtype_classes():
    assert [dtype_class(d) for d in ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "bool", "complex64")] == \
        ["float", "float", "half", "half", "int", "int", "bool", "complex"]


def test_mismatch_signature_is_what_differs_and_its_verdict():
    wrong = _case("mismatch", "Tensor-likes are not close!\nMismatched elements: 3 / 25 (12.0%)", max_abs_error=2.0, max_rel_error=0.5,
                  verdict="wrong")
    every = _case("mismatch", "Tensor-likes are not close!\nMismatched elements: 25 / 25 (100.0%)", max_abs_error=2.0, max_rel_error=0.5,
                  verdict="wrong")
    loss = _case("mismatch", "Mismatched elements: 3 / 25 (12.0%)", max_abs_error=1e-4, max_rel_error=1e-5, verdict="precision loss")
    as_aten = _case("mismatch", "Mismatched elements: 3 / 25 (12.0%)", max_abs_error=1e-4, max_rel_error=1e-5, verdict="within ATen's error")
    shape = _case("mismatch", "shape [2, 3] (ExecuTorch) vs [3, 2] (ATen)", what="shape")
    inf = _case("mismatch", "Mismatched elements: 3 / 25 (12.0%)", max_abs_error=float("inf"), max_rel_error=float("inf"), verdict="wrong")
    assert signature(wrong) == signature(every) == "values differ: wrong"  # how many elements is no cause
    assert len({signature(c) for c in (wrong, loss, as_aten, shape, inf)}) == 5
    assert signature(shape) == "another shape"
    # one root cause whatever the dtypes: float64, float16, int64 cases of one key are one finding
    for dtype in ("float64", "float16", "int64", "bool"):
        assert cluster_key(_case("mismatch", wrong.message, dtype=dtype, max_abs_error=3.0, max_rel_error=0.9, verdict="wrong")) == cluster_key(wrong)


def test_one_finding_per_root_cause_with_its_dtypes_as_an_attribute():
    """unfold_copy's 0-dim guard at five dtype classes, _log_softmax's missing
    float64 at five task dtypes: one finding each (was five each)."""
    rule = "min_dim(low=1, name='self'); finding: unfold_copy.out reads the size of a 0-dim input before checking its rank"
    dtypes = ["bool", "complex64", "float32", "bfloat16", "int16"]
    guarded = [_case("guarded", "ValueError: x", dtype=d, kernel="aten::unfold_copy.out", rule=rule, inputs=f"tensor(1, {d})") for d in dtypes]
    refused = [_case("unsupported", "KernelError: ExecuTorch kernel aten::_log_softmax.out failed with Error::InvalidArgument (0x12): "
                     "Unhandled dtype Double for _log_softmax.out", dtype=d, kernel="aten::_log_softmax.out", inputs="Tensor[1]:float64")
               for d in dtypes]
    clusters = group(guarded + refused)
    assert [(c.kernel, len(c.cases)) for c in clusters] == [("aten::unfold_copy.out", 5), ("aten::_log_softmax.out", 5)]
    assert clusters[0].dtypes == sorted(dtypes) and clusters[0].dtype_classes == ["bool", "complex", "float", "half", "int"]
    assert clusters[0].to_json()["dtypes"] == sorted(dtypes)


def test_messages_are_cut_at_a_word_boundary():
    from etops.conformance.values import clip

    message = ("KernelError: ExecuTorch kernel aten::cumsum.out failed with Error::InvalidArgument (0x12): Check failed (dim >= "
               "-upper_bound && dim < upper_bound): Dimension 0 is out of range. Dimension should be between -1 and 0. " * 3)
    cut = clip(message, 200)
    assert len(cut) <= 200 and cut.endswith("…") and message.startswith(cut[:-1]) and message[len(cut) - 1] == " "
    assert clip("short", 200) == "short"
    cluster = group([_case("unsupported", message, kernel="aten::cumsum.out", inputs="tensor(1.0, float32), 0")])[0]
    assert "Dimension should be between -1 and 0" in cluster.summary and "bet;" not in cluster.summary


def test_headline_counts_wrong_results_apart_from_precision_losses():
    class _Report:
        def coverage(self):
            return {"reached": 2}

    cases = [_case("mismatch", "m", kernel="aten::a.out", verdict="wrong", max_abs_error=1.0, max_rel_error=1.0),
             _case("mismatch", "m", kernel="aten::b.out", verdict="wrong", max_abs_error=1.0, max_rel_error=1.0),
             _case("mismatch", "m", kernel="aten::a.out", verdict="precision loss", max_abs_error=1e-6, max_rel_error=1e-6),
             _case("mismatch", "m", kernel="aten::a.out", verdict="within ATen's error", max_abs_error=1e-6, max_rel_error=1e-6),
             _case("abort", "KernelAborted: x", kernel="aten::c.out")]
    clusters = group(cases)
    assert [c.category for c in clusters] == ["abort", "wrong", "wrong", "precision loss", "within ATen's error"]
    assert headline(_Report(), clusters) == ("2 kernels checked, 5 distinct findings (1 abort, 2 wrong results, 1 precision loss, "
                                             "1 within ATen's error)")


def test_group_orders_worst_kind_first_and_picks_the_smallest_case():
    cases = [_case("unsupported", "KernelError: no", inputs="Tensor[9, 9]:float32"),
             _case("crash", "worker killed by SIGSEGV", outcome=of_death(-signal.SIGSEGV)),
             _case("guarded", "ValueError: x", rule="min_dim(low=1, name='self')", inputs="Tensor[4]:float32"),
             _case("guarded", "ValueError: x", rule="min_dim(low=1, name='self')", inputs="tensor(1.0, float32)"),
             _case("pass")]
    clusters = group(cases)
    assert [c.kind for c in clusters] == ["crash", "guarded", "unsupported"]
    assert list(KINDS[:4]) == ["crash", "hang", "abort", "guarded"]
    guarded = clusters[1]
    assert len(guarded.cases) == 2 and guarded.inputs == "tensor(1.0, float32)"
    assert "min_dim" in guarded.summary and "smallest input: tensor(1.0, float32)" in guarded.summary


def test_hangs_of_a_kernel_are_one_finding_saying_the_limit_and_never_called_when_built(tmp_path, monkeypatch):
    """Hang cases (whatever their limits) are one root cause of their kernel; the
    finding says the representative's limit and input; building it finds its inputs
    again but never calls the kernel (no shrink, no recheck), and its reproducer
    makes the call in a child, waited for the limit: 0 when it returns in time."""
    from etops.conformance import clusters as cl
    from etops.conformance.case import CaseInfo
    from etops.conformance.case_clock import Hang
    from etops.conformance.sweep import Report

    def hang(sample, inputs, limit):
        return Hang(0, 1, CaseInfo("aten::relu.out", "aten::relu", "nn.functional.relu", "float32", sample, 0), inputs, 0.0, limit,
                    limit + 0.1).case()

    cases = [hang(2, "Tensor[5, 5]:float32", 30.0), hang(1, "Tensor[5, 10, 5]:float32", 12.0)]
    [c] = group(cases)
    assert (c.kind, c.category, c.signature, c.inputs) == ("hang", "hang", "does not return", "Tensor[5, 5]:float32")
    assert c.summary.startswith("relu.out does not return within 30 s on float32 inputs") and c.to_json()["limit_seconds"] == 30.0
    monkeypatch.setattr(cl, "_shrunk", lambda *a: pytest.fail("a hang's inputs were shrunk"))
    monkeypatch.setattr(cl, "_refigure", lambda *a: pytest.fail("a hang's inputs were checked again"))
    report = Report(["aten::relu.out"], ["float32"], True, 1)
    report.details = [cases[0]]
    [built] = cl.build(report, report_dir=tmp_path)
    assert built.shrink.startswith("not tried") and built.reproducer
    text = Path(built.reproducer).read_text()
    assert "LIMIT = 30.0" in text and "os.fork()" in text
    run = _run_script(built.reproducer)  # the built-in relu returns at once
    assert run.returncode == 0 and "returned within 30.0 s" in run.stdout, run.stdout + run.stderr[-2000:]


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


def test_json_leads_with_the_findings(checked, dim_order_sweep):
    _, data = checked
    keys = list(data)
    assert keys[:3] == ["schema", "headline", "findings"]
    assert data["headline"].startswith(f"{len(dim_order_sweep.kernels)} kernels checked, ") and "distinct findings" in data["headline"]
    assert len(data["findings"]) == int(data["headline"].split(", ")[1].split()[0])
    kinds = [f["kind"] for f in data["findings"]]
    assert kinds == sorted(kinds, key=KINDS.index)
    aborts = [f for f in data["findings"] if f["kind"] == "abort"]
    assert aborts and aborts[0]["kernel"] == "aten::unfold_copy.out" and "Dimension out of range" in aborts[0]["signature"]
    # one ExecuTorch check is one finding, whatever the dtype (its dtypes an attribute)
    assert len([f for f in aborts if f["kernel"] == "aten::unfold_copy.out"]) == 1 and aborts[0]["dtypes"]
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
    # the rules table records it (direct calls warn): the axis lists only what the table lacks
    assert ["aten::constant_pad_nd.out", "channels-last"] not in axis["not_in_rules_table"]
    assert all(rows[k][{"permuted": "transposed"}.get(layout, layout)]["verdict"] == "silently wrong"
               for k, layout in axis["not_in_rules_table"])
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


def test_the_axis_lists_silently_wrong_kernels_the_rules_table_lacks():
    """The rules table's wrong_layouts are kept current from the dim-order axis: a
    kernel it finds silently wrong on a layout the table does not record is listed."""
    from etops.conformance.dim_orders import Axis
    from etops.conformance.runner import Tally
    from etops.conformance.sweep import Report

    def report(*cases):
        r = Report(["aten::add.out", "aten::constant_pad_nd.out"], ["float32"], False, 1)
        for kernel in r.selected:
            r.tallies[(kernel, "float32")] = Tally()
            r.tallies[(kernel, "float32")].add("pass", "x")
        r.details.extend(cases)
        return r

    wrong = [_case("mismatch", "m", kernel=k) for k in ("aten::add.out", "aten::constant_pad_nd.out")]
    axis = Axis(report(), {"channels-last": report(*wrong), "transposed": report(*wrong)})
    assert axis.unrecorded() == [("aten::add.out", "channels-last"), ("aten::add.out", "permuted"),
                                 ("aten::constant_pad_nd.out", "permuted")]
    assert "not yet in the rules table" in "\n".join(axis.terminal_lines())
