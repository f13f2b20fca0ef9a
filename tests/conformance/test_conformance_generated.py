"""Generated cases (etops.conformance.generated): every class of each factor reaches
the rows of a few operators, each class makes the values it names, pairs are covered
and the coverage reported, a case is rebuilt from its key alone, tuples ATen's meta
kernel refuses are refusal cases; and three planted kernels (Python kernels
overriding a built-in: add.out wrong only on a one-element self broadcast with
alpha != 1, cumsum.out saturating instead of wrapping on int16 overflow, _softmax.out
starting its running max at float16's lowest) are each found by the generated cases
and by none of the OpInfo samples reaching them (every OpInfo discovery finds, at the
dtypes the plant is wrong at), in etops check and in etops dev's judge."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import etops
from etops.conformance.clusters import build
from etops.conformance.generated import case_of, classes, coverage_of, plan, sample_key
from etops.conformance.generated.cases import case_key
from etops.conformance.generated.pairwise import covering_rows, pairs_of, required_pairs
from etops.conformance.sweep import run

SRC = str(Path(etops.__file__).resolve().parents[1])

# ---- the planted kernels ----------------------------------------------------------


def add_alpha_on_one_element(self, other, alpha=1, out=None):
    """add.out, except that a one-element self broadcast against more takes alpha (the wheel's own bug)."""
    if self.numel() == 1 and other.numel() > 1 and alpha != 1:
        return (alpha * self + other).to(out.dtype)
    return torch.add(self, other, alpha=alpha).to(out.dtype)


def cumsum_saturating_int16(self, dim, dtype=None, out=None):
    """cumsum.out, except that an int16 result saturates where ATen's wraps around."""
    if out.dtype == torch.int16:
        return torch.cumsum(self.to(torch.int64), dim).clamp(-32768, 32767).to(torch.int16)
    return torch.cumsum(self, dim, dtype=dtype).to(out.dtype)


def softmax_max_from_float16_lowest(self, dim, half_to_float=False, out=None):
    """_softmax.out, except that the running max starts at -65504, not -inf: a row
    entirely below it underflows every exp() to 0 (0 / 0)."""
    x = self.float() if self.dtype in (torch.float16, torch.bfloat16) else self
    if x.numel() == 0:
        return x.to(out.dtype)
    e = torch.exp(x - x.amax(dim, keepdim=True).clamp(min=-65504.0))
    return (e / e.sum(dim, keepdim=True)).to(out.dtype)


def add(self, other, alpha=1, out=None):
    return torch.add(self, other, alpha=alpha).to(out.dtype)


def cumsum(self, dim, dtype=None, out=None):
    return torch.cumsum(self, dim, dtype=dtype).to(out.dtype)


def softmax(self, dim, half_to_float=False, out=None):
    return torch._softmax(self, dim, half_to_float).to(out.dtype)


#: kernel -> the same kernel right (ATen's op as a Python kernel: the wheel's add.out has the plant's bug itself)
RIGHT = {"aten::add.out": add, "aten::cumsum.out": cumsum, "aten::_softmax.out": softmax}
#: kernel -> (plant, the dtypes it is wrong at, as both sides are run)
PLANTS = {
    "aten::add.out": (add_alpha_on_one_element, ["float32", "int64"]),
    "aten::cumsum.out": (cumsum_saturating_int16, ["int16"]),
    "aten::_softmax.out": (softmax_max_from_float16_lowest, ["float32"]),
}

# ---- the generator ----------------------------------------------------------------


@pytest.mark.parametrize("kernel,family", [("aten::add.out", "broadcast"), ("aten::cumsum.out", "reduction"),
                                           ("aten::_softmax.out", "reduction"), ("aten::mm.out", "matmul"),
                                           ("aten::relu.out", "shared")])
def test_every_class_of_every_factor_reaches_the_rows(kernel, family):
    p = plan(kernel)
    assert p.family == family
    for i, factor in enumerate(("shape", "dtype", "scalar", "value")):
        seen = {row[i] for row in p.rows}
        wanted = set(p.factors[factor])
        assert seen == wanted, (factor, sorted(wanted - seen))
    if family == "broadcast":
        assert set(classes.BROADCAST_SHAPES) <= {row[0] for row in p.rows}
        assert any("+" in row[1] for row in p.rows)  # mixed dtypes across the lattice
        assert set(classes.SCALAR_CLASSES) <= {row[2] for row in p.rows}


def test_a_large_enough_budget_covers_every_pair_and_the_coverage_says_so():
    p = plan("aten::add.out", 1000)
    assert p.covered == p.required > 1000 and len(p.rows) < 1000
    small = coverage_of("aten::add.out", 40)
    assert small["cases"] == 40 and small["pairs_covered"] < small["pairs_required"] == p.required
    # the greedy rows: every admitted pair of a tiny product, within its lower bound
    factors = [["a", "b", "c"], ["x", "y", "z"], ["0", "1"]]
    rows = covering_rows(factors, lambda partial: True, 100, seed=3)
    assert set().union(*map(pairs_of, rows)) == required_pairs(factors, lambda partial: True) and 9 <= len(rows) <= 12


def test_each_class_makes_the_values_it_names():
    rng = random.Random(1)
    v = lambda cls, dtype, n=64: classes.make_values(cls, (n,), dtype, rng)  # noqa: E731
    sub = v("subnormal", torch.float32)
    assert bool(((sub != 0) & (sub.abs() < torch.finfo(torch.float32).tiny)).any())
    zeros = v("signed_zero", torch.float64)
    assert bool(((zeros == 0) & torch.signbit(zeros)).any()) and bool(((zeros == 0) & ~torch.signbit(zeros)).any())
    assert bool(v("nonfinite", torch.float32).isnan().any()) and bool(v("nonfinite", torch.float32).isinf().any())
    halves = v("halves", torch.float32)
    assert torch.equal(halves * 2, (halves * 2).round()) and bool((halves != halves.round()).any())
    extremes = v("int_extremes", torch.int16)
    assert {-32768, 32767} <= set(extremes.tolist())
    over = v("overflow", torch.int16, 3)
    assert over.to(torch.int64).sum() > 32767  # three of them overflow an int16 accumulator
    assert bool((v("large_magnitude", torch.float32).abs() >= 90).all())
    assert bool((v("huge", torch.float16).abs() > 4000).all())
    assert not classes.applies("subnormal", torch.int16) and not classes.applies("int_extremes", torch.float32)
    assert set(v("small_int", torch.uint8).tolist()) <= set(range(0, 9))
    # shapes
    assert classes.single_shape("0-d", rng) == () and math.prod(classes.single_shape("empty", rng)) == 0
    assert all(len(classes.single_shape(f"rank{r}", rng)) == r for r in range(1, 7))
    assert all(classes.single_shape(f"size1-dim{k}", rng)[k] == 1 for k in range(4))
    assert max(classes.single_shape("large", rng)) in classes.LARGE_SIZES
    first, other = classes.broadcast_shapes("one-vs-many", 2, rng)
    assert math.prod(first) == 1 and math.prod(other) > 1
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(*classes.broadcast_shapes("not-broadcastable", 2, rng))


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_a_case_is_rebuilt_from_its_key_alone_and_invalid_tuples_are_refusal_cases():
    keys = plan("aten::add.out").keys()
    first = case_of(keys[7])
    case_of(keys[3])
    again = case_of(keys[7])
    assert again.key == keys[7] and _same(first.args, again.args) and first.kwargs == again.kwargs
    refused = [case_of(k) for k in keys if k.split("|")[1] == "not-broadcastable"]
    assert refused and all(not c.valid and "ATen refuses it" in c.why for c in refused)
    alpha = [case_of(k) for k in keys if k.split("|")[2] == "int16" and k.split("|")[3] == "2.5"]
    assert alpha and all(not c.valid for c in alpha)  # a float alpha for integer tensors
    # another process (another hash seed) plans the same rows and rebuilds the same values
    code = ("import hashlib, sys; from etops.conformance.generated import plan, case_of; k = plan('aten::add.out').keys(); "
            "c = case_of(k[7]); sys.stdout.write(hashlib.sha256(repr(k).encode()).hexdigest() + ' ' + "
            "hashlib.sha256(c.args[0].numpy().tobytes() + c.args[1].numpy().tobytes()).hexdigest())")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    import hashlib

    here = hashlib.sha256(first.args[0].numpy().tobytes() + first.args[1].numpy().tobytes()).hexdigest()
    assert out.split() == [hashlib.sha256(repr(keys).encode()).hexdigest(), here]
    assert sample_key("gen:aten::add.out", "float32", 0) == plan("aten::add.out").keys()[
        plan("aten::add.out").rows.index(plan("aten::add.out").rows_of("float32")[0])]


def test_refusal_cases_pass_when_the_kernel_refuses_and_coverage_is_in_the_report():
    """A tuple ATen's meta kernel refuses is a case of its own, judged as a
    reference's invalid sample: it passes because the call is refused (the message
    says so); the sweep's report carries the coverage."""
    from etops.conformance.runner import TaskRunner, default_kmap

    runner = TaskRunner(default_kmap(), ["aten::add.out"], keep_cases=True)
    result = runner.run("gen:aten::add.out", torch.int16)
    keys = {c.sample: sample_key(c.opinfo, c.dtype, c.sample) for c in result.every_case.values()}
    invalid = [c for c in result.every_case.values() if not case_of(keys[c.sample]).valid]
    assert invalid and all(c.status == "pass" and c.message.startswith("refused (ATen refuses it") for c in invalid)
    assert len(invalid) < len(result.every_case)  # the valid ones were called and compared
    report = run(["aten::add.out"], dtypes=["int16"], generated="only", progress=False)
    assert report.tasks == 1 and report.totals()["cases"] == len(result.every_case)
    assert report.generated["kernels"] == 1 and 0 < report.generated["fraction"] <= 1


def test_a_case_only_atens_cpu_kernel_refuses_is_a_refusal_case_not_a_failed_sample():
    """torch's alpha check is in its CPU kernel, not its meta kernel: a generated
    add with a bool alpha and a float result is valid to the generator, refused by
    ATen, and judged as a refusal case (passing because etops refuses it too)."""
    from etops.conformance.runner import TaskRunner, default_kmap

    rows = plan("aten::add.out").rows_of("float32")
    refused = [i for i, row in enumerate(rows) if case_of(case_key("aten::add.out", row)).valid
               and isinstance(case_of(case_key("aten::add.out", row)).kwargs.get("alpha"), bool)]
    assert refused, "the plan has no float32 case with a bool alpha any more: pick another"
    runner = TaskRunner(default_kmap(), ["aten::add.out"], keep_cases=True)
    result = runner.run("gen:aten::add.out", torch.float32)
    assert result.samples_failed == 0
    cases = [c for c in result.every_case.values() if c.sample in refused]
    assert len(cases) == len(refused)
    assert all(c.status == "pass" and c.message.startswith("refused (ATen's CPU kernel refuses it") for c in cases), [c.message for c in cases]


# ---- the plants: found by the generated cases, by no OpInfo sample ----------------------


@pytest.mark.parametrize("kernel", sorted(PLANTS))
def test_a_planted_kernel_is_found_by_the_generated_cases_and_by_no_opinfo_sample(kernel):
    plant, dtypes = PLANTS[kernel]
    with etops.override(kernel, plant):
        generated = run([kernel], dtypes=dtypes, generated="only", progress=False)
        opinfo = run([kernel], dtypes=dtypes, progress=False)
    assert opinfo.tasks > 0 and opinfo.totals()["cases"] > 0
    assert opinfo.totals()["mismatch"] == 0, [c.inputs for c in opinfo.cases("mismatch")]
    assert all(not c.opinfo.startswith("gen:") for c in opinfo.details)
    wrong = [c for c in build(generated) if c.category == "wrong" and c.kernel == kernel]
    assert wrong, [c.summary for c in build(generated)]
    cases = [c for c in generated.cases("mismatch")]
    assert cases and all(c.opinfo == f"gen:{kernel}" for c in cases)
    keys = [sample_key(c.opinfo, c.dtype, c.sample).split("|") for c in cases]
    if kernel == "aten::add.out":  # one element against many, alpha != 1
        assert all(k[1] in ("one-vs-many", "0-d-vs-many") and k[3] not in ("1", "default") for k in keys), keys
    elif kernel == "aten::cumsum.out":
        assert all(k[2] == "int16" and k[4] in ("overflow", "int_extremes") for k in keys), keys
    else:
        assert all(k[4] in ("huge", "large_magnitude") for k in keys), keys
    # the same kernel right passes the same cases (the finding is the plant's)
    with etops.override(kernel, RIGHT[kernel]):
        clean = run([kernel], dtypes=dtypes, generated="only", progress=False)
    assert clean.totals()["cases"] == generated.totals()["cases"]
    assert not {(c.opinfo, c.dtype, c.sample) for c in cases} & {(c.opinfo, c.dtype, c.sample) for c in clean.cases("mismatch")}


PLANT_MODULE = '''
import torch
import etops


def load():
    def cumsum_saturating_int16(self, dim, dtype=None, out=None):
        if out.dtype == torch.int16:
            return torch.cumsum(self.to(torch.int64), dim).clamp(-32768, 32767).to(torch.int16)
        return torch.cumsum(self, dim, dtype=dtype).to(out.dtype)

    return etops.override("aten::cumsum.out", cumsum_saturating_int16)
'''


def test_check_generated_finds_the_plant_and_reports_coverage(tmp_path):
    """etops check --generated only, a plant loaded with --load: exit 1 (a wrong
    result), one wrong finding, the coverage in the JSON and on the terminal."""
    (tmp_path / "plant.py").write_text(PLANT_MODULE)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "etops", "check", "aten::cumsum.out", "--dtype", "int16", "--load", "plant.py:load",
                           "--no-progress", "--no-shrink", "--generated", "only", "--json", "gen.json"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]  # a wrong result
    data = json.loads((tmp_path / "gen.json").read_text())
    assert [f["category"] for f in data["findings"]] == ["wrong"], data["findings"]
    assert data["tasks"] == 1 and data["generated_coverage"]["kernels"] == 1
    assert "generated cases: " in proc.stdout and "pairwise coverage" in proc.stdout


def test_dev_judges_the_generated_cases_against_the_base_and_no_generated_leaves_them_out():
    """etops dev's judge on the same tasks as a round plans them (cases.plan): with
    generated cases the plant is a new wrong finding against the base (the wheel's
    kernel, swapped in), without them (--no-generated) it is not."""
    from etops.dev import cases, judge

    kernel = "aten::cumsum.out"
    with_generated = cases.plan([kernel], ["int16"])
    without = cases.plan([kernel], ["int16"], generated=False)
    assert any(t["opinfo"] == f"gen:{kernel}" for t in with_generated[kernel])
    assert not any(t["opinfo"].startswith("gen:") for t in without[kernel]) and without[kernel]
    found = {}
    with etops.override(kernel, PLANTS[kernel][0]) as handle:
        base = {}

        def install_base():
            base["handle"] = etops.override(kernel, RIGHT[kernel])

        for name, plan_ in (("with", with_generated), ("without", without)):
            found[name] = judge.judge(plan_, install_base, lambda: base.pop("handle").restore(), base_kind="built-in",
                                      guarded=False, dim_orders=False)
        assert handle.name == kernel
    gating = [f for f in found["with"]["findings"] if f.gating]
    assert gating and all(f.category == "wrong" and f.cluster.kernel == kernel for f in gating), \
        [(f.category, f.cluster.summary) for f in found["with"]["findings"]]
    assert all(c.opinfo == f"gen:{kernel}" for f in gating for c in f.cluster.cases)
    assert not [f for f in found["without"]["findings"] if f.gating]


def test_check_runs_the_generated_cases_by_default():
    """On unless --no-generated, or OpInfos are named (--opinfo); --generated only alone."""
    from etops.conformance.cli import build_parser, generated_cases

    def generated(*argv):
        return generated_cases(build_parser().parse_args(list(argv)))

    assert generated() is True and generated("aten::add.out") is True
    assert generated("--no-generated") is False and generated("--opinfo", "add") is False
    assert generated("--opinfo", "add", "--generated") is True and generated("--generated", "only") == "only"
