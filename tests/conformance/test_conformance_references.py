"""References (etops.conformance.references): every registered kernel has one
or OpInfo samples; a fast subset of each namespace runs against its reference
(valid and invalid samples) in worker processes; coverage per namespace; the
LLM custom ops when their library loads; etops.testing's reference callable."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

import etops
from etops import conformance, testing
from etops.conformance import references
from etops.conformance.references import Reference, Sample, invalid
from etops.ops import INPUTS, InputConstraints, input_constraints, policy_of

#: one or two kernels of every namespace the wheel registers
FAST = [
    "executorch_prim::floordiv.Scalar", "executorch_prim::mod.int", "executorch_prim::truediv.Scalar", "executorch_prim::sym_ite.Scalar",
    "quantized_decomposed::quantize_per_tensor.out", "quantized_decomposed::add.out", "quantized_decomposed::embedding_4bit.out",
    "dim_order_ops::_to_dim_order_copy.out", "et_copy::_h2d_copy.out",
    "aten::bitwise_and.Scalar_out", "aten::sym_size.int", "aten::copy.out",
]


@pytest.fixture(scope="module")
def fast_report():
    return conformance.run(FAST, dtypes=["int64", "float64", "float32", "int8", "uint8", "bool"], progress=False, isolated=True, jobs=2)


def test_every_registered_kernel_has_a_reference_or_opinfo_samples():
    discovered = conformance.discover(conformance.runner.default_kmap())
    by_opinfo = {k for info in discovered.values() for k in info["kernels"]}
    refs = references.references()
    missing = [k for k in etops.registry().operator_names if k not in by_opinfo and k not in refs]
    assert missing == []
    assert {k.split("::")[0] for k in refs} >= {"executorch_prim", "quantized_decomposed", "dim_order_ops", "et_copy", "aten", "llama"}


def test_fast_subset_reaches_every_kernel(fast_report):
    print()
    print(conformance.terminal(fast_report))
    cov = fast_report.coverage()
    assert cov["reached"] == len(FAST), cov["unreached"]
    rows = {r["namespace"]: r for r in fast_report.namespaces()}
    assert set(rows) == {"aten", "dim_order_ops", "et_copy", "executorch_prim", "quantized_decomposed"}
    assert sum(r["registered"] for r in rows.values()) == len(FAST)
    assert all(r["reached"] == r["registered"] for r in rows.values())
    # et_copy refuses CPU tensors (a device copy); quantize_per_tensor.out aborts (ET_CHECK) on invalid
    # samples instead of failing cleanly (etops' direct calls refuse them); the others pass on every case
    assert rows["et_copy"]["passing"] == 0 and rows["quantized_decomposed"]["passing"] == 2
    aborts = fast_report.cases("abort")
    assert {c.kernel for c in aborts} == {"quantized_decomposed::quantize_per_tensor.out"}, aborts


def test_prim_semantics_found(fast_report):
    """ExecuTorch's mod.int takes the dividend's sign (C's %), Python the divisor's."""
    mism = [c for c in fast_report.cases("mismatch") if c.kernel == "executorch_prim::mod.int"]
    assert mism and all(c.opinfo == "ref:executorch_prim::mod.int" for c in mism)
    kernels = {r["kernel"]: r for r in fast_report.kernel_rows()}
    # floor division: only 0.0 // 0.0 differs (ExecuTorch inf, torch nan)
    floordiv = [c for c in fast_report.cases("mismatch") if c.kernel == "executorch_prim::floordiv.Scalar"]
    assert floordiv and all("Expected nan but got inf" in c.message and c.inputs.endswith(", 0.0") for c in floordiv)
    assert kernels["executorch_prim::truediv.Scalar"]["pass"] == kernels["executorch_prim::truediv.Scalar"]["cases"]


def test_invalid_samples_are_refused(fast_report):
    """sym_size.int with a dim out of range and copy.out with a src that does not
    broadcast: the reference and the kernel both refuse; they count as passes."""
    kernels = {r["kernel"]: r for r in fast_report.kernel_rows()}
    for name in ("aten::sym_size.int", "aten::copy.out"):
        assert kernels[name]["pass"] == kernels[name]["cases"], name
    ref = references.find("aten::sym_size.int")
    assert any(not s.valid for s in ref.samples(torch.float32))


def test_report_has_namespaces(fast_report):
    from etops.conformance.report import markdown, to_json

    data = to_json(fast_report)
    assert {r["namespace"] for r in data["namespaces"]} == {"aten", "dim_order_ops", "et_copy", "executorch_prim", "quantized_decomposed"}
    assert "| `executorch_prim` |" in markdown(fast_report)
    assert "namespace" in conformance.terminal(fast_report)


def test_quantized_inputs_respect_ranges():
    for name in ("quantized_decomposed::quantize_per_tensor.out", "quantized_decomposed::dequantize_per_tensor.out"):
        ref = references.find(name)
        for dtype in (torch.int8, torch.uint8):
            info = torch.iinfo(dtype)
            for s in ref.samples(dtype):
                if not s.valid:
                    continue
                x, scale, zp, qmin, qmax, qdtype = s.args
                assert scale > 0 and info.min <= qmin <= zp <= qmax <= info.max and qdtype == dtype
                if x.dtype == dtype:
                    assert qmin <= int(x.min()) and int(x.max()) <= qmax


def test_input_constraints_table():
    assert input_constraints("aten::bitwise_left_shift.Tensor_Scalar_out").scalar_range == (0, 7)
    assert policy_of("aten::var.out").judging.inputs is INPUTS["aten::var.out"]  # the entry's judging part
    assert input_constraints("aten::add.out") is None
    with pytest.raises(TypeError, match="'op'"):
        input_constraints(3)
    with pytest.raises(ValueError, match="scalar_range"):
        InputConstraints(("float32",), scalar_range=(3, 1))
    shifts = references.find("aten::bitwise_left_shift.Tensor_Scalar_out")
    amounts = [s.args[1] for s in shifts.samples(torch.int64)]
    assert amounts and all(0 <= a <= 7 for a in amounts)
    assert all(name in references.references() for name in INPUTS)


def test_the_aten_references_are_the_input_table():
    """etops.ops' input constraints state how each aten kernel no OpInfo sample
    reaches is judged (its dtypes, inputs); the references are made from them, one
    per operator, against ATen's functional counterpart of the kernel, compared as
    the rules table says, their samples within the entry's ranks and invalid
    arguments."""
    from etops.conformance.references.run import compared_as, reference_of
    from etops.ops import rules_for

    aten_refs = {k: r for k, r in references.references().items() if k in INPUTS}
    assert set(aten_refs) == set(INPUTS)
    for name, constraints in INPUTS.items():
        ref = aten_refs[name]
        assert ref.reference is None and ref.compare is None and ref.dtypes == constraints.dtypes, name
        functional = reference_of(ref, etops.registry().get_kernel(name))
        assert functional is etops.registry().get_kernel(name)._info.functional_overload() is not None, name
        assert compared_as(ref) == rules_for(name).judging.compare, name
        samples = list(ref.samples(getattr(torch, constraints.dtypes[0])))
        assert samples, name
        if constraints.ranks is not None:
            low, high = constraints.ranks
            ranks = {s.args[0].dim() for s in samples if isinstance(s.args[0], torch.Tensor)}
            assert ranks and all(low <= r <= high for r in ranks), (name, ranks)
        wrong = {s.why for s in samples if not s.valid}
        assert wrong <= {f"argument '{a}' is {what}" for a, what in constraints.invalid}, (name, wrong)
    assert compared_as(aten_refs["aten::native_dropout.out"]) == "metadata"  # stated once: the rules table's record
    assert reference_of(references.find("executorch_prim::floordiv.Scalar"), None)(-7, 2) == -4  # a reference's own callable


def test_reference_record_refuses_bad_arguments():
    with pytest.raises(ValueError, match="'kernel'"):
        Reference("add", lambda: 0, lambda d: ())
    with pytest.raises(TypeError, match="'reference'"):
        Reference("a::b.out", 3, lambda d: ())
    with pytest.raises(TypeError, match="'dtypes'"):
        Reference("a::b.out", abs, lambda d: (), dtypes="float32")
    with pytest.raises(KeyError, match="no reference"):
        references.find("aten::no_such.out")


@pytest.fixture
def user_references(monkeypatch):
    """Lets a test add references (etops.testing.reference_cases runs
    references.add): the process's are put back after it, or a later sweep in this
    process checks add.out against this test's reference."""
    monkeypatch.setattr(references, "_USER", dict(references._USER))


def test_testing_reference_callable(user_references):
    """etops.testing.reference_cases checks any registered kernel against a
    callable: a right reference passes, a wrong one fails naming the case, an
    invalid sample the kernel accepts is a mismatch."""
    def samples(dtype):
        yield torch.arange(6, dtype=dtype).reshape(2, 3), torch.ones(3, dtype=dtype)
        yield {"self": torch.ones(4, dtype=dtype), "other": torch.full((4,), 2, dtype=dtype)}

    for case in testing.reference_cases("aten::add.out", lambda self, other, alpha=1: self + other, samples, dtypes=["float32", torch.int64]):
        result = case.check()
        assert sum(t.counts["pass"] for t in result.tallies.values()) == 2
    wrong = testing.reference_cases("aten::add.out", lambda self, other, alpha=1: self - other, samples)
    with pytest.raises(AssertionError, match="mismatch"):
        wrong[0].check()
    accepts = testing.reference_cases("aten::add.out", lambda self, other, alpha=1: self + other,
                                      lambda d: [testing.invalid("argument 'other' is fine for the kernel", torch.ones(2), torch.ones(2))])
    with pytest.raises(AssertionError, match="accepted by the reference"):
        accepts[0].check()
    with pytest.raises(TypeError, match="'samples'"):
        testing.reference_cases("aten::add.out", abs, [1, 2])


def test_testing_reference_for_a_schema_given_kernel(user_schemas, user_references):
    """A prim kernel no package defines a schema for, with the schema given (the
    reference run gives it to etops.set_schema: put back after the test)."""
    cases = testing.reference_cases("executorch_prim::floordiv.int", lambda a, b: a // b, lambda d: [(7, 2), (9, 3), (8, 5)],
                                    dtypes="int64", schema="executorch_prim::floordiv.int(int a, int b) -> int")
    assert cases[0].check().samples == 3


def test_llm_custom_ops_in_a_fresh_process(tmp_path):
    """--llm-custom-ops loads the library; its kernels are checked against their
    math and their ATen implementations (a subset: the attention and cache ops);
    custom_sdpa's only failures are the aborts on head counts that do not divide."""
    out = tmp_path / "llm.json"
    proc = subprocess.run([sys.executable, "-m", "etops", "check", "--llm-custom-ops", "--no-progress", "-q", "--isolated",
                           "llama::custom_sdpa.out", "llama::update_cache.out", "llama::fast_hadamard_transform.out",
                           "preprocess::tile_crop.out", "--json", str(out), "--report-only"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    data = json.loads(out.read_text())
    rows = {r["namespace"]: r for r in data["namespaces"]}
    assert rows["llama"]["reached"] == rows["llama"]["registered"] == 3
    assert rows["preprocess"]["reached"] == 1
    kernels = {r["kernel"]: r for r in data["kernels"]}
    sdpa = kernels["llama::custom_sdpa.out"]
    assert sdpa["pass"] + sdpa["abort"] == sdpa["cases"] > sdpa["abort"] > 0


def test_prim_references_mind_python_semantics():
    prim = {k: r for k, r in references.references().items() if k.startswith("executorch_prim::")}
    assert prim["executorch_prim::floordiv.Scalar"].reference(-7, 2) == -4
    assert prim["executorch_prim::mod.int"].reference(-7, 3) == 2
    assert math.isinf(prim["executorch_prim::truediv.Scalar"].reference(1.0, 0.0))
    assert prim["executorch_prim::round.Scalar"].reference(2.5) == 2
    zero_divisors = [s for s in prim["executorch_prim::floordiv.Scalar"].samples(torch.int64) if not s.valid]
    assert zero_divisors and all(s.args[1] == 0 for s in zero_divisors)
    assert isinstance(Sample((1,)), Sample) and not invalid("x", 1).valid


def test_the_llm_custom_ops_are_loaded_by_default_when_the_sweep_wants_them():
    """No --llm-custom-ops: loaded for the full sweep and for a KERNEL of theirs,
    not for other kernels, not with --no-llm-custom-ops, not for --load alone."""
    from etops.conformance.cli import build_parser, wants_llm_custom_ops

    def wants(*argv):
        return wants_llm_custom_ops(build_parser().parse_args(list(argv)))

    assert wants() is None and wants("llama::update_cache.out") is None
    assert wants("aten::add.out") is False and wants("--no-llm-custom-ops") is False
    assert wants("--load", "x.cpp") is False and wants("--llm-custom-ops", "aten::add.out") is True


def test_a_llm_kernel_named_without_the_flag_is_checked(tmp_path):
    out = tmp_path / "llm.json"
    proc = subprocess.run([sys.executable, "-m", "etops", "check", "--no-progress", "-q", "llama::update_cache.out",
                           "--json", str(out), "--report-only"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    kernels = {r["kernel"]: r for r in json.loads(out.read_text())["kernels"]}
    assert kernels["llama::update_cache.out"]["cases"] > 0
