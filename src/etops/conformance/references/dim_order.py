"""References of ``dim_order_ops::*`` and ``et_copy::*``: the ATen-side
operators exir registers for torch (``torch.ops.dim_order_ops.*``,
``torch.ops.et_copy.*``), on tensors of rank 0 to 5 in and out of the contiguous
and channels-last dim orders. The kernels run under ``etops.layout("preserve")``
(the dim order of every tensor reaches them, as in a program)."""

from __future__ import annotations

import torch

from .spec import Reference, Sample, invalid, torch_op

_REGISTRIES = ("executorch.exir.passes.dim_order_ops_registry", "executorch.exir.passes._device_copy_ops_registry")
_DTYPES = ("float32", "int64", "bool", "float16")


def _op(namespace: str, name: str):
    return torch_op(namespace, name, modules=_REGISTRIES)


def _tensor(shape, dtype, channels_last=False):
    x = torch.randn(shape) * 4
    x = x.to(dtype) if dtype != torch.bool else x > 0
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if len(shape) == 4 else torch.channels_last_3d)
    return x


_SHAPES = ((), (5,), (2, 3), (2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 2, 2), (0, 3, 2, 2))
_ORDERS = {4: ([0, 1, 2, 3], [0, 2, 3, 1]), 5: ([0, 1, 2, 3, 4], [0, 2, 3, 4, 1])}


def _copy_samples(dtype):
    """Each shape with dim_order None and, at rank 4 and 5, each order from each
    layout; invalid: a dim_order that is not a permutation of the dims."""
    for shape in _SHAPES:
        yield Sample((_tensor(shape, dtype),))
        for order in _ORDERS.get(len(shape), ()):
            for channels_last in (False, True):
                yield Sample((_tensor(shape, dtype, channels_last),), {"dim_order": list(order)})
    yield invalid("argument 'dim_order' repeats a dim", _tensor((2, 3, 4, 5), dtype), dim_order=[0, 0, 1, 2])


def _empty_samples(dtype):
    for shape in _SHAPES:
        yield Sample((list(shape),), {"dim_order": list(range(len(shape)))})
        for order in _ORDERS.get(len(shape), ())[1:]:
            yield Sample((list(shape),), {"dim_order": list(order)})


def _device_copy_samples(dtype):
    for shape in _SHAPES[:5]:
        yield Sample((_tensor(shape, dtype),))


REFERENCES = [
    Reference("dim_order_ops::_to_dim_order_copy.out", _op("dim_order_ops", "_to_dim_order_copy"), _copy_samples, _DTYPES, layout="preserve"),
    Reference("dim_order_ops::_clone_dim_order.out", _op("dim_order_ops", "_clone_dim_order"), _copy_samples, _DTYPES, layout="preserve"),
    Reference("dim_order_ops::_empty_dim_order.out", _op("dim_order_ops", "_empty_dim_order"), _empty_samples, ("float32",),
              layout="preserve"),  # compared by shape and dtype: the rules table's record of _empty_dim_order
    Reference("et_copy::_h2d_copy.out", _op("et_copy", "_h2d_copy"), _device_copy_samples),
    Reference("et_copy::_d2h_copy.out", _op("et_copy", "_d2h_copy"), _device_copy_samples),
]
