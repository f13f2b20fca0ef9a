"""``etops dev``'s verdicts on plants of each kind in the miniature checkout, and
their reproducers: each finding's script exits 1 while the plant stands and 0 once
it is reverted (the file back at HEAD, the base). The kinds: a wrong value hidden
under a base finding of the same kind (matched case by case, never by message), a
precision regression within OpInfo's tolerance, a read past an input, a write past
the out, a crash, an abort, a dim-order bug."""

from __future__ import annotations

import json

import pytest

import minicheckout
from etops.cli import main as cli_main
from scripts import Scripts

CPU = "kernels/portable/cpu"
#: the plants are caught on the cases of the operators' own OpInfos (--opinfo): the other OpInfos
#: reaching mul.out and add.out (fifty) would add cases, not kinds of finding
FLAGS = ["--dtype", "float32", "--no-timing", "--no-gtest", "--budget", "60", "--opinfo", "add", "--opinfo", "mul",
         "--opinfo", "floor_divide"]


@pytest.fixture()
def repo(tmp_path):
    return minicheckout.git_checkout(tmp_path)


def _dev(files, out, capsys) -> tuple[int, str, list]:
    code = cli_main(["dev", *map(str, files), *FLAGS, "--json", str(out)])
    printed = capsys.readouterr().out
    return code, printed, [x for f in json.loads(out.read_text())["files"] for x in f["findings"]]


def _reproduce(scripts: Scripts, script: str) -> int:
    """The exit code of a finding's reproducer (which loads the kernel file as it is now), run as
    ``python SCRIPT`` runs it (scripts.Scripts: torch and etops imported once per test)."""
    code, out, err = scripts.run(script)
    assert code in (0, 1), out[-2000:] + err[-2000:]
    return code


def _plant(repo, name: str, source: str, *plants) -> None:
    for plant in plants:
        assert plant[0] in source, plant[0]
        source = source.replace(*plant)
    (repo / CPU / name).write_text(source)


def test_each_kind_is_a_gating_finding_whose_reproducer_fails_then_passes_once_reverted(repo, tmp_path, capsys):
    """One round over three files: a precision regression (add.out: within OpInfo's
    tolerance, an error of several ulps where the base and ATen have half of one),
    an abort (add.Scalar_out, an ET_CHECK on one element), a read past an input
    (mul.out: guarded, the reproducer too), a crash in no tensor (floor_divide)."""
    _plant(repo, "op_add.cpp", minicheckout.add_source(), minicheckout.IMPRECISE, minicheckout.ABORTS_ON_ONE_ELEMENT)
    _plant(repo, "op_mul.cpp", minicheckout.MUL, minicheckout.READS_PAST_INPUT)
    _plant(repo, "op_floor_divide.cpp", minicheckout.FLOOR_DIVIDE, minicheckout.CRASHES)
    files = [repo / CPU / f"op_{n}.cpp" for n in ("add", "mul", "floor_divide")]
    code, printed, findings = _dev(files, tmp_path / "dev.json", capsys)
    assert code == 1, printed
    gating = {(x["kernel"], x["category"]): x for x in findings if x["gating"] and not x["layout"]}
    wanted = [("aten::add.out", "precision regression"), ("aten::add.Scalar_out", "abort"), ("aten::mul.out", "memory"),
              ("aten::floor_divide.Scalar_out", "crash")]
    assert set(wanted) <= set(gating), sorted(gating)
    assert gating[("aten::mul.out", "memory")]["memory"] == "read past the end of argument 'self'"
    regression = gating[("aten::add.out", "precision regression")]
    assert "the base by" in regression["side"] and "ATen by" in regression["side"], regression["side"]
    scripts = {key: gating[key]["reproducer"] for key in wanted}
    assert all(scripts.values()), scripts
    assert "etops.guard.call" in open(scripts[("aten::mul.out", "memory")]).read()
    with Scripts(tmp_path) as run:
        assert {key: _reproduce(run, s) for key, s in scripts.items()} == dict.fromkeys(wanted, 1)
        minicheckout.git(repo, "checkout", "--", ".")  # the plants reverted: the files as the base
        assert {key: _reproduce(run, s) for key, s in scripts.items()} == dict.fromkeys(wanted, 0)


def test_a_new_wrong_value_is_found_though_the_base_has_a_finding_worded_the_same(repo, tmp_path, capsys):
    """The base (committed) already returns inf for a first operand below -5; the edit
    also for one above 5. Both read "non-finite where ATen's are finite": the edit's
    cases are new (the base passes them), a finding of their own, gating; the
    base's are "also in base". The new finding's reproducer fails on the edit and
    passes on the base."""
    _plant(repo, "op_mul.cpp", minicheckout.MUL, minicheckout.BASE_WRONG)
    minicheckout.commit(repo)
    _plant(repo, "op_mul.cpp", (repo / CPU / "op_mul.cpp").read_text(), minicheckout.EDIT_WRONG)
    code, printed, findings = _dev([repo / CPU / "op_mul.cpp"], tmp_path / "dev.json", capsys)
    assert code == 1, printed
    contiguous = [x for x in findings if not x["layout"]]
    new = [x for x in contiguous if x["gating"]]
    shared = [x for x in contiguous if x["in_base"] and x["category"] == "wrong"]
    assert [x["category"] for x in new] == ["wrong"] and len(shared) == 1, contiguous
    assert new[0]["signature"] == shared[0]["signature"]  # worded alike: matched by case, not by message
    with Scripts(tmp_path) as run:
        assert _reproduce(run, new[0]["reproducer"]) == 1
        minicheckout.git(repo, "checkout", "--", ".")
        assert _reproduce(run, new[0]["reproducer"]) == 0


def test_a_write_past_the_out_and_a_dim_order_bug_reproduce_until_reverted(repo, tmp_path, capsys):
    _plant(repo, "op_add.cpp", minicheckout.add_source(), minicheckout.OUT_OF_BOUNDS)
    _plant(repo, "op_mul.cpp", minicheckout.MUL, minicheckout.IGNORES_DIM_ORDER)
    code, printed, findings = _dev([repo / CPU / "op_add.cpp", repo / CPU / "op_mul.cpp"], tmp_path / "dev.json", capsys)
    assert code == 1, printed
    memory = [x for x in findings if x["gating"] and x["category"] == "memory" and not x["layout"]]
    laid = [x for x in findings if x["gating"] and x["layout"] and x["kernel"] == "aten::mul.out"]
    assert memory and memory[0]["memory"] == "write past the end of argument 'out'", findings
    assert laid, findings
    scripts = [memory[0]["reproducer"], laid[0]["reproducer"]]
    assert 'etops.layout("preserve")' in open(scripts[1]).read()
    with Scripts(tmp_path) as run:
        assert [_reproduce(run, s) for s in scripts] == [1, 1]
        minicheckout.git(repo, "checkout", "--", ".")
        assert [_reproduce(run, s) for s in scripts] == [0, 0]
