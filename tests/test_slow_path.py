"""The slow-path interface: the C call hands SlowPath the arguments it already
bound (one tuple, plan order, defaults filled, missing outs as None), so Python
never binds a call again; each hand-off is its own named entry of a typed table
(SlowPathTable), and a check that made the call answers Handled(result)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import etops
from etops import _native
from etops.errors import KernelError
from etops.kernel import KernelInfo
from etops.slow_path import SLOW_PATH, SlowPath, table_of

sys.path.insert(0, str(Path(__file__).parent / "delegate"))


class NoBindInfo(KernelInfo):
    """A KernelInfo that fails the test if anything binds a call in Python."""

    prechecked: list

    def bind(self, args, kwargs):
        raise AssertionError(f"{self.name}: the slow path bound the call again")

    def precheck(self, bound):
        self.prechecked.append(dict(bound))


class Recorder(SlowPath):
    """SLOW_PATH's behaviour, with every entry point and its bound values recorded."""

    def __init__(self):
        self.calls = []

    def _record(name):  # noqa: N805 - builds the recording methods below
        def method(self, kernel, values, extra):
            self.calls.append((name, values))
            return getattr(SlowPath, name)(self, kernel, values, extra)

        return method

    allocate_and_call = _record("allocate_and_call")
    precheck = _record("precheck")
    explain_mismatch = _record("explain_mismatch")
    failed = _record("failed")
    no_kernel = _record("no_kernel")


def no_bind_kernel(name: str, slow=SLOW_PATH, precheck: bool = False):
    """A C Kernel of registry operator `name` whose info refuses to bind."""
    real = getattr(etops.registry().aten, name.split("::")[1].split(".")[0])
    real = getattr(real, name.rsplit(".", 1)[1])._info
    info = NoBindInfo(real.name, real._schema, real.schema_source, real._plan, None)
    info.prechecked = []
    table = slow if isinstance(slow, _native.SlowPathTable) else table_of(slow)
    return _native.Kernel(info.name, real._plan.args, real._plan.returns, info, table, precheck=precheck), info


def test_allocating_missing_outs_uses_the_values_c_bound():
    slow = Recorder()
    add, _info = no_bind_kernel("aten::add.out", slow)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(add(a, b), a + b)
    name, values = slow.calls[0]
    assert name == "allocate_and_call"
    # plan order (self, other, alpha, out): the default filled in, the missing out as None
    assert values[0] is a and values[1] is b and values[2] == 1 and values[3] is None


def test_keyword_arguments_arrive_in_plan_order():
    slow = Recorder()
    add, _info = no_bind_kernel("aten::add.out", slow)
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(add(other=b, alpha=2, self=a), a + 2 * b)
    _name, values = slow.calls[0]
    assert values[0] is a and values[1] is b and values[2] == 2 and values[3] is None


def test_resizing_an_out_uses_the_values_c_bound():
    slow = Recorder()
    add, _info = no_bind_kernel("aten::add.out", slow)
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    out = torch.empty(0)
    assert add(a, b, out=out) is out
    assert out.shape == (4, 5)
    torch.testing.assert_close(out, a + b)
    name, values = slow.calls[0]
    assert name == "failed" and values[3] is out


def test_a_failing_kernel_raises_without_binding_again():
    slow = Recorder()
    add, _info = no_bind_kernel("aten::add.out", slow)
    a = torch.randn(2, 2)
    with pytest.raises(KernelError):
        add(a, a, out=torch.empty(2, 2, dtype=torch.int64))  # float into int64: refused
    assert [name for name, _ in slow.calls] == ["failed"]


def test_the_precheck_entry_point_gets_the_bound_arguments():
    slow = Recorder()
    add, info = no_bind_kernel("aten::add.out", slow, precheck=True)
    a, b = torch.randn(3), torch.randn(3)
    out = torch.empty(3)
    add(a, b, out=out)
    assert [name for name, _ in slow.calls] == ["precheck"]
    assert list(info.prechecked[0]) == ["self", "other", "alpha", "out"]
    assert info.prechecked[0]["out"] is out and info.prechecked[0]["alpha"] == 1


def test_no_kernel_describes_the_bound_call():
    x = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(etops.NoMatchingKernelError, match="kernel key"):
        SLOW_PATH.no_kernel(etops.registry().aten.add.out, (x, x, 1, x), None)


def test_a_delegate_spec_mismatch_is_its_own_entry_point():
    from delegate_helpers import build_test_backend, lower_to_test_backend

    build_test_backend()

    kernel = etops.delegate.load(lower_to_test_backend(), name="mismatch")
    info = kernel._info
    slow = Recorder()
    recording = _native.Kernel(
        info.name, info._plan.args, info._plan.returns, info, table_of(slow),
        precheck=False, delegate=info._handle, specs=info.c_specs(),
    )
    x = torch.randn(2, 3)
    out = torch.empty(2, 3)
    recording(x, out=out)
    assert slow.calls == []  # a matching call never leaves C
    with pytest.raises(TypeError, match="argument 'x'"):
        recording(x.double(), out=out)
    assert [name for name, _ in slow.calls] == ["explain_mismatch"]
    assert slow.calls[0][1][0].dtype == torch.float64 and slow.calls[0][1][1] is out


def test_kernel_and_delegate_infos_implement_the_protocol():
    from etops.delegate.load import DelegateInfo
    from etops.slow_path import SlowPathInfo

    methods = [n for n in dir(SlowPathInfo) if not n.startswith("_")]
    assert methods, "the protocol names the methods the slow path calls"
    for cls in (KernelInfo, DelegateInfo):
        assert [n for n in methods if not callable(getattr(cls, n, None))] == [], cls
    info = etops.registry().aten.add.out._info
    attributes = list(SlowPathInfo.__annotations__)
    assert [n for n in attributes if not hasattr(info, n)] == []
    assert info.arg_names() == ("self", "other", "alpha", "out")


def every_entry(**replaced):
    """SLOW_PATH's entries as keyword arguments, some replaced."""
    return {name: replaced.get(name, getattr(SLOW_PATH, name)) for name in _native.SLOW_PATH_ENTRIES}


def test_the_table_names_a_missing_or_uncallable_entry():
    entries = every_entry()
    del entries["validate"]
    with pytest.raises(TypeError, match="missing required argument 'validate'"):
        _native.SlowPathTable(**entries)
    with pytest.raises(TypeError, match="argument 'failed' must be callable, not int"):
        _native.SlowPathTable(**every_entry(failed=3))
    table = _native.SlowPathTable(**every_entry())
    with pytest.raises(TypeError, match="entry 'guarded' must be callable"):
        table.guarded = None


def test_a_kernel_takes_only_a_table_as_its_slow_path():
    real = etops.registry().aten.add.out._info
    with pytest.raises(TypeError, match="argument 'slow_path' must be a SlowPathTable"):
        _native.Kernel(real.name, real._plan.args, real._plan.returns, real, SlowPath())


def precheck_kernel(answer):
    """add.out with a precheck entry answering `answer` (before any other entry runs)."""
    real = etops.registry().aten.add.out._info
    table = _native.SlowPathTable(**every_entry(precheck=lambda kernel, values, extra: answer))
    return _native.Kernel(real.name, real._plan.args, real._plan.returns, real, table, precheck=True)


def test_a_check_that_made_the_call_answers_handled():
    made = torch.zeros(1)
    add = precheck_kernel(_native.Handled(made))
    assert add(torch.ones(2), torch.ones(2)) is made
    assert repr(_native.Handled(1)) == "Handled(1)"


def test_an_answer_of_another_type_is_refused_naming_the_entry():
    a = torch.ones(2)
    # the shape the untyped interface read, (result,), is no answer now
    with pytest.raises(TypeError, match="precheck answered tuple, not Handled or None"):
        precheck_kernel((a,))(a, a)
    real = etops.registry().aten.sub.out._info
    table = _native.SlowPathTable(**every_entry(validate=lambda kernel, values, extra: None))
    sub = _native.Kernel(real.name, real._plan.args, real._plan.returns, real, table, validate=True)
    with pytest.raises(TypeError, match="validate answered NoneType, not Handled or a bool"):
        sub(a, a, out=torch.empty(2))
