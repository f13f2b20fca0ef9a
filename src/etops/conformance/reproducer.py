"""Standalone reproducer scripts: ``<name>.py`` next to ``<name>.pt`` (the inputs).

Each script loads the inputs, runs ATen and the ExecuTorch kernel on them and
compares the two with the tolerance the sweep used; it prints both results and
exits non-zero when they differ (a crash reproducer crashes)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .mapping import overload_name

_TEMPLATE = '''\
"""etops conformance reproducer: {status}.

kernel:   {kernel}  (ExecuTorch)
ATen op:  {aten_op}
OpInfo:   {opinfo}, dtype {dtype}, sample {sample}, call {call}
found:    {message}
inputs:   {inputs}
Run: python {script_name}
"""
import sys
from pathlib import Path

import torch
import etops



def load():  # the inputs, fresh each time (ATen may write to its own)
    return torch.load(Path(__file__).with_suffix(".pt"), weights_only=False)


case = load()
expected = torch.ops.{aten_attr}(*case["args"], **case["kwargs"])  # ATen
if case.get("reference") is not None:  # the sweep compared with a replaced reference (a test hook)
    expected = case["reference"]
kcase = load()
{outs}actual = etops.get_kernel("{kernel}")({kernel_args})  # ExecuTorch
print("ATen:      ", expected)
print("ExecuTorch:", actual)
{compare}'''

_COMPARE_VALUES = '''\
try:
    torch.testing.assert_close(actual, expected, atol={atol!r}, rtol={rtol!r}, equal_nan=True, check_stride=False)
except AssertionError as exc:
    print("MISMATCH:", exc)
    sys.exit(1)
print("no mismatch")
'''

_COMPARE_META = '''\
# values are random or uninitialized: shapes and dtypes only
same = [(a.shape, a.dtype) for a in (actual if isinstance(actual, (list, tuple)) else [actual])] == \\
       [(e.shape, e.dtype) for e in (expected if isinstance(expected, (list, tuple)) else [expected])]
if not same:
    print("MISMATCH: shape or dtype")
    sys.exit(1)
print("no mismatch")
'''


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def script_name(kernel: str, opinfo: str, dtype: str, sample: int, call: int, status: str) -> str:
    return f"{status}__{_slug(kernel.replace('aten::', ''))}__{_slug(opinfo)}__{dtype}__s{sample}c{call}.py"


def write_reproducer(report_dir, result, func, args, kwargs, reference=None, values: bool = True) -> str:
    """Writes the script and its inputs; returns the script's path."""
    from .runner import bind, plan_call

    directory = Path(report_dir) / "reproducers"
    directory.mkdir(parents=True, exist_ok=True)
    name = script_name(result.kernel, result.opinfo, result.dtype, result.sample, result.call, result.status)
    path = directory / name
    import etops

    kernel = etops.registry().get_kernel(result.kernel)
    plan = plan_call(kernel, func, args, kwargs)
    torch.save({"args": list(args), "kwargs": dict(kwargs), "kernel_args": plan.args, "kernel_kwargs": plan.kwargs,
                "reference": reference}, path.with_suffix(".pt"))
    outs = ""
    call = '*kcase["kernel_args"], **kcase["kernel_kwargs"]'
    if plan.outs_from_aten:
        names = kernel._info.out_names()
        if len(names) == 1:
            outs = f'outs = {{"{names[0]}": torch.empty_like(expected)}}  # sized as ATen\'s result\n'
        else:
            outs = "outs = {" + ", ".join(f'"{n}": torch.empty_like(expected[{i}])' for i, n in enumerate(names)) + "}\n"
        call += ", **outs"
    name_only = overload_name(func).split("::", 1)[1]
    op, _, overload = name_only.partition(".")
    aten_attr = f"aten.{op}.{overload or 'default'}"
    compare = _COMPARE_VALUES.format(atol=result.atol, rtol=result.rtol) if values else _COMPARE_META
    if result.atol is None:
        compare = compare.replace("atol=None, rtol=None, ", "")
    text = _TEMPLATE.format(
        status=result.status, kernel=result.kernel, aten_op=result.aten_op, opinfo=result.opinfo, dtype=result.dtype,
        sample=result.sample, call=result.call, message=(result.message or "")[:300].replace('"""', "'''"),
        inputs=result.inputs.replace('"""', "'''"), script_name=name, aten_attr=aten_attr, outs=outs,
        kernel_args=call, compare=compare,
    )
    path.write_text(text)
    del bind
    return str(path)
