"""What torch refuses is refused (issue 33), by mechanism rather than by operator:
outs sharing memory with inputs (checked in C on every call, decided as torch
decides), requires_grad with outs, fake / meta / wrapper-subclass tensors, views
reaching outside their memory, and the value checks torch's CPU kernels make that
its meta kernels skip. Each refusal names the argument, leaves the outs as they
were, and the next call is correct; the judge's view (etops.as_program) refuses the
same calls."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import etops

PARTIAL = "shares part of its memory"


def _refused_by_torch(call) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except RuntimeError as exc:
        assert "single memory location" in str(exc), exc
        return True
    return False


# ---- outs sharing memory with inputs ------------------------------------------------


def test_partial_overlap_is_refused_naming_both_and_leaves_the_memory(reg):
    x = torch.arange(6.0) - 3
    with pytest.raises(ValueError, match=rf"'out' {PARTIAL} with argument 'self'.*single memory location"):
        reg.aten.abs.out(x[1:], out=x[:-1])
    assert torch.equal(x, torch.arange(6.0) - 3)  # not smeared: the kernel never ran
    assert _refused_by_torch(lambda: torch.ops.aten.abs.out(x[1:], out=x[:-1]))
    out = torch.empty(5)
    assert torch.equal(reg.aten.abs.out(x[1:], out=out), torch.abs(x[1:]))  # the next call is right


def test_partial_overlap_is_refused_on_the_fast_path_of_a_validated_signature(reg):
    """Overlap depends on data pointers, not on the argument signature torch's checks
    are remembered by: a signature that passed before is checked again."""
    op = reg.aten.add.out
    buf = torch.arange(8.0)
    op(buf[:4].clone(), buf[:4].clone(), out=torch.empty(4))  # the signature passes torch's checks
    with pytest.raises(ValueError, match=rf"'out' {PARTIAL} with argument 'other'"):
        op(torch.ones(4), buf[1:5], out=buf[:4])
    assert torch.equal(buf, torch.arange(8.0))


def test_partial_overlap_with_a_list_item_is_refused_naming_it(reg):
    buf = torch.ones(8)
    with pytest.raises(ValueError, match=rf"'out' {PARTIAL} with argument 'tensors\[1\]'"):
        reg.aten.cat.out([torch.ones(2), buf[3:5]], out=buf[:4])


def test_partial_overlap_is_refused_where_torch_forgets_to(reg):
    """torch's reductions do not check (sum into a row of its own input); an
    ExecuTorch kernel reads what it already wrote, so etops refuses for every kernel."""
    x = torch.ones(2, 3)
    assert not _refused_by_torch(lambda: torch.sum(x.clone(), 0, out=x.clone()[0]))
    with pytest.raises(ValueError, match=PARTIAL):
        reg.aten.sum.IntList_out(x, [0], out=x[0])
    assert torch.equal(x, torch.ones(2, 3))


def test_same_memory_in_another_layout_is_a_partial_overlap(reg):
    x = torch.arange(4.0).reshape(2, 2)
    assert _refused_by_torch(lambda: torch.abs(x.t(), out=x))
    with pytest.raises(ValueError, match=PARTIAL):
        reg.aten.abs.out(x.t(), out=x)
    assert torch.equal(x, torch.arange(4.0).reshape(2, 2))


@pytest.mark.parametrize("repeat", [1, 3])
def test_full_alias_is_allowed_where_torch_allows_it(reg, repeat):
    """abs and add compute in place as torch's out= does; the C path remembers the
    slow path's verdict, and later calls of the pair go as fast as any."""
    x, y = torch.arange(6.0) - 3, torch.ones(6)
    want = x.clone()
    for _ in range(repeat):
        assert reg.aten.add.out(x, y, out=x) is x
        want += 1
    assert torch.equal(x, want)
    assert torch.equal(reg.aten.abs.out(x, out=x), want.abs())


def _conv_backward_into_its_input(m, t):
    w = torch.full((2, 2, 3, 3), 0.1)
    return m.convolution_backward.out(t, t, w, [2], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True],
                                      out0=t, out1=torch.empty(2, 2, 3, 3), out2=torch.empty(2))


_MASK = torch.tensor([[False, True, True], [True, False, True]])

#: kernels that read an element after writing another, each with its out the memory of an input
_READ_AFTER_WRITE = {
    "flip": (lambda m, t: m.flip.out(t, [1], out=t), (2, 3)),
    "roll": (lambda m, t: m.roll.out(t, [1], [1], out=t), (2, 3)),
    "tril": (lambda m, t: m.tril.out(t, out=t), (3, 3)),
    "masked_scatter": (lambda m, t: m.masked_scatter.out(torch.full((2, 3), -1.0), _MASK, t, out=t), (2, 3)),
    "convolution_backward": (_conv_backward_into_its_input, (1, 2, 4, 4)),
}


@pytest.mark.parametrize("case", sorted(_READ_AFTER_WRITE))
def test_full_alias_of_a_kernel_reading_what_it_wrote_gives_torchs_result(reg, case):
    """torch's out= computes these right with the out the input's memory (into a
    temporary); the ExecuTorch kernel would read elements it already overwrote, so
    etops gives it a snapshot of the input (overlaps.computes_in_place), on the call
    that decides and on the later ones the C path decides alone."""
    call, shape = _READ_AFTER_WRITE[case]
    for _ in range(3):
        x = torch.randn(shape)
        want = x.clone()
        call(torch.ops.aten, want)
        call(reg.aten, x)
        torch.testing.assert_close(x, want, rtol=1e-5, atol=1e-5)


def test_every_kernel_writing_into_its_input_matches_torch(reg):
    """Each kernel of a simple call whose result is its first input's shape and dtype,
    with out= that input: refused where torch refuses, else the values of the same
    call into a separate out (torch's own avg_pool2d gets this wrong: not the
    reference)."""
    from simple_calls import same_results, simple_calls

    checked, wrong = 0, []
    for c in simple_calls():
        inputs = [n for n, v in c.kwargs.items() if isinstance(v, torch.Tensor)]
        outs = c.make_outs(lambda r: r)
        if outs is None or len(c.results) != 1 or isinstance(outs[c.outs[0]], list) or not inputs:
            continue
        first = c.kwargs[inputs[0]]
        if c.results[0].shape != first.shape or c.results[0].dtype != first.dtype:
            continue
        mine, theirs = dict(c.kwargs), dict(c.kwargs)
        mine[inputs[0]], theirs[inputs[0]] = first.clone(), first.clone()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c.overload(**theirs, **{c.outs[0]: theirs[inputs[0]]})
            torch_refused = False
        except RuntimeError as exc:
            torch_refused = "single memory location" in str(exc) or "unsupported operation" in str(exc)
        try:
            c.kernel(**mine, **{c.outs[0]: mine[inputs[0]]})
            etops_refused = False
        except ValueError:
            etops_refused = True
        checked += 1
        if etops_refused != torch_refused or not (etops_refused or same_results(mine[inputs[0]], c.results, close=True)):
            wrong.append(c.name)
    assert checked >= 80 and wrong == [], wrong


@pytest.mark.parametrize("case", ["cat", "index_select"])
def test_full_alias_is_refused_where_torch_refuses_it(reg, case):
    calls = {  # t is both an input and the out
        "cat": (lambda m, t: m.cat.out([t], out=t), r"tensors\[0\]"),
        "index_select": (lambda m, t: m.index_select.out(t, 0, torch.tensor([2, 1, 0]), out=t), "self"),
    }
    call, name = calls[case]
    assert _refused_by_torch(lambda: call(torch.ops.aten, torch.arange(3.0)))
    x = torch.arange(3.0)
    for _ in range(2):  # the verdict is remembered, and stays a refusal
        with pytest.raises(ValueError, match=f"'out' is the same memory as argument '{name}', which torch refuses"):
            call(reg.aten, x)
    assert torch.equal(x, torch.arange(3.0))


def test_interleaved_views_that_share_no_element_compute_like_torch(reg):
    """Non-dense views whose byte ranges meet: torch lets them through ("too hard"),
    and etops passes a non-dense tensor as a copy, so the result is torch's."""
    x, want = torch.arange(6.0) - 3, torch.arange(6.0) - 3
    torch.abs(want[::2], out=want[1::2])
    reg.aten.abs.out(x[::2], out=x[1::2])
    assert torch.equal(x, want)


def test_outs_sharing_part_of_their_memory_are_refused(reg):
    buf = torch.empty(6)
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match="'out0' and out argument 'out1' share part of their memory"):
        reg.aten.var_mean.correction_out(x, [0], out0=buf[:3], out1=buf[1:4])


def test_one_tensor_as_two_outs_is_refused(reg):
    """torch takes it and keeps whichever result it wrote last; ExecuTorch's kernel
    writes in another order (var_mean: the other result), so etops refuses it."""
    x, a = torch.randn(2, 3), torch.zeros(3)
    torch.ops.aten.var_mean.correction_out(x, [0], out0=a.clone(), out1=a.clone())
    with pytest.raises(ValueError, match="'out0' and out argument 'out1' share"):
        reg.aten.var_mean.correction_out(x, [0], out0=a, out1=a)
    assert torch.equal(a, torch.zeros(3))


@pytest.mark.parametrize("training", [False, True])
def test_one_tensor_as_two_batch_norm_outs_of_other_shapes_is_refused(reg, training):
    """It ended in a RecursionError: each resize for one out undid the other's."""
    x, w, b = torch.randn(2, 3, 4), torch.ones(3), torch.zeros(3)
    o = torch.full((2, 3, 4), 5.0)
    with pytest.raises(ValueError, match="'save_mean' shares memory with out argument 'out'"):
        reg.aten._native_batch_norm_legit.out(x, w, b, torch.zeros(3), torch.ones(3), training, 0.1, 1e-5,
                                              out=o, save_mean=o, save_invstd=torch.empty(3))
    assert o.shape == (2, 3, 4) and torch.equal(o, torch.full((2, 3, 4), 5.0))
    got = reg.aten._native_batch_norm_legit.out(x, w, b, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5)
    torch.testing.assert_close(got[0], torch.ops.aten._native_batch_norm_legit(x, w, b, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5)[0])


# ---- requires_grad with outs ------------------------------------------------------


@pytest.mark.parametrize("where", ["self", "other", "out"])
def test_requires_grad_is_refused_naming_the_argument(reg, where):
    args = {"self": torch.ones(3), "other": torch.ones(3), "out": torch.zeros(3)}
    args[where] = args[where].clone().requires_grad_()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.add(args["self"], args["other"], out=args["out"])
    with pytest.raises(ValueError, match=f"argument '{where}' requires grad.*automatic differentiation"):
        reg.aten.add.out(args["self"], args["other"], out=args["out"])
    assert torch.equal(args["out"].detach(), torch.zeros(3))


def test_requires_grad_in_a_list_and_a_parameter_are_refused(reg):
    with pytest.raises(ValueError, match=r"'tensors\[1\]' requires grad"):
        reg.aten.cat.out([torch.ones(2), torch.ones(2, requires_grad=True)], out=torch.empty(4))
    weight = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="'other' requires grad"):
        reg.aten.mul.out(torch.ones(3), weight, out=torch.empty(3))


def test_requires_grad_set_after_a_clean_call_and_a_grad_fn_are_refused(reg):
    """The C path's grad probe (a tensor without autograd state cannot require grad)
    is read on every call: nothing is remembered per tensor or signature."""
    assert etops._calibrate_grad_probe()  # the probe found torch's layout: on
    x, out = torch.ones(3), torch.empty(3)
    reg.aten.add.out(x, x, out=out)
    x.requires_grad_()
    with pytest.raises(ValueError, match="'self' requires grad"):
        reg.aten.add.out(x, torch.ones(3), out=out)
    with pytest.raises(ValueError, match="'other' requires grad"):
        reg.aten.add.out(torch.ones(3), x * 2, out=out)  # not a leaf: it has a grad_fn
    with pytest.raises(ValueError, match="'self' requires grad"):
        reg.aten.add.out(x[1:], torch.ones(2), out=torch.empty(2))  # a view of it
    x.requires_grad_(False)
    assert torch.equal(reg.aten.add.out(x, x, out=out), torch.full((3,), 2.0))


def test_requires_grad_without_out_is_a_functional_call_without_grad_fn(reg):
    """torch refuses out= calls; a call without out= (etops allocates the outs, in
    Python the first time, in C after) is torch's functional call, whose result here
    has no grad_fn (ExecuTorch computes no gradients), as etops.edge's ops."""
    w = torch.ones(3, requires_grad=True)
    for _ in range(3):
        got = reg.aten.mul.out(w, torch.full((3,), 2.0))
        assert torch.equal(got, torch.full((3,), 2.0)) and not got.requires_grad
    with pytest.raises(ValueError, match="'self' requires grad"):  # with out= again
        reg.aten.mul.out(w, torch.full((3,), 2.0), out=torch.empty(3))


def test_requires_grad_is_fine_without_grad_mode_and_for_frozen_parameters(reg):
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        assert torch.equal(reg.aten.add.out(x, x, out=torch.empty(3)), torch.full((3,), 2.0))
    with torch.inference_mode():
        assert torch.equal(reg.aten.add.out(x, x, out=torch.empty(3)), torch.full((3,), 2.0))
    frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    assert torch.equal(reg.aten.add.out(frozen, frozen, out=torch.empty(3)), torch.full((3,), 2.0))
    assert torch.equal(reg.aten.add.out(torch.ones(3), torch.ones(3), out=torch.empty(3)), torch.full((3,), 2.0))


# ---- fake, meta and wrapper-subclass tensors --------------------------------------------


def _fake():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode().from_tensor(torch.ones(3))


def _two():
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(torch.ones(3), torch.ones(3))


@pytest.mark.parametrize("make", [_fake, _two, lambda: torch.ones(3, device="meta")], ids=["fake", "two_tensor", "meta"])
@pytest.mark.parametrize("where", ["self", "out"])
def test_tensors_without_their_own_data_are_a_type_error_naming_the_argument(reg, make, where):
    args = {"self": torch.ones(3), "out": torch.empty(3)}
    args[where] = make()
    with pytest.raises(TypeError, match=f"argument '{where}'"):
        reg.aten.abs.out(args["self"], out=args["out"])
    assert torch.equal(reg.aten.abs.out(-torch.ones(3), out=torch.empty(3)), torch.ones(3))


def test_calls_inside_fake_mode_and_functionalize_are_refused(reg):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        with pytest.raises(TypeError, match="'self' is a FakeTensor"):
            reg.aten.abs.out(torch.ones(3), out=torch.empty(3))
    with pytest.raises(TypeError, match="'self'"):  # a functional wrapper: no data of its own
        torch.func.functionalize(lambda t: reg.aten.abs.out(t, out=torch.empty(3)))(torch.ones(3))


def test_plain_subclasses_with_their_storage_keep_working(reg):
    class Tagged(torch.Tensor):
        pass

    x = (-torch.ones(3)).as_subclass(Tagged)
    assert torch.equal(reg.aten.abs.out(x, out=torch.empty(3)), torch.ones(3))
    assert torch.equal(reg.aten.abs.out(torch.nn.Parameter(-torch.ones(3), requires_grad=False), out=torch.empty(3)), torch.ones(3))


# ---- views outside their memory -----------------------------------------------------


def test_a_view_beyond_its_shrunk_storage_is_refused(reg):
    base = torch.ones(1000)
    view = base[500:]
    base.untyped_storage().resize_(8)
    for args in ((view, torch.empty(500)), (torch.ones(500), view)):
        with pytest.raises(ValueError, match="out of bounds for its storage of size 8"):
            reg.aten.abs.out(args[0], out=args[1])


def test_a_freed_storage_is_refused_on_every_call(reg):
    x, out = torch.ones(4), torch.empty(4)
    reg.aten.abs.out(x, out=out)  # the signature passed before
    x.untyped_storage().resize_(0)
    with pytest.raises(TypeError, match="'self' has elements but no data"):
        reg.aten.abs.out(x, out=out)


def test_numpy_views_outside_their_array_are_refused_and_negative_strides_work(reg):
    reg.aten.abs.out(np.ones(4, dtype=np.float32), out=torch.empty(4))  # the signature passed before
    beyond = np.lib.stride_tricks.as_strided(np.zeros(4, dtype=np.float32), (4,), (400,))
    with pytest.raises(ValueError, match="'self'.*outside it"):
        reg.aten.abs.out(beyond, out=torch.empty(4))
    reversed_ = np.arange(4, dtype=np.float32)[::-1]
    assert torch.equal(reg.aten.abs.out(-torch.from_numpy(reversed_.copy()), out=torch.empty(4)), torch.tensor([3.0, 2, 1, 0]))
    assert torch.equal(reg.aten.abs.out(reversed_, out=torch.empty(4)), torch.tensor([3.0, 2, 1, 0]))
    out = np.zeros(8, dtype=np.float32)
    reg.aten.abs.out(-torch.arange(4.0), out=out[::-2])
    assert out.tolist() == [0, 3, 0, 2, 0, 1, 0, 0]


# ---- value checks torch's CPU kernels make and its meta kernels skip ------------------

_X, _W = torch.randn(1, 1, 5, 5), torch.randn(1, 1, 2, 2)


def _conv(stride=(1, 1), padding=(0, 0), dilation=(1, 1), bias=None):
    return (_X, _W, bias, list(stride), list(padding), list(dilation), False, [0, 0], 1)


VALUE_CASES = [
    ("aten::convolution.out", _conv(dilation=(-1, -1)), {}, "dilation"),
    ("aten::convolution.out", _conv(padding=(-1, 0)), {}, "padding"),
    ("aten::convolution.out", _conv(stride=(0, 1)), {}, "stride"),
    ("aten::convolution.out", _conv(bias=torch.empty(0)), {}, "bias"),
    ("aten::max_pool2d_with_indices.out", (_X, [2, 2], [1, 1], [0, 0], [-1, -1], False), {"indices": torch.empty(0, dtype=torch.long)}, "dilation"),
    ("aten::_fft_c2r.out", (torch.randn(4, 3, dtype=torch.complex64), [1], 0, 100), {}, "last_dim_size"),
]


@pytest.mark.parametrize("name, args, outs, argument", VALUE_CASES, ids=[f"{c[0].split('::')[1]}-{c[3]}" for c in VALUE_CASES])
def test_value_checks_of_torchs_cpu_kernels_are_made(reg, name, args, outs, argument):
    from etops.schemas import torch_overload

    with pytest.raises(RuntimeError):  # torch's CPU kernel refuses it; its meta kernel does not
        torch_overload(name)(*args, out=torch.empty(0), **outs)
    for kernel in (reg.get_kernel(name), etops.as_program(name)):
        out = torch.empty(0)
        with pytest.raises(ValueError, match=f"argument '{argument}'"):
            kernel(*args, out=out, **outs)
        assert out.shape == (0,)


@pytest.mark.parametrize("op, args", [("_empty_dim_order", ([2, 3],)), ("_to_dim_order_copy", (torch.ones(2, 3),)),
                                      ("_clone_dim_order", (torch.ones(2, 3),))])
def test_a_dim_order_that_is_not_a_permutation_is_refused(reg, op, args):
    kernel = getattr(reg.dim_order_ops, op).out
    for order in ([0, 0], [0, 1, 2], [1, 5]):
        with pytest.raises(ValueError, match="argument 'dim_order'.*not a permutation"):
            kernel(*args, dim_order=order, out=torch.empty(2, 3))
    assert kernel(*args, dim_order=[0, 1], out=torch.empty(2, 3)).shape == (2, 3)


# ---- the judge's view -------------------------------------------------------------------


def test_the_kernel_as_a_program_calls_it_refuses_the_same_calls(reg):
    """These are torch's refusals of an invalid call, not workarounds: etops check
    (as_program) reports kernels called the same way."""
    abs_ = etops.as_program("aten::abs.out")
    x = torch.arange(6.0)
    with pytest.raises(ValueError, match=PARTIAL):
        abs_(x[1:], out=x[:-1])
    with pytest.raises(ValueError, match="requires grad"):
        abs_(torch.ones(3, requires_grad=True), out=torch.empty(3))
    with pytest.raises(TypeError, match="FakeTensor"):
        abs_(_fake(), out=torch.empty(3))
    assert torch.equal(abs_(x, out=x), torch.arange(6.0))


def test_refusals_keep_reference_counts(reg):
    import sys

    buf, x = torch.arange(6.0), torch.ones(3, requires_grad=True)
    parts = [torch.ones(2), buf[3:5]]
    before = [sys.getrefcount(t) for t in (buf, x, parts[1])]
    for _ in range(50):
        for call in (lambda: reg.aten.abs.out(buf[1:], out=buf[:-1]), lambda: reg.aten.abs.out(x, out=torch.empty(3)),
                     lambda: reg.aten.cat.out(parts, out=buf[:4]), lambda: reg.aten.abs.out(_two(), out=torch.empty(3))):
            with pytest.raises((ValueError, TypeError)):
                call()
        reg.aten.add.out(buf, buf, out=buf)  # an allowed full alias, remembered
    assert [sys.getrefcount(t) for t in (buf, x, parts[1])] == before
