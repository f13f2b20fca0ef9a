"""Testing kernels with PyTorch's OpInfo samples (``etops.conformance``'s machinery).

    import pytest, etops.testing

    @etops.testing.parametrize("aten::add.out", dtypes=["float32"])
    def test_add(case):
        case.check()

    # a kernel of your own standing in for an ATen op, on that op's OpInfo samples;
    # guard=True: a kernel writing past its out fails as a crash, not killing pytest
    for case in etops.testing.opinfo_cases("mylib::my_add.out", op="add", aten="aten::add.Tensor", guard=True):
        case.check()

    # any registered kernel (a custom kernel, a library's) against a reference callable
    for case in etops.testing.reference_cases("mylib::my_add.out", lambda a, b: a + b,
                                              lambda dtype: [(torch.ones(3, dtype=dtype), torch.ones(3, dtype=dtype))]):
        case.check()

Each case is one OpInfo (or one reference's samples) at one dtype: ``case.run()``
runs its samples and returns what it found (a ``TaskResult``); ``case.check()``
raises AssertionError when any case crashed, aborted, mismatched or etops could
not make the call, listing them with their inputs. When the kernel refused every
case (``unsupported``: it does not take the dtype) ``check()`` says so: a pytest
skip whose reason starts with "unsupported" under pytest, ``Unsupported``
(``etops.errors.UnsupportedCheck``) raised elsewhere.

``guard=True`` (on ``check``, ``opinfo_cases``, ``parametrize`` and
``reference_cases``) runs every kernel call as ``etops.guard.call``: a kernel that
writes past an out or faults fails its case as a ``crash`` naming the argument,
instead of killing the test process (a crash is a failure either way).
"""

from __future__ import annotations

from .conformance.pytest_cases import (
    FAILING,
    KernelLoggedError,
    OpInfoCase,
    ReferenceCase,
    Sample,
    Unsupported,
    assert_result,
    invalid,
    opinfo_cases,
    parametrize,
    reference_cases,
)

__all__ = ["FAILING", "OpInfoCase", "ReferenceCase", "Sample", "Unsupported", "invalid", "opinfo_cases", "parametrize", "reference_cases"]
