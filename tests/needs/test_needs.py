"""etops.needs against executorch.runtime on the same .pte: programs it calls
complete load and run, one it flags fails to load with OperatorMissing (0x14); a
kernel registered for the program's exact key (in a fresh interpreter: the other
tests expect the wheel's registry); bad files; the CLI (etops.cli.main); the
selective-build YAML against gen_oplist's."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import torch
import yaml
from fresh_python import start_python
from needs_programs import (
    PLAIN_INPUTS, SCALED_INPUTS, Branchy, Dynamic, Linear, Plain, Scaled, define_scale_op,
    load_and_run, to_pte, to_xnnpack_pte,
)

import etops
from etops.needs import ProgramFileError

#: executorch.runtime's message for Error::OperatorMissing (0x14)
OPERATOR_MISSING = re.compile(r"0x:?14")

# The custom kernel registered for the scaled program's exact key, by
# etops.register_kernel and by `etops needs --load MODULE.py:FUNCTION PROGRAM` (issue
# 28): registering changes the process-wide registry (the other tests expect the
# wheel's), so in a fresh interpreter, each way in a fork of its own
# (etops.child_process.ChildCall) of it.
_HERE = os.path.dirname(os.path.abspath(__file__))
_CUSTOM_HELPERS = os.path.join(os.path.dirname(_HERE), "custom", "inprocess")
_CUSTOM = """
import json, os, sys, tempfile
sys.path[:0] = [HERE, CUSTOM]
import torch, etops
from executorch.runtime import Runtime  # imported once, before the forks
from etops.child_process import ChildCall
from etops.cli import main
from custom_helpers import SCALE_SOURCE  # the custom-kernel tests' y = K * x
from needs_programs import SCALED_INPUTS, define_scale_op, load_and_run
define_scale_op()
program = PROGRAM
pte = open(program, "rb").read()


def registered():
    before = etops.needs(pte)
    loaded_before = load_and_run(pte, SCALED_INPUTS)
    handle = etops.register_kernel("needs16::scale.out", SCALE_SOURCE.replace("K *", "3 *"), [(torch.float32, 2)])
    after = etops.needs(pte)
    got = load_and_run(pte, SCALED_INPUTS)
    row = [n for n in after.kernels if n.site.operator == "needs16::scale.out"][0]
    return {
        "before_ok": before.ok, "before_missing": [m.site.operator for m in before.missing],
        "loaded_before": str(loaded_before), "handle_key": handle.key,
        "after_ok": after.ok, "how": row.how, "key": row.key, "origin": row.origin.kind,
        "got": [t.tolist() for t in got], "want": (3 * (SCALED_INPUTS[0] + 1)).tolist(),
    }


def loaded_by_the_cli():
    folder = tempfile.mkdtemp()
    module = os.path.join(folder, "my_kernels.py")
    open(module, "w").write(
        "import sys, torch, etops\\n"
        "sys.path.insert(0, CUSTOM)\\n"
        "from custom_helpers import SCALE_SOURCE\\n"
        "def install():\\n"
        "    return etops.register_kernel('needs16::scale.out', SCALE_SOURCE.replace('K *', '3 *'), [(torch.float32, 2)])\\n")
    without = main(["needs", program, "--json", os.path.join(folder, "without.json")])
    code = main(["needs", "--load", module + ":install", program, "--json", os.path.join(folder, "with.json")])
    row = [k for k in json.load(open(os.path.join(folder, "with.json")))["kernel_calls"] if k["operator"] == "needs16::scale.out"]
    return {"without": without, "with": code, "row": row}


results = {}
for name, work in (("registered", registered), ("loaded by the cli", loaded_by_the_cli)):
    done = ChildCall(work).result(300)
    results[name] = done.value if done.kind == "returned" else f"{done.kind}: {done.ended()}\\n{done.error}"
print("RESULT " + json.dumps(results))
""".replace("HERE", repr(_HERE)).replace("CUSTOM", repr(_CUSTOM_HELPERS))
_CUSTOM_RUNS: list = []


def _custom_run(name: str, programs) -> dict:
    """What the fresh interpreter's fork `name` returned."""
    done = _CUSTOM_RUNS[-1].result()
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-4000:]
    r = json.loads(lines[0][len("RESULT "):])[name]
    assert isinstance(r, dict), r
    return r


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """name -> (.pte path, inputs): each program exported once."""
    define_scale_op()
    folder = tmp_path_factory.mktemp("needs")
    x = torch.randn(4, 4)
    made = {
        "plain": (to_pte(Plain(), PLAIN_INPUTS), PLAIN_INPUTS),
        "dynamic": (to_pte(Dynamic(), (x,), dynamic_shapes=({0: torch.export.Dim("n", min=2, max=8)},)), (torch.randn(6, 4),)),
        "cond": (to_pte(Branchy(), (x,)), (-x.abs(),)),
        "xnnpack": (to_xnnpack_pte(Linear(), (torch.randn(3, 8),)), (torch.randn(3, 8),)),
        "scaled": (to_pte(Scaled(), SCALED_INPUTS), SCALED_INPUTS),
    }
    out = {}
    for name, (pte, inputs) in made.items():
        path = folder / f"{name}.pte"
        path.write_bytes(pte)
        out[name] = (str(path), inputs)
    _CUSTOM_RUNS.append(start_python(_CUSTOM.replace("PROGRAM", repr(out["scaled"][0]))))
    _CUSTOM_RUNS[-1].start()  # beside the tests that follow
    return out


MODELS = {"plain": Plain(), "dynamic": Dynamic(), "cond": Branchy()}


@pytest.mark.parametrize("name", ["plain", "dynamic", "cond", "xnnpack"])
def test_complete_program_loads_and_runs(programs, name):
    path, inputs = programs[name]
    result = etops.needs(path)
    assert result.ok, result.text()
    assert result.kernels and all(n.how in ("exact", "fallback") and n.kernel is not None for n in result.kernels)
    assert all(n.origin is not None and n.origin.kind == "built-in" for n in result.kernels)
    outputs = load_and_run(open(path, "rb").read(), inputs)
    assert not isinstance(outputs, Exception), outputs
    if name in MODELS:
        want = MODELS[name](*inputs)
        want = want if isinstance(want, tuple) else (want,)
        for got, expected in zip(outputs, want):
            torch.testing.assert_close(got, expected)


def test_dynamic_and_cond_call_sites(programs):
    dynamic = etops.needs(programs["dynamic"][0])
    assert any(a.dynamic for n in dynamic.kernels for a in n.site.arguments if a.kind == "Tensor")
    prims = [n for n in dynamic.kernels if not n.site.tensors]  # sym_size and the int arithmetic
    assert prims and all(n.key is None and n.how == "fallback" for n in prims), dynamic.text()
    cond = etops.needs(programs["cond"][0])
    ops = {n.site.operator for n in cond.kernels}
    assert {"aten::sin.out", "aten::cos.out"} <= ops  # both branches' calls
    # the predicate, then each branch: the instructions between are jumps and moves
    assert [n.site.instruction for n in cond.kernels] == [0, 1, 3, 6, 7, 8]


def test_xnnpack_delegate_call(programs):
    result = etops.needs(programs["xnnpack"][0])
    assert [d.site.backend for d in result.delegates] == ["XnnpackBackend"]
    assert result.delegates[0].registered and result.delegates[0].available
    assert "delegate XnnpackBackend" in result.text()


def test_unregistered_custom_kernel_is_missing_and_fails_to_load(programs):
    path, inputs = programs["scaled"]
    result = etops.needs(path)
    assert not result.ok
    [missing] = result.missing
    assert missing.site.operator == "needs16::scale.out" and missing.how == "missing"
    assert missing.key == "v1/6;0,1|6;0,1|6;0,1"
    assert "no kernel is registered under needs16::scale.out" in missing.reason
    assert "MISSING" in result.text() and "will NOT load here" in result.summary()
    error = load_and_run(open(path, "rb").read(), inputs)
    assert isinstance(error, Exception) and OPERATOR_MISSING.search(str(error)), error


def test_needs_loads_kernels_with_load(programs):
    r = _custom_run("loaded by the cli", programs)
    assert r["without"] == 1 and r["with"] == 0, r
    assert r["row"] and r["row"][0]["how"] == "exact" and r["row"][0]["origin"]["kind"] == "custom", r


def test_kernel_registered_for_the_exact_key_is_picked(programs):
    r = _custom_run("registered", programs)
    assert not r["before_ok"] and r["before_missing"] == ["needs16::scale.out"]
    assert OPERATOR_MISSING.search(r["loaded_before"]), r["loaded_before"]
    assert r["handle_key"] == r["key"] == "v1/6;0,1|6;0,1|6;0,1"
    assert r["after_ok"] and r["how"] == "exact" and r["origin"] == "custom"
    assert r["got"] == [r["want"]]


def test_sources_other_than_a_path(programs):
    path, _ = programs["plain"]
    from_bytes = etops.needs(open(path, "rb").read())
    assert from_bytes.source == "<bytes>"
    from executorch.exir import to_edge

    edge = to_edge(torch.export.export(Plain(), PLAIN_INPUTS))
    from_edge = etops.needs(edge)
    assert from_edge.operators == from_bytes.operators == etops.needs(path).operators
    manager = edge.to_executorch()  # after needs(edge) read it
    assert etops.needs(manager).operators == from_bytes.operators
    with pytest.raises(TypeError, match="program: expected a .pte path"):
        etops.needs(42)


def test_bad_files_raise_program_file_error_naming_the_file(programs, tmp_path):
    data = open(programs["plain"][0], "rb").read()
    cases = {
        "truncated.pte": (data[: len(data) // 2], "(truncated|cannot be read)"),
        "short.pte": (data[:6], "too short"),
        "garbled.pte": (b"\xff\xff\xff\x7f" + data[4:], "cannot be read as an ExecuTorch program"),
        "overwritten.pte": (data[:8] + b"\xab" * (len(data) // 2) + data[8 + len(data) // 2 :], "cannot be read as an ExecuTorch program"),
        "text.pte": (b"hello, this is not a program at all", "not an ExecuTorch program"),
    }
    for name, (content, what) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ProgramFileError, match=re.escape(str(path)) + ".*" + what):
            etops.needs(str(path))
    with pytest.raises(ProgramFileError, match="no file"):
        etops.needs(str(tmp_path / "absent.pte"))


def _cli(capsys, *args) -> subprocess.CompletedProcess:
    """`etops needs ARGS` by etops.cli.main, the function `python -m etops` calls (no
    --load: the registry stays as it is): its exit code, stdout and stderr."""
    from etops.cli import main

    code = main(["needs", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_cli(programs, tmp_path, capsys):
    plain, scaled = programs["plain"][0], programs["scaled"][0]
    report, selected = tmp_path / "needs.json", tmp_path / "selected_operators.yaml"
    ok = _cli(capsys, plain, "--json", "-", "--selected-ops", str(selected))
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["ok"] and data["missing"] == 0 and "aten::lt.Tensor_out" in data["operators"]
    assert data == json.loads(json.dumps(etops.needs(plain).to_dict()))
    assert yaml.safe_load(selected.read_text()) == etops.needs(plain).selected_operators()
    bad = _cli(capsys, scaled, "--json", str(report))
    assert bad.returncode == 1, bad.stderr
    assert "needs16::scale.out" in bad.stdout and "MISSING" in bad.stdout and "missing: forward 0:2" in bad.stdout
    data = json.loads(report.read_text())
    assert not data["ok"] and [k["how"] for k in data["kernel_calls"] if k["operator"] == "needs16::scale.out"] == ["missing"]


def test_selected_operators_against_gen_oplist(programs, tmp_path):
    from executorch.codegen.tools.gen_oplist import gen_oplist

    path = programs["plain"][0]
    theirs_path = tmp_path / "gen_oplist.yaml"
    gen_oplist(output_path=str(theirs_path), model_file_path=path)
    theirs = yaml.safe_load(theirs_path.read_text())
    ours = etops.needs(path).selected_operators()
    assert set(ours) == set(theirs)  # the same layout
    assert set(ours["operators"]) == set(theirs["operators"])
    assert set(ours["et_kernel_metadata"]) == set(theirs["et_kernel_metadata"])
    for op, keys in theirs["et_kernel_metadata"].items():
        if op != "aten::cat.out":  # gen_oplist keys the TensorList too; ExecuTorch's loader does not
            assert set(keys) <= set(ours["et_kernel_metadata"][op]), op
    assert theirs["et_kernel_metadata"]["aten::cat.out"] == ["v1/6;0,1|6;0,1|6;0,1"]
    assert ours["et_kernel_metadata"]["aten::cat.out"] == ["v1/6;0,1|6;0,1"]
    # what gen_oplist misses: the Scalar alpha=2 of add (Long) and lt's int16 compute dtype (uint8 < int8)
    extra = {op: set(ours["et_kernel_metadata"][op]) - set(keys) for op, keys in theirs["et_kernel_metadata"].items()}
    assert extra["aten::add.out"] == {"v1/4;"}
    assert extra["aten::lt.Tensor_out"] == {"v1/2;"}
    assert not extra["aten::sum.IntList_out"] and not extra["dim_order_ops::_to_dim_order_copy.out"]
