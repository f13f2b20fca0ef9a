"""The outs a guarded call allocates (the judge's calls: etops dev guards every one)
are poisoned first (etops.out_shapes.poisoned): an element the kernel leaves
unwritten is the same wrong value on every run, never whatever the memory held last
(at times the very values expected, so that the unmodified base passed a case its
edit failed). The wheel's own cat.out leaves a complex out unwritten when one input
is empty."""

import pytest
import torch

import etops
from etops.out_shapes import POISON_BYTE, poisoned


def test_the_wheels_cat_of_an_empty_complex_input_leaves_its_out_poisoned_on_every_run(reg):
    inputs = [torch.empty(0, 5, dtype=torch.complex64), torch.randn(5, 5, dtype=torch.complex64)]
    for _ in range(3):
        got = etops.guard.call(reg.aten.cat.out, inputs)
        assert got.shape == (5, 5) and bool(got.isnan().all()), got
        assert not torch.allclose(got, torch.cat(inputs), equal_nan=True)


def test_a_kernel_that_writes_its_out_is_not_touched_by_the_poison(reg):
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    assert torch.equal(etops.guard.call(reg.aten.add.out, a, b), a + b)
    ints = torch.arange(12, dtype=torch.int32).reshape(4, 3)
    assert torch.equal(etops.guard.call(reg.aten.add.out, ints, ints), ints * 2)


@pytest.mark.parametrize("dtype, want", [
    (torch.float32, "nan"), (torch.float16, "nan"), (torch.bfloat16, "nan"), (torch.complex64, "nan"),
    (torch.bool, True), (torch.uint8, POISON_BYTE), (torch.int8, POISON_BYTE - 256),
    (torch.int32, int.from_bytes(bytes([POISON_BYTE]) * 4, "little", signed=True)),
    (torch.int64, int.from_bytes(bytes([POISON_BYTE]) * 8, "little", signed=True)),
])
def test_each_dtype_has_its_poison(dtype, want):
    t = poisoned(torch.zeros(2, 3, dtype=dtype))
    if want == "nan":
        assert bool(t.isnan().all())
    else:
        assert bool((t == want).all())
    if dtype not in (torch.bool,) and want != "nan":  # an integer: every byte the poison's
        assert set(t.view(torch.uint8).flatten().tolist()) == {POISON_BYTE}


def test_lists_and_empty_tensors_and_other_values_pass_through():
    pair = [torch.zeros(2), torch.zeros(1, dtype=torch.int16)]
    assert poisoned(pair) is pair and bool(pair[0].isnan().all()) and pair[1].item() == -23131
    empty = torch.empty(0)
    assert poisoned(empty) is empty and poisoned(None) is None
    channels_last = torch.zeros(1, 3, 2, 2).contiguous(memory_format=torch.channels_last)
    assert bool(poisoned(channels_last).isnan().all())
