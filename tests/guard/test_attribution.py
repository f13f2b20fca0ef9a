"""Mapping a guard process's fault record back to a tensor argument
(etops/guard/attribute.py) on layouts made up here: a fault within a page of a
buffer's data is that buffer's, a farther one asks for an attribution run reaching
twice past it, and one no guard region can reach is given relative to every tensor
argument. Real faults, and the attribution run itself, are in
tests/custom/inprocess/check_guard_reach.py (a kernel of our own)."""

import pickle
import signal

import pytest

from etops.crash_site import relative
from etops.guard import attribute, server
from etops.guard.buffers import DEFAULT_REACH, MAX_REACH, PAGE, GuardedBuffer

MIB = 1 << 20
# two buffers as the guard process lays them out: label, mapping, data, reach
X = ("x", 100 * MIB, 100 * MIB + 2 * DEFAULT_REACH + PAGE, 100 * MIB + DEFAULT_REACH + 4056, 100 * MIB + DEFAULT_REACH + PAGE, DEFAULT_REACH)
OUT = ("out", 300 * MIB, 300 * MIB + 2 * DEFAULT_REACH + PAGE, 300 * MIB + DEFAULT_REACH, 300 * MIB + DEFAULT_REACH + 40, DEFAULT_REACH)
LAYOUT = [X, OUT]


class _Info:
    name = "gtest::made_up.out"


def _died(address, is_write=0, signo=signal.SIGSEGV, stack_pointer=0):
    return server.Died(signo, (signo, is_write, 1, address, stack_pointer), LAYOUT, "")


def test_relative_measures_both_sides_from_the_first_byte_outside():
    assert relative(99, [("a", 100, 140)]) == [("a", "before the start", 0)]
    assert relative(140, [("a", 100, 140)]) == [("a", "past the end", 0)]
    assert relative(104, [("a", 100, 140), ("b", 200, 240)]) == [("a", "inside", 4), ("b", "before the start", 95)]
    assert [r[0] for r in relative(190, [("a", 100, 140), ("b", 200, 240)])] == ["b", "a"]  # nearest first


def test_a_fault_within_a_page_of_a_buffer_is_named_at_once():
    assert attribute.in_buffer(X[3] - 4, LAYOUT, within=PAGE) == ("x", "before the start", 3)
    assert attribute.in_buffer(OUT[4] + 8, LAYOUT, within=PAGE) == ("out", "past the end", 8)
    assert attribute.in_buffer(X[3] + 8, LAYOUT, within=PAGE) == ("x", "inside", 8)  # a read-only input
    err = attribute.crash(None, _Info, {}, _died(X[3] + 8, is_write=1))
    assert (err.argument, err.access, err.where, err.offset) == ("x", "write", "inside a read-only input", 8)


def test_a_farther_fault_in_a_guard_region_is_not_trusted_to_its_buffer():
    """Another buffer's longer overrun may have crossed into this region."""
    assert attribute.in_buffer(OUT[4] + PAGE, LAYOUT, within=PAGE) is None
    assert attribute.in_buffer(OUT[4] + PAGE, LAYOUT, within=None) == ("out", "past the end", PAGE)
    assert attribute.in_buffer(OUT[1] - 1, LAYOUT, within=None) is None  # between the buffers' mappings


def test_an_attribution_run_reaches_twice_past_the_fault_from_every_buffer():
    address = OUT[4] + 5 * MIB
    reach = attribute.attribution_reach(address, LAYOUT)
    assert reach % PAGE == 0 and reach >= 2 * (address - X[4]) and reach >= DEFAULT_REACH
    assert attribute.attribution_reach(OUT[4] + MAX_REACH + 1, LAYOUT) is None  # no reach gets there


def test_a_fault_no_guard_region_can_reach_is_given_relative_to_every_argument():
    address = OUT[4] + MAX_REACH + 10  # past every attribution run's reach: no run
    err = attribute.crash(None, _Info, {}, _died(address))
    assert (err.argument, err.access, err.where, err.offset) == ("out", "read", "past the end", MAX_REACH + 10)
    text = str(err)
    assert "in no guard region" in text and f"'out' {MAX_REACH + 10} bytes past the end" in text, text
    assert f"'x' {address - X[4]} bytes past the end" in text, text
    assert pickle.loads(pickle.dumps(err)).detail == err.detail


def test_a_null_pointer_and_a_death_without_fault_name_no_argument():
    err = attribute.crash(None, _Info, {}, _died(16))
    assert err.argument is None and "died with SIGSEGV" in str(err)
    err = attribute.crash(None, _Info, {}, server.Died(signal.SIGABRT, None, LAYOUT, "boom"))
    assert err.argument is None and err.signal == "SIGABRT"


def test_a_fault_next_to_the_stack_pointer_is_a_stack_overflow_not_an_overrun():
    """The guard process's stack ran out: whatever buffer lies near, no argument is
    blamed (a kernel recursing without end was 'a write past the end of x')."""
    address = OUT[4] + 5 * MIB  # an attribution run would blame out
    err = attribute.crash(None, _Info, {}, _died(address, is_write=1, stack_pointer=address + 64))
    assert (err.argument, err.access, err.where, err.offset) == (None, "write", "stack overflow", None)
    assert "stack overflow" in str(err) and "argument '" not in str(err)
    far = attribute.crash(None, _Info, {}, _died(OUT[4] + MAX_REACH + 10, stack_pointer=OUT[4] + 4 * MAX_REACH))
    assert far.where == "past the end"  # a stack pointer far away: no stack overflow


@pytest.mark.parametrize("side", ["after", "before"])
def test_a_buffer_lies_between_its_guard_regions(side):
    buffer = GuardedBuffer(40, side, reach=3 * PAGE)
    assert buffer.reach == 3 * PAGE and buffer.map_end - buffer.map_start == 7 * PAGE
    assert (buffer.data_end if side == "after" else buffer.data_start) == buffer.map_start + (4 if side == "after" else 3) * PAGE
    assert GuardedBuffer(40, side).reach == DEFAULT_REACH
    assert GuardedBuffer(DEFAULT_REACH + 1, side).reach == DEFAULT_REACH + PAGE  # sized to the tensor
    label, *_ = buffer.record("t")
    assert label == "t"


def test_guard_regions_shrink_to_what_an_address_space_limit_allows():
    """The fuzzer's workers run under RLIMIT_AS: a buffer still gets guard regions."""
    import os
    import resource

    pid = os.fork()
    if pid == 0:
        try:
            with open("/proc/self/status") as f:
                size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
            resource.setrlimit(resource.RLIMIT_AS, (size + (64 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
            buffer = GuardedBuffer(40, "after", reach=1 << 30)
            os._exit(0 if PAGE <= buffer.reach < 1 << 30 and buffer.map_end - buffer.map_start < 64 << 20 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
