"""The per-operator policy table (etops.ops): every guard constructor refuses a bad
call naming the argument and passes a good one, declarations merge part by part into
one entry as documented, every exact name is a registered kernel, and the consumers
read the table."""

from __future__ import annotations

import types

import pytest
import torch

import etops
from etops import ops, out_shapes
from etops.compare import METADATA, TIES, VALUES
from etops.ops import guards as g
from etops.ops import DIRECT, PROGRAM, Direct, Finding, Judging, Safety
from etops.ops.rules import Rule, is_pattern, merge

OP = types.SimpleNamespace(name="test::op.out")
T = torch.zeros

#: constructor, bound arguments it refuses, the exception, the argument named, bound arguments it passes
GUARD_CASES = [
    (g.min_dim("input", 2), {"input": T(3)}, ValueError, "input", {"input": T(2, 3)}),
    (g.exact_dim(3, "self", "mat2"), {"self": T(1, 2, 2), "mat2": T(2, 2)}, ValueError, "mat2", {"self": T(1, 2, 2), "mat2": T(1, 2, 2)}),
    (g.nonempty("self"), {"self": T(0, 2)}, ValueError, "self", {"self": T(1, 2)}),
    (g.floating("self"), {"self": T(2, dtype=torch.int64)}, TypeError, "self", {"self": T(2)}),
    (g.complex_("self"), {"self": T(2)}, TypeError, "self", {"self": T(2, dtype=torch.complex64)}),
    (g.castable_out("out", "self", "other"), {"self": T(2, dtype=torch.complex64), "other": T(2), "out": T(2)}, TypeError, "out", {"self": T(2), "other": 2, "out": T(2, dtype=torch.float64)}),
    (g.dtype_in("x", (torch.float64,), "torch.float64"), {"x": T(1)}, TypeError, "x", {"x": T(1, dtype=torch.float64)}),
    (g.dim_in_range("self", "dim"), {"self": T(2, 3), "dim": -1}, IndexError, "dim", {"self": T(2, 3), "dim": 1}),
    (g.dim_in_range("self", "dim", scalar_has_one_dim=False), {"self": T(()), "dim": 0}, IndexError, "dim", {"self": T(2), "dim": 0}),
    (g.dim_valid("self", "dimension"), {"self": T(1, 1, 1), "dimension": -4}, IndexError, "dimension", {"self": T(1, 1, 1), "dimension": -3}),
    (g.divisor_nonzero("b", "a"), {"a": 3, "b": 0}, ZeroDivisionError, "b", {"a": 3, "b": 2}),
    (g.not_bool("self", "other", why="no"), {"self": T(2), "other": T(2, dtype=torch.bool)}, TypeError, "other", {"self": T(2), "other": 1}),
    (g.not_bool("self", "other", why="no"), {"self": T(2, dtype=torch.bool), "other": 1}, TypeError, "self", {"self": T(2, dtype=torch.int8), "other": 1.5}),
    (g.alpha_fits_result("alpha", "self", "other"), {"self": T(2), "other": T(2), "alpha": True}, TypeError, "alpha", {"self": T(2, dtype=torch.bool), "other": T(2, dtype=torch.bool), "alpha": True}),
    (g.alpha_fits_result("alpha", "self", "other"), {"self": T(2, dtype=torch.bool), "other": 1, "alpha": 2.5}, TypeError, "alpha", {"self": T(2, dtype=torch.int8), "other": 1.5, "alpha": 2.5}),
    (g.arange_length(), {"start": 0, "end": 1, "step": 1e-200}, ValueError, "step", {"start": 0, "end": 10, "step": 0.5}),
    (g.arange_length(), {"end": 1, "step": 0}, ValueError, "step", {"end": 3}),
    (g.mask_indices("self", "indices"), {"self": T(3), "indices": [T(3, 1, dtype=torch.bool)]}, IndexError, "indices", {"self": T(3, 1), "indices": [T(3, 1, dtype=torch.bool)]}),
    (g.same_dtype_and_shape("a", "b"), {"a": T(2, 2), "b": T(4)}, ValueError, "b", {"a": T(2, 2), "b": T(2, 2)}),
    (g.same_dtype_and_shape("a", "b"), {"a": T(2), "b": T(2, dtype=torch.int8)}, TypeError, "b", {"a": T(()), "b": T(1)}),
    (g.quant_range("dtype"), {"dtype": torch.float32}, TypeError, "dtype", {"dtype": torch.int8, "quant_min": -128, "quant_max": 127}),
    (g.quant_range("dtype"), {"dtype": torch.int8, "quant_min": -129, "quant_max": 0}, ValueError, "quant_min", {"dtype": torch.uint8, "quant_min": 0, "quant_max": 255}),
    (g.quant_range("dtype"), {"dtype": torch.int8, "quant_min": 0, "quant_max": 128}, ValueError, "quant_max", {"dtype": torch.int8, "quant_min": 0, "quant_max": 127}),
    (g.ordered("quant_min", "quant_max", strict=True), {"quant_min": 3, "quant_max": 3}, ValueError, "quant_min", {"quant_min": 2, "quant_max": 3}),
    (g.ordered("quant_min", "quant_max", strict=False), {"quant_min": 4, "quant_max": 3}, ValueError, "quant_min", {"quant_min": 3, "quant_max": 3}),
    (g.dtype_equals_argument("out", "out_dtype", "output_dtype"), {"out": T(1), "output_dtype": torch.float64}, TypeError, "out", {"out": T(1), "output_dtype": torch.float32}),
]


@pytest.mark.parametrize("guard, bad, error, argument, good", GUARD_CASES, ids=[f"{c[0].__qualname__.split('.')[0]}-{c[3]}-{i}" for i, c in enumerate(GUARD_CASES)])
def test_guard_refuses_naming_the_argument_and_passes_a_good_call(guard, bad, error, argument, good):
    with pytest.raises(error, match=f"test::op.out: argument '{argument}'"):
        guard(bad, OP)
    assert guard(good, OP) is None


def test_every_guard_constructor_has_a_case():
    constructors = {n for n, v in vars(g).items() if callable(v) and getattr(v, "__module__", "") == g.__name__ and not n.startswith("_")}
    helpers = {"shape_dtype", "numel"}
    covered = {c[0].__qualname__.split(".")[0] for c in GUARD_CASES} | {"floating", "complex_", "torch_meta_accepts", "is_empty"}
    assert constructors - helpers <= covered


def test_guards_leave_arguments_of_the_wrong_kind_to_the_call_path():
    with_tensors = [(guard, bad) for guard, bad, *_ in GUARD_CASES if any(isinstance(v, torch.Tensor) for v in bad.values())]
    assert len(with_tensors) > 10
    for guard, bad in with_tensors:
        assert guard({n: "not a tensor" if isinstance(v, torch.Tensor) else v for n, v in bad.items()}, OP) is None
    assert g.dim_in_range("self", "dim")({"self": T(2), "dim": True}, OP) is None
    assert g.divisor_nonzero("b", "a")({"a": 1, "b": 0.0}, OP) is None


def test_torch_meta_guard_refuses_an_out_of_the_wrong_rank_and_passes_a_right_one():
    info = etops.registry().get_kernel("quantized_decomposed::quantize_per_tensor.out")._info
    guard = g.torch_meta_accepts()
    bound = {"input": T(2, 3), "scale": 0.1, "zero_point": 0, "quant_min": -128, "quant_max": 127, "dtype": torch.int8}
    with pytest.raises(ValueError, match="argument 'out' has 1 dims"):
        guard({**bound, "out": torch.zeros(6, dtype=torch.int8)}, info)
    assert guard({**bound, "out": torch.zeros(2, 3, dtype=torch.int8)}, info) is None


def test_an_operator_named_by_two_rules_gets_both_guard_sets_in_order():
    calls = []
    first, second = (lambda b, i: calls.append("first")), (lambda b, i: calls.append("second"))
    record = merge("ns::op.out", [Rule(("ns::*",), direct=Direct(guards=(first,))), Rule(("other::op.out",), direct=Direct(guards=(first,))),
                                  Rule(("ns::op.out",), safety=Safety(guards=(second,)))])
    record.calls(DIRECT).check({}, OP)
    assert calls == ["first", "second"] and record.calls(DIRECT).has_guards
    record.calls(PROGRAM).check({}, OP)  # the judge's: the safety part only
    assert calls == ["first", "second", "second"]


def test_conflicting_comparison_kinds_for_one_operator_are_refused():
    with pytest.raises(ValueError, match="'compare'"):
        merge("ns::op.out", [Rule(("ns::*",), judging=Judging(compare=METADATA)), Rule(("ns::op.out",), judging=Judging(compare=TIES))])


def test_rule_refuses_bad_records_naming_the_argument():
    with pytest.raises(TypeError, match="'names'"):
        Rule("aten::add.out")
    with pytest.raises(ValueError, match="'compare'"):
        Judging(compare="bitwise")
    with pytest.raises(ValueError, match="finding"):
        Rule(("aten::add.out",), judging=Judging(findings=(Finding("aten::mul.out", "s", "self", {}, "abort"),)))
    with pytest.raises(TypeError, match="'safety'"):
        Rule(("aten::add.out",), safety=Direct())  # a part in the wrong place
    with pytest.raises(TypeError, match="'name'"):
        ops.rules_for(None)


def test_an_operator_without_entries_gets_the_default_record():
    record = ops.rules_for("aten::add.out")
    assert (record.direct.guards, record.sizing.upper_bound, record.judging.compare, record.judging.findings) == ((), None, VALUES, ())
    assert not record.calls(DIRECT).has_guards and not record.calls(PROGRAM).has_precheck


def test_comparison_kinds_and_upper_bounds_come_from_the_table():
    assert ops.rules_for("aten::randn.out").judging.compare == METADATA
    assert ops.rules_for("aten::empty.memory_format").judging.compare == METADATA  # torch's functional, for the conformance sweep
    assert ops.rules_for("dim_order_ops::_empty_dim_order.out").judging.compare == METADATA
    assert ops.rules_for("aten::argmax.out").judging.compare == TIES
    assert out_shapes.is_data_dependent(etops.registry().aten.nonzero.out._info) and not out_shapes.is_data_dependent(etops.registry().aten.add.out._info)
    bound = ops.rules_for("aten::nonzero.out").sizing.upper_bound({"self": T(2, 3)})
    assert bound == {"out": ((6, 2), torch.int64)}


def test_every_exact_name_in_the_table_is_a_registered_kernel():
    missing = []
    for rule in ops.ALL_RULES:
        for name in rule.names:
            if is_pattern(name) or rule.optional:
                continue
            try:
                etops.registry().get_kernel(name)
            except Exception:  # noqa: BLE001 - reported below
                missing.append(name)
    assert missing == []


def test_every_pattern_matches_a_registered_kernel_or_a_torch_operator():
    for rule in ops.ALL_RULES:
        for name in filter(is_pattern, rule.names):
            base = name.split("::")[1].split(".")[0]
            assert hasattr(torch.ops.aten, base) or any(base in k for k in dir(torch.ops.dim_order_ops)), name


def test_every_guarded_kernel_is_built_with_the_precheck_flag_and_runs_its_guards(reg, user_schemas):
    with pytest.raises(ValueError, match="argument 'self' is empty"):
        reg.aten.amax.out(torch.zeros(0, 2), [0], out=torch.zeros(2))
    with pytest.raises(ZeroDivisionError, match="argument 'b'"):
        reg.get_kernel("executorch_prim::floordiv.int", schema="executorch_prim::floordiv.int(int a, int b) -> int")(5, 0)


def test_every_finding_names_an_argument_of_its_operator_and_its_reproducer_calls_it():
    for finding in ops.findings():
        assert finding.summary and finding.abort and finding.case["op"] == finding.op
        kernel = etops.registry().get_kernel(finding.op)
        assert finding.argument in {name for name, _ in finding.case["args"]} | set(kernel.out_names()), finding
        record = ops.rules_for(finding.op)
        assert (record.calls(DIRECT).has_precheck or record.torch_checks) and finding in record.judging.findings


def test_a_tolerance_override_reaches_every_comparison(monkeypatch):
    from etops.compare import FUZZ, TORCH
    from etops.fuzz import worker

    loose = Rule(("aten::add.out",), judging=Judging(tolerance=(0.5, 0.5)))
    record = merge("aten::add.out", [loose]).judging
    assert record.tolerance == (0.5, 0.5)
    assert record.tolerance_of(FUZZ).pair(torch.float32) == (0.5, 0.5)
    assert record.tolerance_of(TORCH.override(rtol=0.0, atol=0.0)).pair(torch.float32) == (0.0, 0.0)  # the user's wins
    assert merge("aten::sub.out", [loose]).judging.tolerance_of(FUZZ) is FUZZ
    want, got = torch.ones(4), torch.full((4,), 1.25)
    assert worker.compare("aten::add.out", got, want) is not None  # the fuzzer's own policy refuses 25%
    monkeypatch.setattr(worker, "rules_for", lambda name: merge(name, [loose]))
    assert worker.compare("aten::add.out", got, want) is None


def test_tolerances_given_twice_differently_are_refused():
    with pytest.raises(ValueError, match="tolerance"):
        merge("aten::add.out", [Rule(("aten::add.out",), judging=Judging(tolerance=(0.1, 0.0))), Rule(("aten::*",), judging=Judging(tolerance=(0.2, 0.0)))])
    with pytest.raises(ValueError, match="'tolerance'"):
        Judging(tolerance=(-1, 0))


def test_torch_checks_run_once_per_signature_and_refuse_what_torch_refuses(reg):
    """torch's CPU sub refuses bools; its meta kernel does not: the rules table's
    torch check refuses it before ExecuTorch's kernel (which would compute it)."""
    with pytest.raises(RuntimeError, match="bool"):
        torch.sub(torch.ones(2), True)
    with pytest.raises(TypeError, match="aten::sub.out: argument 'other' is a bool"):
        reg.aten.sub.out(torch.ones(2), True, out=torch.empty(2))
    with pytest.raises(TypeError, match="aten::sub.out: argument 'self' is a bool"):
        reg.aten.sub.out(torch.ones(2, dtype=torch.bool), 1)
    assert not ops.rules_for("aten::sub.out").calls(DIRECT).has_guards  # no per-call Python guard


@pytest.mark.parametrize("kernel, args, alpha", [
    ("add.out", (torch.ones(2), torch.ones(2)), True),
    ("add.out", (torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool)), 2.5),
    ("sub.out", (torch.ones(2, dtype=torch.int32), torch.ones(2, dtype=torch.int32)), True),
    ("add.Scalar_out", (torch.ones(2, dtype=torch.int64), 1), True),
    ("rsub.Scalar_out", (torch.ones(2), 1), True),
])
def test_an_alpha_torch_refuses_in_its_cpu_kernel_never_reaches_the_kernel(reg, kernel, args, alpha):
    """torch checks alpha against the result dtype in its CPU kernels, not in their
    meta kernels: the rules table refuses it, naming the argument, before ExecuTorch's
    kernel (which computes a bool alpha with a bool tensor as 1)."""
    name, overload = kernel.split(".")
    with pytest.raises(RuntimeError, match="alpha"):
        getattr(getattr(torch.ops.aten, name), overload)(*args, alpha=alpha, out=torch.empty(2, dtype=args[0].dtype))
    with pytest.raises(TypeError, match=f"aten::{kernel}: argument 'alpha'"):
        getattr(getattr(reg.aten, name), overload)(*args, alpha=alpha, out=torch.empty(2, dtype=args[0].dtype))


def test_a_footprint_names_its_arguments_and_what_keeps_them_within_memory():
    from etops.ops import Footprint

    with pytest.raises(ValueError, match="'checks' or 'bounded'"):
        Footprint(("index",))
    with pytest.raises(ValueError, match="'arguments'"):
        Footprint(bounded="the kernel checks")
    with pytest.raises(TypeError, match="'arguments'"):
        Footprint("index", bounded="the kernel checks")
    assert not Footprint().data_dependent


def test_footprints_of_several_rules_merge():
    from etops.ops import Footprint

    def check(bound, info):
        raise ValueError(f"{info.name}: argument 'index' refused")

    rules = [Rule(("aten::gather.out",), footprint=Footprint(("index",), (check,))),
             Rule(("aten::gather.out",), footprint=Footprint(("self", "index"), bounded="the out is sized from the data"))]
    entry = merge("aten::gather.out", rules)
    assert entry.footprint.arguments == ("index", "self") and entry.footprint.checks == (check,)
    assert entry.footprint.bounded == "the out is sized from the data"
    assert entry.calls(ops.PROGRAM).footprint == (check,) and entry.calls(ops.DIRECT).has_precheck
