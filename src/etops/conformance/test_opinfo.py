"""The conformance cases as pytest items: ``pytest --pyargs etops.conformance``.

One item per kernel, OpInfo and dtype (ids like ``aten::add.out-add-float32``), so
``-k add`` or ``-k "conv and float32"`` select. Collection runs discovery (cached:
see ``etops.conformance.discover``). ``ETOPS_CONFORMANCE_DTYPES=float32,int64`` and
``ETOPS_CONFORMANCE_KERNELS=aten::add.out,...`` narrow the items. A crash, abort,
mismatch or etops error fails the item; a kernel that refuses every case of the
dtype skips it with a reason starting "unsupported".
"""

import os

import pytest

from etops.conformance.pytest_cases import opinfo_cases


def _env_list(name):
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] or None


CASES = opinfo_cases(_env_list("ETOPS_CONFORMANCE_KERNELS"), dtypes=_env_list("ETOPS_CONFORMANCE_DTYPES"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_opinfo(case):
    case.check()
