"""The state every test module must leave as it found it (state_guard.py, checked
around each module by tests/conftest.py): a schema or an environment variable left
behind is a change; a kernel object made for the first time is not."""

from __future__ import annotations

import etops
from etops import schemas
from state_guard import process_state, state_changes

SCHEMA = "executorch_prim::floordiv.int(int a, int b) -> int"


def test_a_user_schema_left_behind_is_a_change(reg, user_schemas):
    schemas._user_schemas.pop("executorch_prim::floordiv.int", None)  # the fixture's copy: as if no test gave one
    reg.get_kernel("executorch_prim::floordiv.int", schema=None)
    before = process_state()
    etops.set_schema("executorch_prim::floordiv.int", SCHEMA)
    reg.get_kernel("executorch_prim::floordiv.int", schema=SCHEMA)
    changes = state_changes(before, process_state())
    assert any(c.startswith("etops.set_schema schemas") and "floordiv" in c for c in changes), changes
    assert any(c.startswith("cached kernel object executorch_prim::floordiv.int") for c in changes), changes


def test_an_environment_variable_left_behind_is_a_change(monkeypatch):
    monkeypatch.setenv("STATE_GUARD_PROBE", "0")
    before = process_state()
    monkeypatch.setenv("ETOPS_STATE_GUARD_PROBE", "1")
    monkeypatch.setenv("STATE_GUARD_PROBE", "1")
    monkeypatch.setenv("STATE_GUARD_PROBE_ADDED", "1")  # not etops': a library's, set on first use
    assert state_changes(before, process_state()) == ["os.environ['ETOPS_STATE_GUARD_PROBE']: None -> '1'",
                                                      "os.environ['STATE_GUARD_PROBE']: '0' -> '1'"]


def test_a_kernel_object_made_for_the_first_time_is_not_a_change(reg):
    before = process_state()
    reg.aten.mul.out  # noqa: B018 (made on first use)
    reg.aten.sub.out  # noqa: B018
    assert state_changes(before, process_state()) == []
