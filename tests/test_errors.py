"""Every error path raises the right exception with the interpreter still alive:
kernel failures (KernelError with op name, Error name and code, and the kernel's
log), and the others; some in a fresh interpreter to check it exits cleanly."""

from __future__ import annotations

import logging

import pytest
import torch
from torch.testing import assert_close

import etops
from fresh_python import run_python, start_python


def _alive(reg):
    """The interpreter (and etops) still works after an error."""
    a = torch.randn(2, 3)
    assert_close(reg.aten.add.out(a, a, out=torch.empty(2, 3)), a + a)


FAILING = [
    # (name, args, kwargs, words the kernel's log holds): calls torch accepts and
    # ExecuTorch's kernels refuse (torch's refusals never reach a kernel)
    ("aten::cat.out", ([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1), {"out": torch.empty(2, 8, dtype=torch.uint16)}, "UInt16"),
    ("aten::add.out", (torch.ones(2, 3), torch.ones(2, 3)), {"out": torch.empty(2, 3, dtype=torch.complex64)}, "out_type"),
    ("aten::mul.out", (torch.ones(2, 3, dtype=torch.uint16), torch.ones(1, 3, dtype=torch.uint16)), {"out": torch.empty(2, 3, dtype=torch.uint16)}, "UInt16"),
    # (a bool alpha with a float result was here: torch's CPU kernel refuses it, so etops
    # refuses it too now, naming alpha, and the kernel never sees it: tests/ops/test_rules.py)
    ("aten::clone.out", (torch.ones(2),), {"memory_format": torch.preserve_format, "out": torch.empty(2)}, "memory_format"),
    ("aten::avg_pool2d.out", (torch.ones(1, 2, 4, 4).to(memory_format=torch.channels_last), 2), {"out": torch.empty(1, 2, 2, 2).to(memory_format=torch.channels_last)}, "dim order"),
]


@pytest.mark.parametrize("name, args, kwargs, words", FAILING, ids=[f"{f[0]}-{i}" for i, f in enumerate(FAILING)])
def test_kernel_error(reg, name, args, kwargs, words):
    with pytest.raises(etops.KernelError) as info:
        reg.get_kernel(name)(*args, **kwargs)
    err = info.value
    assert isinstance(err, RuntimeError) and isinstance(err, etops.EtopsError)
    assert err.op == name
    assert name in str(err)
    assert err.error_name == "InvalidArgument"
    assert err.error_code == 0x12
    assert "InvalidArgument" in str(err) and "0x12" in str(err)
    assert isinstance(err.log, str)
    _alive(reg)


@pytest.fixture
def quantized_loaded(reg):
    """Loads the quantized_decomposed schemas (imports executorch.kernels.quantized),
    as any user of those ops does: kernel logs must still reach KernelError after."""
    reg.get_kernel("quantized_decomposed::quantize_per_tensor.out")._schema


@pytest.mark.parametrize("name, args, kwargs, words", FAILING, ids=[f"{f[0]}-{i}" for i, f in enumerate(FAILING)])
def test_kernel_error_log(reg, quantized_loaded, name, args, kwargs, words, capfd):
    with pytest.raises(etops.KernelError) as info:
        reg.get_kernel(name)(*args, **kwargs)
    err = info.value
    assert words.lower() in err.log.lower(), err.log
    for line in err.log.splitlines():  # the message carries what the kernel logged
        assert line.strip().rstrip(":").strip() in str(err)
    captured = capfd.readouterr()
    assert "Check failed" not in captured.err, captured.err


def test_a_failure_comes_as_one_structured_value(reg, monkeypatch):
    """The bridge hands the slow path one CallFailure (kind, code, name, message,
    file:line, kernel, fault); KernelError carries its site, pickled too."""
    import pickle

    from etops.slow_path import SLOW_PATH

    seen = []
    failed = SLOW_PATH.failed
    monkeypatch.setattr(SLOW_PATH, "failed", lambda kernel, values, failure: seen.append(failure) or failed(kernel, values, failure))
    with pytest.raises(etops.KernelError) as info:
        reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
    (failure,) = seen
    assert isinstance(failure, etops._native._core.CallFailure)
    assert (failure.kind, failure.code, failure.name, failure.kernel, failure.fault) == ("error", 0x12, "InvalidArgument", "aten::cat.out", None)
    assert "Unhandled dtype UInt16" in failure.message and failure.file == "op_cat.cpp" and failure.line > 0
    err = info.value
    assert err.site == f"op_cat.cpp:{failure.line}" and str(err).endswith(f"[{err.site}]")
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.site) == (type(err), str(err), err.site)


def test_failure_kinds_are_the_bridges():
    """The kinds Python tells failures by are the ones the bridge names (call_failure.c),
    and the type stub lists the same."""
    import ast
    import pathlib

    from etops import slow_path

    kinds = etops._native._core.FAILURE_KINDS
    assert kinds == ("error", "resize_refused", "aborted", "exception", "crashed", "refused")
    assert slow_path._NEVER_AGAIN <= set(kinds)
    stub = pathlib.Path(etops._native.__file__).with_name("_core.pyi")
    tree = ast.parse(stub.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CallFailure"]
    (kind,) = [n for n in cls.body if isinstance(n, ast.AnnAssign) and n.target.id == "kind"]
    assert tuple(e.value for e in kind.annotation.slice.elts) == kinds


def test_kernel_error_repeated(reg, quantized_loaded):
    """Many failures in a row: no state leaks from one call into the next."""
    for _ in range(200):
        with pytest.raises(etops.KernelError) as info:
            reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
        assert info.value.log.count("Unhandled dtype UInt16") == 1
    _alive(reg)


def test_log_of_one_failure_not_in_the_next(reg, quantized_loaded):
    with pytest.raises(etops.KernelError):
        reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
    with pytest.raises(etops.KernelError) as info:
        reg.aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2, dtype=torch.complex64))
    assert "Unhandled dtype UInt16" not in info.value.log
    assert "out_type" in info.value.log


def test_kernel_error_without_outs_when_torch_accepts(reg):
    """torch can infer a shape the kernel then refuses (dtype it cannot cast):
    the KernelError comes through the allocating path too."""
    x = torch.zeros(2, dtype=torch.uint16)
    with pytest.raises(etops.KernelError, match="add.out") as info:
        reg.aten.add.out(x, x)
    assert info.value.error_name == "InvalidArgument"
    _alive(reg)


def test_shape_error_without_outs(reg):
    """No outs and shapes torch itself refuses: an error naming the op, not a crash."""
    with pytest.raises((ValueError, etops.SchemaError, etops.KernelError), match="cat"):
        reg.aten.cat.out([torch.ones(2, 3), torch.ones(4, 5)], 1)
    _alive(reg)


def test_successful_call_logs_go_to_logging(reg, caplog):
    """ExecuTorch messages outside failing calls reach Python logging, never stderr."""
    with caplog.at_level(logging.DEBUG, logger="etops.executorch"):
        _alive(reg)
    assert all(r.name.startswith("etops") for r in caplog.records)


ERROR_PATHS = [
    ("missing op", lambda r: r.get_kernel("aten::nope.out"), etops.KernelNotFoundError),
    ("missing overload", lambda r: r.aten.add.Tensor, AttributeError),
    ("uncallable", lambda r: r.get_kernel("executorch_prim::et_view.default")(torch.ones(2), [2]), etops.SchemaError),
    ("bad type", lambda r: r.aten.add.out(torch.ones(2), "x", out=torch.empty(2)), TypeError),
    ("missing arg", lambda r: r.aten.add.out(torch.ones(2), out=torch.empty(2)), TypeError),
    ("too many positional", lambda r: r.aten.add.out(torch.ones(2), torch.ones(2), 1, 2, 3), TypeError),
    ("meta", lambda r: r.aten.add.out(torch.ones(2, device="meta"), torch.ones(2), out=torch.empty(2)), ValueError),
    ("rank", lambda r: r.aten.add.out(torch.ones([1] * 17), torch.ones(1), out=torch.empty(1)), ValueError),
    ("expanded out", lambda r: r.aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(1).expand(2)), ValueError),
    ("overflow", lambda r: r.aten.cumsum.out(torch.ones(2), 2**64, out=torch.empty(2)), OverflowError),
    ("enum", lambda r: r.aten.sum.IntList_out(torch.ones(2), [0], dtype=torch.uint2, out=torch.empty(())), ValueError),
    ("kernel", lambda r: r.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16)), etops.KernelError),
]


@pytest.mark.parametrize("label, call, exc", ERROR_PATHS, ids=[e[0] for e in ERROR_PATHS])
def test_error_paths_leave_interpreter_alive(reg, label, call, exc):
    with pytest.raises(exc):
        call(reg)
    _alive(reg)


_SUBPROCESS_ERRORS = """
import torch, etops
reg = etops.registry()
caught = []
calls = [
    lambda: reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16)),
    lambda: reg.aten.add.out(torch.ones(2, 3), torch.ones(2, 3), out=torch.empty(2, 3, dtype=torch.int32)),
    lambda: reg.aten.add.out(torch.ones([1] * 17), torch.ones(1), out=torch.empty(1)),
    lambda: reg.aten.add.out(torch.ones(2), "x", out=torch.empty(2)),
    lambda: reg.aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(1).expand(2)),
    lambda: reg.aten.add.Tensor,
    lambda: reg.aten.nonzero.out(torch.ones(2, 2), out=torch.empty(1, dtype=torch.float32)),
    lambda: reg.aten.index.Tensor_out(torch.ones(3), [torch.tensor([5])], out=torch.empty(1)),
    lambda: reg.aten.gather.out(torch.ones(3), 0, torch.tensor([7]), out=torch.empty(1)),
    lambda: reg.aten.embedding.out(torch.ones(3, 2), torch.tensor([9]), out=torch.empty(1, 2)),
]
for call in calls:
    try:
        call()
    except Exception as e:
        caught.append(type(e).__name__)
    else:
        caught.append("none")
a = torch.ones(2)
assert torch.equal(reg.aten.add.out(a, a), a + a)
print("CAUGHT", ",".join(caught))
"""

_LOG_AFTER_QUANTIZED = """
import torch, etops
reg = etops.registry()
def log():
    try:
        reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
    except etops.KernelError as e:
        return e.log
before = log()
reg.get_kernel("quantized_decomposed::quantize_per_tensor.out")._schema  # loads the namespace's definers
after = log()
assert "Unhandled dtype UInt16" in before, before
assert "Unhandled dtype UInt16" in after, repr(after)
print("LOG-OK")
"""


# Started at collection: they run in the background while other tests run.
_LAUNCHED = {"errors": start_python(_SUBPROCESS_ERRORS), "log-after-quantized": start_python(_LOG_AFTER_QUANTIZED)}


@pytest.fixture(scope="module")
def launched():
    return _LAUNCHED


def test_error_paths_in_fresh_interpreter(launched):
    proc = launched["errors"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("CAUGHT")][0]
    caught = line.split(" ", 1)[1].split(",")
    # ExecuTorch refuses uint16; torch refuses a float result into an int32 out
    # 17 dims: beyond ExecuTorch's 16 (an UnrepresentableError, a ValueError)
    assert caught[:6] == ["KernelError", "TypeError", "UnrepresentableError", "TypeError", "ValueError", "KernelNotFoundError"], caught
    assert "none" not in caught[6:7], caught  # wrong-dtype out for nonzero must raise
    # out-of-range indices: any Python exception, never an abort
    assert all(c != "none" for c in caught[7:]), caught
    assert "Check failed" not in proc.stderr, proc.stderr[-2000:]


def test_kernel_log_still_captured_after_quantized_namespace(launched):
    """Loading the quantized_decomposed schemas (imports executorch.kernels.quantized)
    must not take the kernels' messages away from KernelError."""
    proc = launched["log-after-quantized"].result()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "LOG-OK" in proc.stdout


def test_kernel_error_str_pickles(reg):
    import pickle

    try:
        reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
    except etops.KernelError as e:
        err = e
    again = pickle.loads(pickle.dumps(err))
    assert again.op == err.op and again.error_name == err.error_name and again.log == err.log


def test_kernel_not_found_error_pickles():
    import pickle

    err = etops.KernelNotFoundError("no kernel", "aten::x.out", ("aten::y.out",))
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == "no kernel" and again.suggestions == ("aten::y.out",)
