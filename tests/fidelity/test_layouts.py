"""Call fidelity, layouts: tensors reach a kernel as an exported program lays them out
(contiguous or channels-last); anything else only under etops.layout("preserve")."""

import threading

import pytest
import torch
from torch.testing import assert_close

import etops
from etops import _native


def test_transposed_weight_gives_torchs_result(reg):
    """The optimized mm ignores dim orders: zero-copy it computed a wrong c silently."""
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    c = torch.empty(3, 5)
    assert reg.aten.mm.out(x, w.t(), out=c) is c
    assert_close(c, x @ w.t())


def test_preserve_passes_the_true_dim_order(reg):
    """Opting in shows what the kernel does with a [1, 0] tensor (mm reads it as
    if it were contiguous, so the values differ from torch's)."""
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with etops.layout("preserve"):
        c = reg.aten.mm.out(x, w.t(), out=torch.empty(3, 5))
    assert not torch.allclose(c, x @ w.t())
    assert_close(c, x @ w.contiguous().view(4, 5))


def test_permuted_out_is_computed_contiguous_and_copied_back(reg):
    x, y = torch.randn(4, 2, 3), torch.randn(4, 2, 3)
    out = torch.empty(2, 3, 4).permute(2, 0, 1)  # dim order [1, 2, 0]
    stride = out.stride()
    assert reg.aten.add.out(x, y, out=out) is out
    assert out.stride() == stride
    assert_close(out, x + y)


def test_permuted_out_resized_by_the_kernel_gets_the_new_size(reg):
    x = torch.randn(6, 2)
    out = torch.empty(3, 6).t()  # too small; the kernel resizes it
    with pytest.warns(UserWarning, match="was resized"):
        result = reg.aten.cat.out([x, x], 0, out=out)
    assert result is out
    assert_close(out, torch.cat([x, x], 0))


def test_channels_last_and_contiguous_are_kept_zero_copy():
    nchw = torch.randn(2, 3, 4, 5)
    for t in (nchw, nchw.to(memory_format=torch.channels_last)):
        _dtype, _order, kept = _native.tensor_meta(t)
        assert kept
    _dtype, order, kept = _native.tensor_meta(nchw.permute(0, 2, 1, 3))
    assert not kept and tuple(order) == (0, 2, 1, 3)


def test_context_nests_and_restores():
    assert not etops.layouts.layout_is_preserved()
    with etops.layout("preserve"):
        assert etops.layouts.layout_is_preserved()
        with etops.layout("programs"):
            assert not etops.layouts.layout_is_preserved()
        assert etops.layouts.layout_is_preserved()
    assert not etops.layouts.layout_is_preserved()
    with pytest.raises(RuntimeError), etops.layout("preserve"):
        raise RuntimeError("boom")
    assert not etops.layouts.layout_is_preserved()


def test_per_call_wrapper(reg):
    x = torch.randn(3, 2).t()
    add = etops.layout("preserve")(reg.aten.add.out)
    with pytest.raises(etops.KernelError, match="add.out"):
        add(x, x, out=torch.empty(2, 3))
    assert not etops.layouts.layout_is_preserved()
    assert_close(reg.aten.add.out(x, x, out=torch.empty(2, 3)), x + x)


def test_mode_is_per_thread(reg):
    seen = []
    with etops.layout("preserve"):
        thread = threading.Thread(target=lambda: seen.append(etops.layouts.layout_is_preserved()))
        thread.start()
        thread.join()
    assert seen == [False]


def test_bad_mode_names_the_argument():
    with pytest.raises(ValueError, match="mode must be one of"):
        etops.layout("channels_last")


def test_explain_says_which_tensors_are_copied(reg):
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    text = reg.aten.mm.out.explain(x, w.t(), out=torch.empty(3, 5))
    assert "mat2: a contiguous copy reaches the kernel (dim order [1, 0]" in text
    assert "mat2: float32, dim order [0, 1]" in text
    assert "self: a contiguous copy" not in text
    with etops.layout("preserve"):
        text = reg.aten.mm.out.explain(x, w.t(), out=torch.empty(3, 5))
    assert "mat2: float32, dim order [1, 0]" in text
    assert "contiguous copy" not in text


def test_stepped_out_is_computed_contiguous_and_copied_back(reg):
    """A non-dense (stepped) out: torch writes it in place; so does etops, through a
    contiguous copy, leaving the elements between untouched."""
    base = torch.full((2, 6), -1.0)
    out = base[:, ::2]
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert reg.aten.add.out(a, b, out=out) is out
    assert torch.equal(out, a + b)
    assert torch.equal(base[:, 1::2], torch.full((2, 3), -1.0))


def test_copy_into_a_stepped_self(reg):
    base = torch.zeros(8)
    src = torch.arange(4.0)
    reg.get_kernel("aten::copy_")(base[::2], src)
    assert torch.equal(base, torch.tensor([0.0, 0, 1, 0, 2, 0, 3, 0]))


def test_expanded_out_is_refused_untouched(reg):
    storage = torch.zeros(1)
    with pytest.raises(ValueError, match="argument 'out' is expanded"):
        reg.aten.add.out(torch.ones(3), torch.ones(3), out=storage.expand(3))
    assert storage.item() == 0.0


def test_a_lazily_conjugated_tensor_reaches_the_kernel_resolved(reg):
    """torch's conj() only sets a bit on the tensor (DLPack carries none): passed
    zero-copy, ExecuTorch computed with the unconjugated values. Found by the
    conformance sweep (clone.out on complex samples)."""
    x = torch.randn(2, 3, dtype=torch.complex64).conj()
    assert x.is_conj()
    assert torch.equal(reg.aten.clone.out(x), x.resolve_conj())
    assert torch.allclose(reg.aten.add.out(x, x), x + x)
    out = torch.empty(2, 3, dtype=torch.complex64).conj()  # a conjugated out: written through the bit
    reg.aten.clone.out(torch.ones(2, 3, dtype=torch.complex64) * (1 + 2j), out=out)
    assert torch.equal(out.resolve_conj(), torch.full((2, 3), 1 + 2j, dtype=torch.complex64))
    assert torch.equal(etops.guard.call(reg.aten.clone.out, x), x.resolve_conj())


def test_a_lazily_negated_complex_tensor_reaches_the_kernel_resolved(reg):
    """torch's negative bit (a conj view's imaginary parts, `_neg_view`) is no more in
    DLPack than the conjugate bit: such a complex tensor goes as a resolved copy.
    Found while looking into the sweep's complex view_copy / expand_copy /
    transpose_copy clusters: the kernel got the values without the negation."""
    x = torch._neg_view(torch.randn(2, 3, dtype=torch.complex64))
    assert x.is_neg() and not x.is_conj()
    want = x.resolve_neg()
    assert torch.equal(reg.aten.view_copy.out(x, [3, 2]), want.view(3, 2))
    assert torch.equal(reg.aten.transpose_copy.int_out(x, 0, 1), want.t())
    assert torch.equal(reg.aten.clone.out(x), want)


# ---- kernels the rules table records as silently wrong on a layout ----------------


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Layout warnings as in a fresh process (they are given once per kernel and layout)."""
    import etops.layouts

    monkeypatch.setattr(etops.layouts, "_WARNED_LAYOUTS", set())


def test_the_rules_table_is_the_one_list_of_silently_wrong_layouts():
    from etops.ops import rules_for, wrong_layouts

    table = wrong_layouts()
    assert {f.layout for f in table["aten::_log_softmax.out"]} == {"channels-last"}
    assert rules_for("aten::constant_pad_nd.out").judging.wrong_on("channels-last") is not None
    assert rules_for("aten::mm.out").judging.wrong_on("permuted") is not None and rules_for("aten::add.out").judging.wrong_layouts == ()


@pytest.mark.parametrize("kernel, args", [
    ("aten::_log_softmax.out", (1, False)),
    ("aten::constant_pad_nd.out", ([1, 1],)),
])
def test_a_direct_call_on_a_known_wrong_layout_warns_once(reg, fresh_warnings, kernel, args):
    """ExecuTorch's _log_softmax and constant_pad_nd compute wrong values on a
    channels-last input (max diff 3.06 and 3.35 in the dim-order sweep), with no
    error: a direct call says so, once per kernel and layout."""
    import warnings

    op = reg.get_kernel(kernel)
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    with pytest.warns(etops.layouts.WrongLayoutWarning) as record:
        wrong = op(x, *args)
    text = str(record[0].message)
    assert f"{kernel} computes wrong values on channels-last inputs" in text and "argument 'self'" in text
    assert "mismatching cases in make conformance-dim-orders" in text and "etops.layout('preserve')" in text
    expected = op(x.contiguous(), *args)
    assert not torch.allclose(wrong, expected)  # the warning is warranted
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op(x, *args)  # once per kernel and layout
        op(x.contiguous(), *args)  # a contiguous input: nothing to say


def test_no_warning_when_the_user_opted_in_and_explain_says_it_always(reg, fresh_warnings):
    import warnings

    op = reg.aten._log_softmax.out
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with etops.layout("preserve"):
            op(x, 1, False)
    explained = op.explain(x, 1, False)
    assert "warning: aten::_log_softmax.out computes wrong values on channels-last inputs" in explained
    assert "argument 'self' reaches it channels-last" in explained
    with etops.layout("preserve"):
        assert "you opted in" in op.explain(x, 1, False)
    assert "warning:" not in op.explain(x.contiguous(), 1, False)
    # a permuted tensor goes as a contiguous copy by default: nothing wrong to say
    m = reg.aten.mm.out
    w = torch.randn(4, 3)
    assert "warning:" not in m.explain(torch.randn(2, 3), w.t())
    with etops.layout("preserve"):
        assert "computes wrong values on permuted inputs" in m.explain(torch.randn(2, 3), w.t())
