"""The call memo (kernel_memo.c): a kernel remembers its last steady call, converted,
and a call matching it field by field skips conversion and selection. Every change
of an argument between calls must make the next call behave exactly as a call the
memo does not know: the same result, out, warnings and error. Each scenario runs
twice, once right after the steady call (the memo warm for it) and once after a call
of another signature (the memo holding something else), and the outcomes must be
equal; the steady calls themselves must have left the memo warm, so the first run
really starts from a matching memo."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch

SHAPE = (5, 7)


def _outcome(call):
    """What a call did: its error (type and message) or its result, and its warnings."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            got = call()
        except Exception as exc:  # noqa: BLE001 - compared below
            result = (type(exc).__name__, str(exc))
        else:
            result = ("ok", tuple(got.shape), got.stride(), got.dtype, got.detach().clone())
    return result, [(w.category.__name__, str(w.message)) for w in seen]


def _same(x, y) -> bool:
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and torch.equal(x, y)
    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x == y


def _check(reg, scenario):
    """Runs scenario(a, b, c, op) warm and cold (fresh tensors each time, same values)
    and compares what it did; returns the warm outcome."""
    op = reg.aten.add.out
    outcomes = []
    for warm in (True, False):
        g = torch.Generator().manual_seed(7)
        a, b = torch.rand(SHAPE, generator=g), torch.rand(SHAPE, generator=g)
        c = torch.empty(SHAPE)
        if warm:
            for _ in range(3):
                op(a, b, out=c)
            assert op._memo_state() == 2, "the steady call was not remembered"
        else:
            x = torch.rand(3, 2)
            for _ in range(3):
                op(x, x, out=torch.empty(3, 2))  # the memo holds another signature
        outcomes.append(_outcome(lambda: scenario(a, b, c, op)))
    assert _same(outcomes[0], outcomes[1]), outcomes
    return outcomes[0]


def test_a_steady_call_is_remembered_and_reads_new_data_each_call(reg):
    op = reg.aten.add.out
    c = torch.empty(SHAPE)
    for i in range(5):
        a, b = torch.rand(SHAPE), torch.full(SHAPE, float(i))
        assert op(a, b, out=c) is c
        assert torch.equal(c, a + b)
    assert op._memo_state() == 2
    big = torch.zeros(10, 7)  # an out at an offset into its storage, same layout
    a, b = torch.rand(SHAPE), torch.rand(SHAPE)
    op(a, b, out=big[5:])
    assert torch.equal(big[5:], a + b) and torch.equal(big[:5], torch.zeros(SHAPE))
    assert op._memo_state() == 2


def test_an_out_of_another_shape_is_resized_as_without_the_memo(reg):
    result, seen = _check(reg, lambda a, b, c, op: op(a, b, out=torch.empty(2, 2)))
    assert result[0] == "ok" and result[1] == SHAPE and seen  # torch resizes, with its warning


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bfloat16])
def test_an_out_of_another_dtype_behaves_as_without_the_memo(reg, dtype):
    _check(reg, lambda a, b, c, op: op(a, b, out=torch.empty(SHAPE, dtype=dtype)))


def test_an_input_of_another_dtype_behaves_as_without_the_memo(reg):
    result, _ = _check(reg, lambda a, b, c, op: op(a.double(), b, out=c))
    assert result[0] == "ok"


def test_an_out_with_other_strides_behaves_as_without_the_memo(reg):
    def transposed(a, b, c, op):
        out = torch.empty(SHAPE[::-1]).t()
        op(a, b, out=out)
        assert torch.equal(out, a + b)
        return out

    def padded(a, b, c, op):
        out = torch.empty(SHAPE[0], SHAPE[1] + 1)[:, : SHAPE[1]]
        op(a, b, out=out)
        assert torch.equal(out, a + b)
        return out

    assert _check(reg, transposed)[0][0] == "ok"
    assert _check(reg, padded)[0][0] == "ok"


@pytest.mark.parametrize("which", ["self", "out"])
def test_a_tensor_that_now_requires_grad_is_refused_as_without_the_memo(reg, which):
    def scenario(a, b, c, op):
        if which == "self":
            a.requires_grad_(True)
        else:
            c.requires_grad_(True)
        return op(a, b, out=c)

    result, _ = _check(reg, scenario)
    assert result[0] == "ValueError" and "requires grad" in result[1]


def test_overlaps_after_the_memo_behave_as_without_it(reg):
    result, _ = _check(reg, lambda a, b, c, op: op(a, b, out=a))  # a full alias torch allows
    assert result[0] == "ok"
    def partial(a, b, c, op):  # the memo's layouts, but the out overlaps an input by one row
        rows = torch.rand(SHAPE[0] + 1, SHAPE[1])
        return op(rows[:-1], b, out=rows[1:])

    result, _ = _check(reg, partial)
    assert result[0] != "ok"


def test_other_scalars_and_numbers_behave_as_without_the_memo(reg):
    result, _ = _check(reg, lambda a, b, c, op: op(a, b, alpha=2, out=c))
    assert result[0] == "ok"
    result, _ = _check(reg, lambda a, b, c, op: op(a, 1.5, out=c))  # a wrapped number for 'other'
    assert result[0] == "ok"


def test_a_size_one_dim_with_any_stride_matches_the_memo(reg):
    op = reg.aten.add.out
    a, b, c = torch.rand(1, 9), torch.rand(1, 9), torch.empty(1, 9)
    for _ in range(3):
        op(a, b, out=c)
    odd = torch.rand(9, 1).t()  # sizes (1, 9), strides (1, 1): contiguous all the same
    op(odd, b, out=c)
    assert torch.equal(c, odd + b)
    assert op._memo_state() == 2


def test_threads_calling_one_kernel_with_and_without_the_gil_get_correct_results(reg):
    """A big call releases the GIL while it uses the memo; the other thread's calls of
    the same kernel (other shapes) must take the full path, not rewrite it."""
    op = reg.aten.mul.out
    failures: list = []
    barrier = threading.Barrier(2)

    def work(i):
        n = 300 if i == 0 else 3
        a, b, c = torch.rand(n, n), torch.rand(n, n), torch.empty(n, n)
        barrier.wait()
        for r in range(300 if i else 40):
            a.fill_(float(r))
            op(a, b, out=c)
            if not torch.equal(c, a * b):
                failures.append((i, r))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_registry_edit_and_a_nested_call_of_the_same_kernel_bypass_the_memo():
    """A kernel registered after the memo was made runs at once (the registry's
    generation changed), and a Python kernel calling the very kernel object that is
    running it from its memo takes the full path (the memo is busy) and leaves the
    memo as it was. A fresh interpreter: the registration stays for the process."""
    from fresh_python import run_python

    proc = run_python("""
        import torch, etops
        op = etops.registry().aten.add.out
        x, y, c = torch.ones(2, 3), torch.ones(2, 3), torch.empty(2, 3)
        for _ in range(3):
            op(x, y, out=c)
        assert op._memo_state() == 2 and torch.equal(c, x + y)
        ran = []
        def mine(self, other, alpha=1, out=None):
            inner = op(torch.ones(3), torch.ones(3), out=torch.empty(3))  # the same kernel object
            ran.append(float(inner.sum()))
            return self + other + 10
        etops.register_python_kernel("aten::add.out", mine, kernel_key=[(torch.float32, 2)] * 3)
        for i in range(4):
            c.fill_(0)
            op(x, y, out=c)
            assert ran == [6.0] * (i + 1), ran
            assert torch.equal(c, x + y + 10), c
        assert op._memo_state() == 2
        one = torch.empty(3)
        op(torch.ones(3), torch.ones(3), out=one)  # the fallback again, outside
        assert torch.equal(one, torch.full((3,), 2.0)) and len(ran) == 4
        print("ok")
    """)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


def test_a_number_for_a_tensor_parameter_is_remembered_by_its_object(reg):
    op = reg.aten.add.out
    a, c = torch.rand(SHAPE), torch.empty(SHAPE)
    two = 2.5
    for _ in range(3):
        assert torch.equal(op(a, two, out=c), a + two)
    assert op._memo_state() == 2
    for number in (3.5, 7, True, two):  # other objects (another value, int, bool), then the same again
        assert torch.equal(op(a, number, out=c), a + number), number
    assert _check(reg, lambda a, b, c, op: op(a, two, out=c))[0][0] == "ok"


def test_calls_missing_the_memo_convert_what_it_asked_torch_for_correctly(reg):
    """A call whose first tensor matches the memo and whose second does not (it
    broadcasts) is converted from the DLPack views the memo already asked for; two
    signatures in turn keep the memo of the first and both get their results."""
    op = reg.aten.add.out
    a, b, c = torch.rand(SHAPE), torch.rand(SHAPE), torch.empty(SHAPE)
    for _ in range(3):
        op(a, b, out=c)
    row = torch.rand(1, SHAPE[1])
    for _ in range(3):
        assert torch.equal(op(a, row, out=c), a + row)
    x, y, z = torch.rand(3, 2), torch.rand(3, 2), torch.empty(3, 2)
    for r in range(6):
        a.fill_(float(r))
        assert torch.equal(op(a, b, out=c), a + b)
        assert torch.equal(op(x, y, out=z), x + y)
    assert op._memo_state() == 2


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_a_one_element_tensor_argument_is_remembered_and_its_negative_bit_still_read(reg, shape):
    """A 0-dim or one-element tensor is borrowed inline (its lazy bits read from
    torch's key set there), so a call holding one is remembered like any steady call;
    a lazily negated one after it misses the memo and reaches the kernel resolved."""
    op = reg.aten.add.out
    a, c = torch.rand(SHAPE), torch.empty(SHAPE)
    s = torch.full(shape, 2.0)
    for _ in range(3):
        assert torch.equal(op(a, s, out=c), a + s)
    assert op._memo_state() == 2
    hits = op._memo_hits()
    s.fill_(3.0)
    assert torch.equal(op(a, s, out=c), a + 3.0) and op._memo_hits() == hits + 1
    negated = torch._neg_view(torch.full(shape, -0.5))  # reads as 0.5, holds -0.5
    assert negated.is_neg()
    assert torch.equal(op(a, negated, out=c), a + 0.5)
    assert op._memo_hits() == hits + 1
    x = torch.rand(3, 4)  # a signature the kernel has not met: converted, the bit read by the inline borrow
    assert torch.equal(reg.aten.mul.out(x, negated, out=torch.empty(3, 4)), x * 0.5)
