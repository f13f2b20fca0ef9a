"""``etops dev --opinfo NAME``: the cases of the named OpInfos alone (their samples,
the derived cases taking theirs; no reference or generated case), a name no OpInfo
has a usage error before anything runs. A round with the filter:
tests/dev/inprocess/check_gate.py (the hang tests: the JSON's sources are ``mul``'s alone)."""

from __future__ import annotations

import pytest

from etops.cli import main as cli_main
from etops.dev.cases import chosen_opinfos, only_opinfos


def test_the_named_opinfos_tasks_are_kept_a_derived_one_by_the_opinfo_it_samples():
    plan = {"aten::mul.out": [{"opinfo": "mul", "dtype": "float32"}, {"opinfo": "outer", "dtype": "float32"},
                              {"opinfo": "gen:aten::mul.out", "dtype": "float32"}],
            "aten::add.Scalar_out": [{"opinfo": "derived:aten::add.Scalar_out|aten::add.out|mul", "dtype": "float32"},
                                     {"opinfo": "derived:aten::add.Scalar_out|aten::add.out|add", "dtype": "float32"}]}
    chosen = chosen_opinfos(["mul"])
    assert chosen == {"mul"}
    assert only_opinfos(plan, chosen) == {
        "aten::mul.out": [{"opinfo": "mul", "dtype": "float32"}],
        "aten::add.Scalar_out": [{"opinfo": "derived:aten::add.Scalar_out|aten::add.out|mul", "dtype": "float32"}]}
    assert only_opinfos(plan, chosen_opinfos(None)) is plan and chosen_opinfos([]) is None


def test_a_name_no_opinfo_has_is_an_error_before_anything_runs(tmp_path, capsys):
    with pytest.raises(ValueError) as raised:
        chosen_opinfos(["mul", "no.such.opinfo"])
    assert "no.such.opinfo" in str(raised.value) and "'mul'" not in str(raised.value)
    kernel = tmp_path / "op_mul.cpp"
    kernel.write_text("// not built: the option is refused first\n")
    assert cli_main(["dev", str(kernel), "--opinfo", "no.such.opinfo"]) == 2
    err = capsys.readouterr().err
    assert "--opinfo" in err and "no.such.opinfo" in err
