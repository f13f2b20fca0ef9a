"""Backends listed from ExecuTorch's registry, and every way loading or calling a
delegate can go wrong: a clear exception naming the delegate and the argument,
the interpreter alive, the delegate still usable afterwards."""

from __future__ import annotations

import os

import pytest
import torch

from delegate_helpers import TEST_BACKEND, ConvBnPool, LinearRelu, XnnpackLowered, lower_to_test_backend, build_test_backend

import etops
from etops import DelegateError


@pytest.fixture(scope="module")
def linear():
    torch.manual_seed(0)
    return XnnpackLowered(LinearRelu(), (torch.randn(4, 16),))


@pytest.fixture(scope="module")
def conv():
    torch.manual_seed(0)
    return XnnpackLowered(ConvBnPool(), (torch.randn(1, 3, 8, 8),))


@pytest.fixture(scope="module")
def test_backend():
    return build_test_backend()


def variant(lw, blob=None, backend=None, named=True):
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    return LoweredBackendModule(
        lw.original_module,
        backend or lw.backend_id,
        lw.processed_bytes if blob is None else blob,
        lw.compile_specs,
        lw.named_data_store_output if named else None,
    )


# ---- backends --------------------------------------------------------------------------


def test_backends_lists_xnnpack_as_available():
    found = {b.name: b for b in etops.backends()}
    assert found["XnnpackBackend"].available and found["XnnpackBackend"].is_available()
    assert etops.delegate.backend_libraries()[0].endswith("libexecutorch_backend_xnnpack.so")


def test_backends_lists_every_registered_backend(test_backend):
    names = [b.name for b in etops.backends()]
    assert TEST_BACKEND in names and len(names) == len(set(names))
    wheel = {os.path.basename(p) for p in etops.delegate.backend_libraries()}
    if "libexecutorch_backend_openvino.so" in wheel:
        assert "OpenvinoBackend" in names


def test_is_available_asks_the_backend_again(test_backend):
    (backend,) = [b for b in etops.backends() if b.name == TEST_BACKEND]
    try:
        test_backend.etops_test_backend_set_available(0)
        assert not backend.is_available()
    finally:
        test_backend.etops_test_backend_set_available(1)
    assert backend.is_available()


# ---- init errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"x" * 100, "version identifier"),
        (b"", "XNNHeader may be corrupt"),
        ("half", "invalid for buffer of size"),
    ],
    ids=["garbage", "empty", "truncated"],
)
def test_blob_the_backend_refuses(linear, blob, message):
    _, lw, _ = linear.calls[0]
    if blob == "half":
        blob = lw.processed_bytes[: len(lw.processed_bytes) // 2]
    with pytest.raises(DelegateError, match="XnnpackBackend::bad failed to init") as info:
        etops.delegate.load(variant(lw, blob=blob), name="bad")
    assert message in str(info.value) and "refused the processed blob" in str(info.value)
    assert info.value.action == "init"


def test_missing_named_data_is_refused(linear):
    _, lw, _ = linear.calls[0]
    with pytest.raises(DelegateError, match="named_data_map"):
        etops.delegate.load(variant(lw, named=False), name="no_weights")


def test_unknown_backend(linear):
    _, lw, _ = linear.calls[0]
    with pytest.raises(DelegateError, match=r"no backend named 'NoSuchBackend' is registered \(registered: .*XnnpackBackend"):
        etops.delegate.load(variant(lw, backend="NoSuchBackend"), name="x")


def test_unavailable_backend(test_backend):
    lw = lower_to_test_backend()
    before = etops._native._core.delegate_stats()
    test_backend.etops_test_backend_set_available(0)
    try:
        with pytest.raises(DelegateError, match=f"backend {TEST_BACKEND} is not available on this machine"):
            etops.delegate.load(lw, name="off")
    finally:
        test_backend.etops_test_backend_set_available(1)
    assert etops._native._core.delegate_stats() == before
    assert etops.delegate.load(lw, name="on")(torch.zeros(2, 3)).shape == (2, 3)


def test_rejected_blob_of_the_test_backend_carries_its_log(test_backend):
    lw = lower_to_test_backend()
    inits = test_backend.etops_test_backend_inits()
    with pytest.raises(DelegateError, match="DelegateInvalidCompatibility.*the blob asks to be rejected"):
        etops.delegate.load(variant(lw, blob=b"REJECT"), name="rejected")
    assert test_backend.etops_test_backend_inits() == inits


def test_an_abort_in_the_backend_raises_kernel_aborted(test_backend):
    """An ET_CHECK in a backend's init or execute unwinds like a kernel's: the call
    raises KernelAborted naming the delegate, and the next call works."""
    lw = lower_to_test_backend()
    inits = test_backend.etops_test_backend_inits()
    with pytest.raises(etops.KernelAborted, match="the blob asks for an abort at init"):
        etops.delegate.load(variant(lw, blob=b"ABORT"), name="aborting")
    assert test_backend.etops_test_backend_inits() == inits
    run = etops.delegate.load(lw, name="abort_execute")
    x = torch.zeros(2, 3)
    x[0, 0] = float("inf")
    for _ in range(2):
        with pytest.raises(etops.KernelAborted, match=f"{TEST_BACKEND}::abort_execute aborted.*input 0 starts with \\+inf"):
            run(x)
        assert run(torch.zeros(2, 3)).shape == (2, 3)


def test_not_a_lowered_module():
    with pytest.raises(TypeError, match="lowered must be a LoweredBackendModule"):
        etops.delegate.load(torch.nn.Linear(2, 2))


# ---- call errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_args, error, message",
    [
        (lambda x: (), TypeError, "missing required argument 'x'"),
        (lambda x: (x, x), TypeError, "takes at most 1 positional arguments but 2 were given"),
        (lambda x: (x.double(),), TypeError, "argument 'x' is float64, the delegate takes x: float32"),
        (lambda x: (x[:2],), ValueError, r"argument 'x' has shape \[2, 16\], the delegate takes x: float32\[4, 16\]"),
        (lambda x: (x[None],), ValueError, "argument 'x' has 3 dims"),
        (lambda x: ("x",), TypeError, "argument 'x' must be a Tensor"),
        (lambda x: (None,), TypeError, "argument 'x' must be a Tensor"),
    ],
    ids=["none", "too_many", "dtype", "shape", "rank", "str", "None"],
)
def test_bad_inputs_name_the_delegate_and_argument(linear, make_args, error, message):
    attr, lw, node = linear.calls[0]
    run = etops.delegate.load(lw, name=attr)
    (x,) = linear.call_inputs[node.name]
    with pytest.raises(error, match=message) as info:
        run(*make_args(x))
    assert f"XnnpackBackend::{attr}" in str(info.value)
    torch.testing.assert_close(run(x), linear.pte_outputs[0], rtol=0, atol=0)
    assert etops.as_program(run) is run  # a delegate runs its lowered program whatever the call policy


def test_wrong_dim_order_is_refused(conv):
    attr, lw, node = conv.calls[0]
    run = etops.delegate.load(lw, name=attr)
    (x,) = conv.call_inputs[node.name]
    with pytest.raises(ValueError, match=r"argument 'x' has dim order \[0, 2, 3, 1\], the delegate takes .*dim order \[0, 1, 2, 3\]"):
        run(x.contiguous(memory_format=torch.channels_last))
    # a strided view is copied to the dim order the delegate takes, as kernel inputs are
    wide = torch.zeros(1, 3, 8, 16)
    wide[..., ::2] = x
    torch.testing.assert_close(run(wide[..., ::2]), conv.pte_outputs[0], rtol=0, atol=0)


def test_bad_out_names_the_argument(linear):
    attr, lw, node = linear.calls[0]
    run = etops.delegate.load(lw, name=attr)
    (x,) = linear.call_inputs[node.name]
    with pytest.raises(TypeError, match="argument 'out'"):
        run(x, out=[1, 2])
    with pytest.raises(TypeError, match="unexpected keyword argument 'out0'"):
        run(x, out0=torch.empty(4, 8))
    # XNNPACK writes the float32 it planned: a narrower out would be overrun
    half = torch.zeros(4, 8, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"out argument 'out' is float16, the delegate writes out: float32\[4, 8\]"):
        run(x, out=half)
    assert not half.any()
    # a transposed out is computed contiguous and copied back; kept as it is, refused
    transposed = torch.empty(8, 4).t()
    assert run(x, out=transposed) is transposed
    assert torch.equal(transposed, linear.pte_outputs[0])
    with etops.layout("preserve"), pytest.raises(ValueError, match=r"out argument 'out' has dim order \[1, 0\], the delegate writes"):
        run(x, out=torch.empty(8, 4).t())
    stepped = torch.zeros(4, 16)[:, ::2]  # not dense: computed contiguous, copied back too
    assert run(x, out=stepped) is stepped
    assert torch.equal(stepped, linear.pte_outputs[0])
    with pytest.raises(ValueError, match="argument 'out' is expanded"):
        run(x, out=torch.empty(1, 8).expand(4, 8))
    smaller = torch.empty(2, 8)
    with pytest.warns(UserWarning, match="was resized since it had shape \\[2, 8\\]"):
        assert run(x, out=smaller) is smaller
    assert torch.equal(smaller, linear.pte_outputs[0])


def test_execute_failure_raises_with_the_backend_log(test_backend):
    run = etops.delegate.load(lower_to_test_backend(), name="nan")
    x = torch.zeros(2, 3)
    x[0, 0] = float("nan")
    with pytest.raises(DelegateError, match=f"{TEST_BACKEND}::nan failed to execute with Error::InvalidArgument.*input 0 starts with NaN") as info:
        run(x)
    assert info.value.action == "execute" and info.value.error_name == "InvalidArgument"
    assert run(torch.zeros(2, 3)).shape == (2, 3)
