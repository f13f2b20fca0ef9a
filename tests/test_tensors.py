"""Tensors cross through DLPack: torch tensors and other producers (numpy), CPU
only; whatever ExecuTorch cannot hold is refused with the argument named."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from fresh_python import start_python

np = pytest.importorskip("numpy")


def test_numpy_inputs(reg):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    got = reg.aten.add.out(a, b)
    assert isinstance(got, torch.Tensor)
    assert_close(got, torch.from_numpy(a) + torch.from_numpy(b))


def test_numpy_mixed_with_torch(reg):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.ones(2, 3)
    assert_close(reg.aten.mul.out(a, t, out=torch.empty(2, 3)), torch.from_numpy(a) * t)
    assert_close(reg.aten.cat.out([a, t], 0), torch.cat([torch.from_numpy(a), t], 0))


def test_numpy_out_written_in_place(reg):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.empty((2, 3), dtype=np.float32)
    got = reg.aten.add.out(a, a, out=out)
    assert got is out
    np.testing.assert_allclose(out, a + a)


def test_numpy_dtypes(reg):
    for dtype in (np.float64, np.int32, np.int64, np.int8, np.uint8, np.bool_):
        a = np.ones((3,), dtype=dtype)
        want = torch.from_numpy(a) + torch.from_numpy(a)
        got = reg.aten.add.out(a, a)
        assert got.dtype == want.dtype, dtype
        assert torch.equal(got, want), dtype


def test_numpy_non_dense_input(reg):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert_close(reg.aten.neg.out(a), -torch.from_numpy(np.ascontiguousarray(a)))


def test_numpy_transposed_input_dim_order(reg):
    a = np.arange(6, dtype=np.float32).reshape(2, 3).T
    assert "dim order [1, 0]" in reg.aten.abs.out.explain(a, out=torch.empty(3, 2))


def test_numpy_data_dependent(reg):
    a = np.array([[1, 0], [0, 3]], dtype=np.int64)
    assert torch.equal(reg.aten.nonzero.out(a), torch.nonzero(torch.from_numpy(a)))


def test_read_only_numpy_out_refused(reg):
    out = np.empty((2, 3), dtype=np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="'out'.*read-only"):
        reg.aten.add.out(torch.ones(2, 3), torch.ones(2, 3), out=out)


def test_read_only_numpy_input_accepted(reg):
    a = np.ones((2, 3), dtype=np.float32)
    a.flags.writeable = False
    assert_close(reg.aten.add.out(a, a), torch.full((2, 3), 2.0))


@pytest.mark.parametrize("where", ["self", "other", "out"])
def test_meta_tensor_refused(reg, where):
    args = {"self": torch.ones(2, 3), "other": torch.ones(2, 3), "out": torch.empty(2, 3)}
    args[where] = torch.empty(2, 3, device="meta")
    with pytest.raises(ValueError, match=f"'{where}'"):
        reg.aten.add.out(args["self"], args["other"], out=args["out"])


def test_meta_tensor_refused_without_out(reg):
    with pytest.raises(ValueError, match="'self'"):
        reg.aten.add.out(torch.empty(2, 3, device="meta"), torch.ones(2, 3))


def test_meta_tensor_in_list_refused(reg):
    with pytest.raises(ValueError, match=r"tensors\[1\]"):
        reg.aten.cat.out([torch.ones(2), torch.ones(2, device="meta")], out=torch.empty(4))


def test_rank_17_refused(reg):
    big = torch.zeros([1] * 17)
    with pytest.raises(ValueError, match="'self'.*17"):
        reg.aten.add.out(big, big, out=torch.zeros([1] * 17))
    with pytest.raises(ValueError, match="'self'.*17"):
        reg.aten.add.out(big, big)
    with pytest.raises(ValueError, match="'out'.*17"):
        reg.aten.add.out(torch.zeros(1), torch.zeros(1), out=torch.zeros([1] * 17))


def test_rank_16_accepted(reg):
    x = torch.randn([1] * 15 + [3])
    assert_close(reg.aten.add.out(x, x), x + x)


def test_size_beyond_int32_refused(reg):
    """Checked before any copy: an expanded tensor with 2**31 elements never densifies."""
    huge = torch.zeros(1).expand(2**31)
    with pytest.raises(ValueError, match="'self'.*int32"):
        reg.aten.add.out(huge, huge, out=torch.empty(1))


@pytest.mark.parametrize("dtype", [torch.float8_e8m0fnu])
def test_dtype_executorch_cannot_represent(reg, dtype):
    x = torch.zeros(2, dtype=dtype)
    with pytest.raises((TypeError, ValueError), match="'self'.*dtype"):
        reg.aten.add.out(x, x, out=torch.zeros(2, dtype=dtype))


def test_complex32_is_executorch_complex_half(reg):
    """torch.complex32 crosses as ExecuTorch's ComplexHalf: a copy keeps its bits."""
    x = torch.randn(2, 3).to(torch.complex32)
    got = reg.aten.clone.out(x)
    assert got.dtype == torch.complex32
    assert torch.equal(got.view(torch.int32), x.view(torch.int32))


def test_dtype_representable_but_unhandled_by_kernel(reg):
    """uint16 exists in ExecuTorch; add.out does not handle it: a KernelError, not a crash."""
    import etops

    x = torch.zeros(2, dtype=torch.uint16)
    with pytest.raises(etops.KernelError, match="add.out"):
        reg.aten.add.out(x, x, out=torch.zeros(2, dtype=torch.uint16))


def test_not_a_tensor(reg):
    with pytest.raises(TypeError, match="'self'"):
        reg.aten.add.out([1.0, 2.0], torch.ones(2), out=torch.empty(2))
    with pytest.raises(TypeError, match="'other'"):
        reg.aten.add.out(torch.ones(2), object(), out=torch.empty(2))


def test_dlpack_producer_that_fails(reg):
    class Broken:
        def __dlpack__(self, **kwargs):
            raise RuntimeError("no export today")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ValueError, match="'other'.*no export today"):
        reg.aten.add.out(torch.ones(2), Broken(), out=torch.empty(2))


def test_zero_copy_input(reg):
    """An input crosses without a copy: an in-place kernel writes torch's memory."""
    x = torch.zeros(4)
    ptr = x.data_ptr()
    reg.aten.index_put_(x, [torch.tensor([1, 3])], torch.tensor([5.0, 7.0]))
    assert x.data_ptr() == ptr
    assert torch.equal(x, torch.tensor([0.0, 5.0, 0.0, 7.0]))


def _strided(shape, strides):
    return torch.zeros(64).as_strided(shape, strides)


@pytest.mark.parametrize("make, order, kept", [
    (lambda: torch.zeros(2, 3, 4), (0, 1, 2), True),
    (lambda: _strided((3, 1, 4), (4, 1000, 1)), (0, 1, 2), True),  # a size-1 dim may have any stride
    (lambda: _strided((0, 3), (1, 7)), (0, 1), True),  # empty: any strides, kept contiguous
    (lambda: torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last), (0, 2, 3, 1), True),
    (lambda: torch.zeros(3, 2).t(), (1, 0), False),  # dense but permuted: a contiguous copy
    (lambda: torch.zeros(4, 6)[:, ::2], None, False),  # not dense: a contiguous copy
    (lambda: torch.tensor(1.5), (), True),
])
def test_layouts_the_kernel_sees(make, order, kept):
    """One pass places a contiguous tensor (the common call); every other layout takes
    the general path, with the same answers as before it had a fast path."""
    from etops import _native

    dtype, got_order, got_kept = _native.tensor_meta(make())
    assert dtype == 6 and got_kept is kept
    if order is not None:
        assert got_order == order


def test_size_one_dim_with_any_stride_is_written_in_place(reg):
    x = torch.arange(12.0).reshape(3, 1, 4)
    out = _strided((3, 1, 4), (4, 1000, 1))
    ptr = out.data_ptr()
    reg.aten.add.out(x, x, out=out)
    assert out.data_ptr() == ptr and torch.equal(out, x + x)



_OUT_DTYPES = ["complex32", "complex64", "float16", "uint16", "bool", "float8_e5m2"]

#: each dtype in turn, one interpreter: a dtype whose probe reads or writes past the
#: out faults here, and the dtypes after it say the interpreter died before them
_OUT_AGAINST_A_GUARD_PAGE = start_python("""
import ctypes, mmap, sys, torch, etops
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
for name in %r:
    base = libc.mmap(None, 2 * page, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert libc.mprotect(base + page, page, 0) == 0  # PROT_NONE
    dtype = getattr(torch, name)
    size = torch.empty(0, dtype=dtype).element_size()
    memory = torch.frombuffer((ctypes.c_char * page).from_address(base), dtype=torch.uint8)
    out = memory[page - 6 * size:].view(dtype).view(2, 3)  # its last byte is the page's last
    etops.registry().aten.clone.out(torch.ones(2, 3, dtype=dtype), out=out)
    print("ok", name, flush=True)
""" % (_OUT_DTYPES,))


@pytest.mark.parametrize("dtype", _OUT_DTYPES)
def test_first_call_reads_and_writes_only_the_outs_bytes(dtype):
    """The first call of a signature is probed in etops' memory, the out's bytes copied
    in and back: exactly its bytes for every dtype, none past its end (an out whose
    last byte ends a page, the next page PROT_NONE, survives)."""
    done = _OUT_AGAINST_A_GUARD_PAGE.result()
    assert f"ok {dtype}" in done.stdout.split("\n"), f"exit {done.returncode}, {done.stdout[-500:]}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("shape", [(1,), (), (1, 1)])
def test_a_lazily_negated_view_reaches_the_kernel_resolved(reg, shape):
    """`c.conj().imag` of a one-element complex tensor is a contiguous real tensor
    whose values torch negates lazily (its negative bit, not in its memory nor in
    DLPack): the kernel gets the values torch sees, also after calls that made
    the kernel remember plain tensors of that shape."""
    c = torch.tensor([0.75 + 0.5j], dtype=torch.complex64).reshape(shape)
    view = c.conj().imag
    assert view.is_neg() and view.is_contiguous()
    y, out = torch.zeros(shape), torch.empty(shape)
    for _ in range(3):  # a steady call of this signature first
        reg.aten.add.out(torch.ones(shape), y, out=out)
    reg.aten.add.out(view, y, out=out)
    assert out.reshape(-1).tolist() == [-0.5]


def test_a_dense_permuted_view_of_a_negated_view_is_resolved(reg):
    real = torch.randn(6, dtype=torch.complex64).conj().imag  # strided, negative bit
    dense = real.as_strided((2, 3), (1, 2))  # dense (transposed order) over the same memory, the bit kept
    assert dense.is_neg()
    out = torch.empty(2, 3)
    from etops import layout

    with layout("preserve"):
        reg.aten.add.out(dense, torch.zeros(2, 3), out=out)
    assert torch.equal(out, dense + 0)
