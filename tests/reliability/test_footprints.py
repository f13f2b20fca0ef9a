"""Kernels whose footprint (out sizes, positions read and written) depends on tensor
values: every one of them is named by the rules table (etops.ops.data_dependent),
found here from the schemas so a new one fails until it is declared; on a warm
signature (three valid calls before: probed, the call memo warm) each refuses the
values torch refuses, with a ValueError naming the argument, and still computes
torch's result for valid values after. The kernels kept within their memory by
something else than a check (an out sized from the data, the kernel's own bounds
checks, a safety guard) show it on values that would overrun a checked-once call."""

from __future__ import annotations

import warnings

import pytest
import torch

import etops
from etops import ops
from etops.schemas import torch_overload

#: tensor arguments whose values are positions or counts
_POSITIONS = {"index", "indices", "repeats", "grid"}
_L = torch.long


def _scan() -> set:
    """The registered kernels whose footprint depends on tensor values, from their
    schemas alone: an input tensor (not written) named as positions or counts, a
    mask with a source read once per true element, or torch's dynamic_output_shape
    tag (the out's size depends on the values)."""
    reg, found = etops.registry(), set()
    for name in reg.operator_names:
        info = getattr(reg.get_kernel(name), "_info", None)
        schema = getattr(info, "_schema", None)
        if schema is None:
            continue  # no schema: not callable with tensors (etops list says so)
        inputs = {a.name for a in schema.arguments if "Tensor" in str(a.type) and not (a.alias_info and a.alias_info.is_write)}
        overload = torch_overload(name) if name.startswith("aten::") else None
        if (inputs & _POSITIONS or {"mask", "source"} <= inputs
                or (overload is not None and torch.Tag.dynamic_output_shape in overload.tags)):
            found.add(name)
    return found


def test_the_table_names_every_kernel_whose_footprint_depends_on_values():
    table = ops.data_dependent()
    assert set(table) == _scan()
    for name, footprint in table.items():
        assert footprint.checks or footprint.bounded, name


# ---- the cases: valid arguments, then the values torch refuses ------------------------


def _x():
    return torch.arange(12.0).reshape(4, 3)


def _index_kwargs(index):
    return {"self": _x(), "dim": 0, "index": torch.tensor(index), "out": torch.empty(len(index), 3)}


def _gather(index):
    return {"self": _x(), "dim": 0, "index": torch.tensor([index]), "out": torch.empty(1, len(index))}


def _scatter(index, **more):
    return {"self": _x(), "dim": 0, "index": torch.tensor([index]), **more, "out": torch.empty(4, 3)}


def _embedding(indices):
    return {"weight": _x(), "indices": torch.tensor(indices), "out": torch.empty(len(indices), 3)}


def _index(indices):
    return {"self": _x(), "indices": [torch.tensor(indices)], "out": torch.empty(len(indices), 3)}


def _index_put(indices, values_rows=None, out=True):
    rows = values_rows if values_rows is not None else (sum(indices) if isinstance(indices[0], bool) else len(indices))
    kwargs = {"self": _x(), "indices": [torch.tensor(indices)], "values": torch.ones(rows, 3) * 7}
    return {**kwargs, "out": torch.empty(4, 3)} if out else kwargs


def _repeats(repeats, output_size=None):
    kwargs = {"repeats": torch.tensor(repeats), "out": torch.empty(3, dtype=_L)}
    return kwargs if output_size is None else {**kwargs, "output_size": output_size}


def _masked_scatter(trues):
    mask = torch.zeros(12, dtype=torch.bool)
    mask[:trues] = True
    return {"self": _x(), "mask": mask.reshape(4, 3), "source": torch.arange(3.0) + 100, "out": torch.empty(4, 3)}


def _quantized(bits, indices):
    width = {"byte": 3, "4bit": 2, "2bit": 1}[bits]
    return {"weight": torch.arange(4 * width, dtype=torch.uint8).reshape(4, width),
            "weight_scales": torch.ones(4), "weight_zero_points": None,
            "weight_quant_min": {"byte": 0, "4bit": -8, "2bit": -2}[bits], "weight_quant_max": {"byte": 255, "4bit": 7, "2bit": 1}[bits],
            "indices": torch.tensor(indices), "out": torch.empty(len(indices), {"byte": 3, "4bit": 4, "2bit": 4}[bits])}


def _quantized_dtype(bits, indices):
    return {**_quantized(bits, indices), "dtype": torch.float32}


def _pool_backward(index):
    return {"grad_output": torch.ones(1, 1, 1, 1), "self": torch.randn(1, 1, 2, 2), "kernel_size": [2, 2], "stride": [2, 2],
            "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False, "indices": torch.tensor([[[[index]]]]),
            "grad_input": torch.zeros(1, 1, 2, 2)}


_BIG = 2**40
#: kernel -> (valid arguments, other valid arguments, [(argument named, refused arguments)]):
#: out-of-range indices above and below (negative ones where torch does not wrap them)
CHECKED = {
    "aten::gather.out": (_gather([1, 2]), _gather([3, 0]), [("index", _gather([1, 4])), ("index", _gather([1, -1])), ("index", _gather([_BIG, 0]))]),
    "aten::index_select.out": (_index_kwargs([1, 2]), _index_kwargs([3, 0]),
                               [("index", _index_kwargs([1, 4])), ("index", _index_kwargs([-1, 0])), ("index", _index_kwargs([0, _BIG]))]),
    "aten::scatter.src_out": (_scatter([1, 2], src=torch.ones(1, 2)), _scatter([3, 0], src=torch.ones(1, 2)),
                              [("index", _scatter([1, 4], src=torch.ones(1, 2))), ("index", _scatter([-1, 0], src=torch.ones(1, 2)))]),
    "aten::scatter.value_out": (_scatter([1, 2], value=5.0), _scatter([3, 0], value=5.0),
                                [("index", _scatter([1, 4], value=5.0)), ("index", _scatter([-1, 0], value=5.0))]),
    "aten::scatter_add.out": (_scatter([1, 2], src=torch.ones(1, 2)), _scatter([3, 0], src=torch.ones(1, 2)),
                              [("index", _scatter([1, _BIG], src=torch.ones(1, 2))), ("index", _scatter([-1, 0], src=torch.ones(1, 2)))]),
    "aten::embedding.out": (_embedding([1, 2]), _embedding([3, 0]), [("indices", _embedding([1, 4])), ("indices", _embedding([-1, 0]))]),
    "aten::index.Tensor_out": (_index([1, 2]), _index([-1, -4]), [("indices", _index([1, 4])), ("indices", _index([-5, 0])),
                                                                   ("indices", _index([_BIG, 0]))]),
    "aten::index_put.out": (_index_put([1, 2]), _index_put([-1, 0]), [("indices", _index_put([1, 4])), ("indices", _index_put([-5, 0]))]),
    # (ExecuTorch's in-place index_put_ refuses negative indices torch wraps: a KernelError, no overrun)
    "aten::index_put_": (_index_put([1, 2], out=False), _index_put([3, 0], out=False),
                         [("indices", _index_put([1, 4], out=False)), ("indices", _index_put([-5, 0], out=False))]),
    "aten::repeat_interleave.Tensor_out": (_repeats([1, 2, 0]), _repeats([0, 1, 2]), [
        ("repeats", _repeats([-1, 2, 2])), ("repeats", _repeats([2**63 - 1, 2, 0])), ("output_size", _repeats([1, 1, 1], output_size=2)),
        ("repeats", _repeats([2**31, 0, 0])), ("repeats", _repeats([2**62] * 4))]),
    "aten::masked_scatter.out": (_masked_scatter(3), _masked_scatter(2), [("source", _masked_scatter(4)), ("source", _masked_scatter(12))]),
    **{f"quantized_decomposed::embedding_{bits}.{overload}": (make(bits, [1, 2]), make(bits, [3, 0]),
                                                              [("indices", make(bits, [1, 4])), ("indices", make(bits, [-1, 0]))])
       for bits in ("byte", "4bit", "2bit") for overload, make in (("out", _quantized), ("dtype_out", _quantized_dtype))},
    "aten::max_pool2d_with_indices_backward.grad_input": (_pool_backward(3), _pool_backward(0),
                                                          [("indices", _pool_backward(4)), ("indices", _pool_backward(-1))]),
}
#: values etops refuses that torch does not: what ExecuTorch cannot do (int32 sizes;
#: indices the kernel would neither check nor wrap), and repeats whose int64 sum
#: wraps around to 0, on which torch's own kernel faults (not called here)
_ETOPS_ONLY = {("aten::repeat_interleave.Tensor_out", 3), ("aten::repeat_interleave.Tensor_out", 4),
               ("aten::max_pool2d_with_indices_backward.grad_input", 0), ("aten::max_pool2d_with_indices_backward.grad_input", 1)}


def _outs(name: str) -> tuple:
    return tuple(etops.get_kernel(name)._info.out_names()) or ("self",)


def _call_torch(name: str, kwargs: dict):
    """torch's out variant with the same arguments: the out it wrote. torch's
    quantized embeddings are not loaded: theirs is the kernel's own table of every
    row, indexed (the rows asked for, in the order asked)."""
    if name.startswith("quantized_decomposed::"):
        every = {**kwargs, "indices": torch.arange(4), "out": torch.empty(4, kwargs["out"].shape[1])}
        return _call(name, every)[kwargs["indices"]]
    kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_overload(name)(**kwargs)
    return kwargs[_outs(name)[0]]


def _call(name: str, kwargs: dict):
    kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    etops.get_kernel(name)(**kwargs)
    return kwargs[_outs(name)[0]]


def _warm(name: str, valid: dict):
    for _ in range(3):
        got = _call(name, valid)
    return got


def test_the_cases_cover_every_checked_kernel():
    table = ops.data_dependent()
    assert set(CHECKED) == {n for n, f in table.items() if f.checks or n in CHECKED}
    assert set(CHECKED) | set(BOUNDED) == set(table)


#: the checked kernels whose steady call the memo holds after _warm (STATIC outs, no
#: tensor list, no int list): the refusals below start from a warm memo
_MEMO_WARM = {"aten::embedding.out", "aten::gather.out", "aten::index_select.out", "aten::masked_scatter.out",
              "aten::scatter.src_out", "aten::scatter.value_out", "aten::scatter_add.out"}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_values_torch_refuses_are_refused_on_a_warm_signature_naming_the_argument(name):
    valid, other, refused = CHECKED[name]
    _warm(name, valid)
    assert (etops.get_kernel(name)._memo_state() == 2) == (name in _MEMO_WARM)
    for i, (argument, kwargs) in enumerate(refused):
        if (name, i) not in _ETOPS_ONLY and not name.startswith("quantized_decomposed::"):
            with pytest.raises((RuntimeError, IndexError, ValueError)):
                _call_torch(name, kwargs)  # torch refuses it too
        with pytest.raises(ValueError, match=f"argument '{argument}"):
            _call(name, kwargs)
    torch.testing.assert_close(_call(name, other), _call_torch(name, other))
    torch.testing.assert_close(_call(name, valid), _call_torch(name, valid))
    program = etops.as_program(name)  # the judge's kernel: the same checks
    program(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in valid.items()})
    with pytest.raises(ValueError, match=f"argument '{refused[0][0]}"):
        program(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in refused[0][1].items()})


def test_overflowing_repeats_after_a_valid_call_are_refused_in_a_fresh_interpreter():
    """The issue's reproducer: the sum wraps around in int64 and the kernel wrote
    past its out (glibc: "malloc: top chunk is corrupt")."""
    from fresh_python import run_python

    done = run_python("""
import torch, etops
k = etops.get_kernel("aten::repeat_interleave.Tensor_out")
for _ in range(3):
    k(torch.tensor([1, 2, 0]), out=torch.empty(3, dtype=torch.long))
try:
    k(torch.tensor([2**63 - 1, 2, 0]), out=torch.empty(3, dtype=torch.long))
except ValueError as exc:
    print("refused:", exc)
""", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "argument 'repeats'" in done.stdout, done.stdout


# ---- kept within their memory by something else than a check --------------------------


def _nonzero(ones):
    x = torch.zeros(12)
    x[:ones] = 1
    return {"self": x.reshape(4, 3), "out": torch.empty(0, 2, dtype=_L)}


def _masked_select(trues):
    mask = torch.zeros(12, dtype=torch.bool)
    mask[:trues] = True
    return {"self": _x(), "mask": mask.reshape(4, 3), "out": torch.empty(0)}


def _index_mask(trues):
    return {"self": _x(), "indices": [torch.tensor([True] * trues + [False] * (4 - trues))], "out": torch.empty(0, 3)}


def _grid(value, mode, padding):
    """An input of fives sampled at `value` everywhere (border or reflection padding:
    every read a five, so a result other than 5 or NaN read outside the input)."""
    return {"input": torch.full((1, 1, 4, 3), 5.0), "grid": torch.full((1, 2, 2, 2), value), "interpolation_mode": mode,
            "padding_mode": padding, "align_corners": False, "out": torch.empty(1, 1, 2, 2)}


#: kernel -> (valid arguments, [arguments whose footprint the first call did not see])
BOUNDED = {
    "aten::nonzero.out": (_nonzero(1), [_nonzero(12), _nonzero(0)]),
    "aten::masked_select.out": (_masked_select(1), [_masked_select(12), _masked_select(0)]),
    "aten::index.Tensor_out": (_index_mask(1), [_index_mask(4)]),
    "aten::repeat_interleave.Tensor_out": (_repeats([1, 1, 1]), [_repeats([100, 200, 300])]),
    "aten::grid_sampler_2d.out": (_grid(0.5, 0, 1), [_grid(v, m, p) for v in (1e30, -1e30, float("inf"), float("nan"), 2.0**62)
                                                     for m in (0, 1, 2) for p in (1, 2)]),
    "aten::max_pool2d_with_indices_backward.grad_input": (_pool_backward(3), [_pool_backward(2**40)]),
}


@pytest.mark.parametrize("name", sorted(BOUNDED))
def test_values_beyond_the_first_calls_footprint_stay_within_memory(name):
    valid, others = BOUNDED[name]
    _warm(name, valid)
    for kwargs in others:
        if name == "aten::max_pool2d_with_indices_backward.grad_input":  # torch accepts it; the safety guard refuses
            with pytest.raises(ValueError, match="argument 'indices'"):
                _call(name, kwargs)
            continue
        if name == "aten::grid_sampler_2d.out":  # ExecuTorch's values differ from torch's there: only where it read is checked
            got = _call(name, kwargs)
            assert bool(((got == 5) | got.isnan()).all()), (kwargs["grid"].flatten()[0], kwargs["interpolation_mode"], got)
            continue
        torch.testing.assert_close(_call(name, kwargs), _call_torch(name, kwargs), equal_nan=True)


def test_index_checks_read_the_values_the_kernel_reads():
    """An index given as a negative view (memory holding -i): its values as torch
    sees them are checked, and the kernel gets them resolved; index_select's check
    runs in C (kernel_footprint.c), with no Python precheck on its steady calls."""
    name = "aten::index_select.out"
    assert not etops.get_kernel(name)._info.calls.has_precheck
    _warm(name, _index_kwargs([1, 2]))
    given = _index_kwargs([1, 2])
    given["index"] = torch._neg_view(-torch.tensor([3, 0]))
    torch.testing.assert_close(_call(name, given), _x()[[3, 0]])
    given["index"] = torch._neg_view(-torch.tensor([3, -1]))  # memory holds [-3, 1]: 1 would pass, -1 does not
    with pytest.raises(ValueError, match="argument 'index' holds -1"):
        _call(name, given)
