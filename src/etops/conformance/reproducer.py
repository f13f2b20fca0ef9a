"""Standalone reproducer scripts: ``<name>.py`` next to ``<name>.pt`` (the inputs).

Each script loads the inputs, runs ATen and the ExecuTorch kernel on them and
compares the two with the tolerance the sweep used; it prints both results and
exits non-zero when they differ (a crash reproducer crashes). A hang's script
(a case that did not return within its limit: etops.conformance.case_clock) runs
the kernel's call in a forked child and waits for it at most the limit the case
exceeded: it exits 1 while the call does not return in time (the child killed),
0 when it does."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .mapping import overload_name
from .references.spec import TASK_PREFIX as REFERENCE_PREFIX
from .values import clip

_TEMPLATE = '''\
"""etops conformance reproducer: {status}.

kernel:   {kernel}  (ExecuTorch)
ATen op:  {aten_op}
OpInfo:   {opinfo}, dtype {dtype}, sample {sample}, call {call}
found:    {message}
inputs:   {inputs}
Run: python {script_name}
"""
import os
import signal
import sys
import time
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
{outs}{kernel_call}'''

_CALL = '''\
actual = etops.as_program("{kernel}")({kernel_args})  # ExecuTorch, as a program calls it
print("ATen:      ", expected)
print("ExecuTorch:", actual)
{compare}'''

_HANG_WAIT = '''\
LIMIT = {limit!r}  # seconds: the limit the case exceeded (etops.conformance.case_clock)


def on_meta(v):  # meta copies of the arguments
    if isinstance(v, torch.Tensor):
        return v.to("meta")
    if isinstance(v, (list, tuple)):
        return type(v)(on_meta(x) for x in v)
    return {{k: on_meta(x) for k, x in v.items()}} if isinstance(v, dict) else v


try:  # torch's meta kernels (which etops' first call of a signature uses) loaded here, outside the timed call
    (lambda *a, **k: torch.ops.{aten_attr}(*on_meta(a), **on_meta(k)))({aten_args})
except Exception:  # noqa: BLE001 - only a warm-up
    pass
etops.as_program("{kernel}")
pid = os.fork()  # the call in a child: a kernel that never returns cannot be stopped in this process
if pid == 0:
    torch.set_num_threads(1)  # the parent's OpenMP threads do not survive the fork
    try:
{call}
    except Exception as exc:  # refused, or failed: the call returned
        print(f"ExecuTorch: {{type(exc).__name__}}: {{exc}}")
    sys.stdout.flush()
    os._exit(0)
deadline = time.monotonic() + LIMIT
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        if os.WIFSIGNALED(status):
            sys.exit(f"ExecuTorch: the call ended its process (signal {{os.WTERMSIG(status)}})")
        print(f"returned within {{LIMIT}} s")
        sys.exit(0)
    time.sleep(0.01)
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
sys.exit(f"HANG: ExecuTorch's {kernel} did not return within {{LIMIT}} s")
'''


def hang_wait(kernel: str, call_lines: list, limit_seconds: float, aten_attr: str, aten_args: str) -> str:
    """The lines of a hang reproducer after its inputs: etops' first-call work
    warmed up on meta copies (ATen's `aten_attr`, e.g. aten.relu.default, called with
    `aten_args`, the call's text), then `call_lines` (the kernel's call, unindented)
    in a forked child, waited for at most `limit_seconds`: exit 1 while it does not
    return in time, 0 when it does."""
    if limit_seconds is None or not (limit_seconds > 0):
        raise ValueError(f"hang_wait: argument 'limit_seconds' must be a positive number of seconds, got {limit_seconds!r}")
    call = "\n".join("        " + line for line in call_lines)
    return _HANG_WAIT.format(limit=float(limit_seconds), call=call, kernel=kernel, aten_attr=aten_attr, aten_args=aten_args)

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
    from .case import bind, plan_call

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
            outs = (f'outs = {{"{names[0]}": etops.out_shapes.poisoned(torch.empty_like(expected))}}'
                    '  # sized as ATen\'s result, poisoned as the judge\'s\n')
        else:
            outs = "outs = {" + ", ".join(f'"{n}": etops.out_shapes.poisoned(torch.empty_like(expected[{i}]))'
                                          for i, n in enumerate(names)) + "}\n"
        call += ", **outs"
    name_only = overload_name(func).split("::", 1)[1]
    op, _, overload = name_only.partition(".")
    aten_attr = f"aten.{op}.{overload or 'default'}"
    compare = _COMPARE_VALUES.format(atol=result.atol, rtol=result.rtol) if values else _COMPARE_META
    if result.atol is None:
        compare = compare.replace("atol=None, rtol=None, ", "")
    if result.status == "hang":  # the call in a child, waited for at most its limit
        calling = hang_wait(result.kernel, [f'etops.as_program("{result.kernel}")({call})  # ExecuTorch, as a program calls it'],
                            result.limit_seconds, aten_attr, '*case["args"], **case["kwargs"]')
    else:
        calling = _CALL.format(kernel=result.kernel, kernel_args=call, compare=compare)
    text = _TEMPLATE.format(
        status=result.status, kernel=result.kernel, aten_op=result.aten_op, opinfo=result.opinfo, dtype=result.dtype,
        sample=result.sample, call=result.call, message=clip(result.message or "", 300).replace('"""', "'''"),
        inputs=result.inputs.replace('"""', "'''"), script_name=name, aten_attr=aten_attr, outs=outs, kernel_call=calling,
    )
    path.write_text(text)
    del bind
    return str(path)


# ---- literal reproducers (one per cluster of findings) -----------------------------

_LITERAL_TEMPLATE = '''\
"""{summary}

etops conformance finding ({status}): ExecuTorch's {kernel} against ATen's {aten_op}.
Run: python {script_name}  (exits 1 while the finding stands)
"""
import sys
import torch
import etops
nan, inf = float("nan"), float("inf")

{tensors}
expected = torch.ops.{aten_attr}({aten_args})  # ATen
try:
{calling}    actual = etops.as_program("{kernel}")({kernel_args})  # ExecuTorch, as a program calls it
except Exception as exc:  # refused, or failed
    print("ATen:      ", expected)
{refused}    sys.exit(f"ExecuTorch: {{type(exc).__name__}}: {{exc}}")
print("ATen:      ", expected)
print("ExecuTorch:", actual)
{compare}'''

#: what a reproducer of a finding of each kind does when the call fails otherwise than
#: the finding says (its bug is gone, whatever else the kernel does: another finding)
_NOT_THIS_FINDING = {
    # a wrong value's: a refusal is no wrong value (a refusal is a finding of its own)
    "mismatch": '''\
    if isinstance(exc, (etops.KernelError, etops.NoMatchingKernelError)) and not isinstance(
            exc, (etops.KernelCrashed, etops.KernelAborted)):
        print(f"ExecuTorch refuses the call, so computes no wrong value: {exc}")
        sys.exit(0)
''',
    "crash": '''\
    if not isinstance(exc, etops.KernelCrashed):
        print(f"ExecuTorch does not crash: {type(exc).__name__}: {exc}")
        sys.exit(0)
''',
    "abort": '''\
    if not isinstance(exc, etops.KernelAborted):
        print(f"ExecuTorch does not abort: {type(exc).__name__}: {exc}")
        sys.exit(0)
''',
}
#: ... and when the call returns: a crash's or an abort's bug is gone
_RETURNED_IS_NOT_THIS = {"crash": "print(\"ExecuTorch returned: no crash\")\n", "abort": "print(\"ExecuTorch returned: no abort\")\n"}

_LITERAL_COMPARE = '''\
try:
    torch.testing.assert_close(actual, expected, {tolerance}equal_nan=True, check_stride=False)
except AssertionError as exc:
    sys.exit(f"MISMATCH: {{exc}}")
print("no mismatch")
'''


_PRECISE_COMPARE = '''\
from etops.conformance.effective import wrong_by_ulps  # in ulps against a more precise reference (longdouble)
args, kwargs = (lambda *a, **k: (list(a), k))({aten_args})
why = wrong_by_ulps(torch.ops.{aten_attr}, args, kwargs, actual, expected)
if why:
    sys.exit(f"WRONG: {{why}}")
'''


_REGRESSION_COMPARE = '''\
from etops.conformance.effective import regressed_by_ulps  # in ulps against a more precise reference
args, kwargs = (lambda *a, **k: (list(a), k))({aten_args})
why = regressed_by_ulps(torch.ops.{aten_attr}, args, kwargs, actual, expected, base_ulps={base_ulps!r})
if why:
    sys.exit(f"PRECISION REGRESSION: {{why}}")
print("no precision regression")
'''


def _layout_expr(t: torch.Tensor, literal: str) -> str:
    """`literal` (the values, contiguous) given `t`'s strides."""
    if t.is_contiguous():
        return literal
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return f"{literal}.contiguous(memory_format=torch.channels_last)"
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return f"{literal}.contiguous(memory_format=torch.channels_last_3d)"
    order = sorted(range(t.dim()), key=lambda d: (-t.stride()[d], -t.shape[d]))  # outermost first
    dense = t.permute(order).is_contiguous()
    if dense:
        inverse = [order.index(d) for d in range(t.dim())]
        return f"{literal}.permute({order}).contiguous().permute({inverse})  # dim order {order}"
    return f"torch.empty_strided({list(t.shape)}, {list(t.stride())}, dtype={t.dtype}).copy_({literal})"


def tensor_literal(t: torch.Tensor) -> str:
    """A Python expression that rebuilds `t`: values, dtype and layout (strides)."""
    values = t.detach().contiguous()
    if values.numel() == 0:  # no values: the shape alone (a list literal would lose it)
        return f"torch.empty({list(t.shape)}, dtype={t.dtype})"
    if values.dtype in (torch.bfloat16, torch.float16):
        listed = values.float().tolist()
    else:
        listed = values.tolist()
    literal = f"torch.tensor({listed!r}, dtype={t.dtype})"
    return _layout_expr(t, literal)


def _value_literal(value, names: dict, clone: bool) -> str:
    if isinstance(value, torch.Tensor):
        name = names[id(value)]
        return f"{name}.clone()" if clone else name
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_value_literal(v, names, clone) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return repr(value)  # nan / inf / -inf: the script defines nan and inf
    return repr(value)


def _call_literal(args, kwargs, names, clone: bool) -> str:
    parts = [_value_literal(a, names, clone) for a in args]
    parts += [f"{k}={_value_literal(v, names, clone)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def literal_reproducer(case, func, args, kwargs, *, summary: str, values: bool = True, preserve: bool = False,
                       reference=None, guarded: bool = False, base_ulps: float | None = None,
                       limit_seconds: float | None = None) -> str:
    """The text of a standalone script for one case: the inputs as literals
    (values, dtypes, dim orders), ATen's call, the kernel's call (under
    ``etops.layout("preserve")`` when `preserve`; through etops.guard.call when
    `guarded`, as a crash or memory finding was found: a read or write outside a
    tensor raises there, where unguarded it may pass unseen) and the comparison
    (with `reference`, a tensor, instead of ATen's result when given: a test
    hook's; a precision regression's, given `base_ulps`, the error rule of
    etops.conformance.outcome against the base's error, and nothing else).
    `limit_seconds` (a hang): the kernel's call instead in a forked child, waited
    for that long (hang_wait)."""
    import etops

    from .case import plan_call

    kernel = etops.registry().get_kernel(case.kernel)
    plan = plan_call(kernel, func, args, kwargs)
    names: dict = {}
    lines = []

    def name_tensors(value):
        if isinstance(value, torch.Tensor) and id(value) not in names:
            names[id(value)] = f"x{len(names)}"
            lines.append(f"{names[id(value)]} = {tensor_literal(value)}")
        elif isinstance(value, (list, tuple)):
            for v in value:
                name_tensors(v)

    for v in list(args) + list(kwargs.values()):
        name_tensors(v)
    if isinstance(reference, torch.Tensor):
        lines.append(f"reference = {tensor_literal(reference)}  # what the sweep compared with (a test hook's)")
    name_only = overload_name(func).split("::", 1)[1]
    op, _, overload = name_only.partition(".")
    kernel_args = _call_literal(plan.args, plan.kwargs, names, clone=False)
    if plan.outs_from_aten:
        outs = kernel._info.out_names()
        given = ["expected"] if len(outs) == 1 else [f"expected[{i}]" for i in range(len(outs))]
        kernel_args += "".join(f", {n}=etops.out_shapes.poisoned(torch.empty_like({g}))" for n, g in zip(outs, given))
    indent = "    "
    calling = f'{indent}with etops.layout("preserve"):  # the tensors keep their dim orders\n' if preserve else ""
    if preserve:
        indent += "    "
    if values:
        tolerance = "" if case.atol is None else f"atol={case.atol!r}, rtol={case.rtol!r}, "
        compare = _LITERAL_COMPARE.format(tolerance=tolerance)
    else:
        compare = _COMPARE_META
    if case.status in _RETURNED_IS_NOT_THIS:  # a crash's or an abort's reproducer: only that failure is its bug
        compare = _RETURNED_IS_NOT_THIS[case.status]
    elif values and base_ulps is not None:  # a precision regression: the base's error is the bound, not OpInfo's tolerance
        compare = _REGRESSION_COMPARE.format(aten_attr=f"aten.{op}.{overload or 'default'}",
                                             aten_args=_call_literal(args, kwargs, names, clone=True), base_ulps=base_ulps)
    elif values and getattr(case, "ulps", None) is not None:  # float64: judged in ulps against a more precise reference
        compare = _PRECISE_COMPARE.format(aten_attr=f"aten.{op}.{overload or 'default'}",
                                          aten_args=_call_literal(args, kwargs, names, clone=True)) + compare
    text = _LITERAL_TEMPLATE.format(
        summary=summary.replace('"""', "'''"), status=case.status, kernel=case.kernel, aten_op=case.aten_op,
        script_name="reproducer.py", tensors="\n".join(lines), aten_attr=f"aten.{op}.{overload or 'default'}",
        aten_args=_call_literal(args, kwargs, names, clone=True), calling=calling, kernel_args=kernel_args, compare=compare,
        refused=_NOT_THIS_FINDING.get(case.status, "") if values or case.status != "mismatch" else "")
    if isinstance(reference, torch.Tensor):
        text = text.replace("  # ATen\n", "  # ATen\nexpected = reference\n", 1)
    if case.opinfo.startswith(REFERENCE_PREFIX):  # judged against etops' own reference, not an ATen op
        text = text.replace(f"torch.ops.aten.{op}.{overload or 'default'}", f"_reference_call({case.opinfo!r})")
        text = text.replace("\nimport etops\n", "\nimport etops\nfrom etops.conformance.references.run import "
                            "reference_call as _reference_call  # etops' reference of the kernel\n", 1)
    if limit_seconds is not None:  # a hang: everything after ATen's call is the call in a child, waited for
        head = text[:text.index("try:\n")]
        call = (['with etops.layout("preserve"):  # the tensors keep their dim orders'] if preserve else []) + \
               [("    " if preserve else "") + f'etops.as_program("{case.kernel}")({kernel_args})  # ExecuTorch, as a program calls it']
        head = head.replace('"""\nimport sys\n', '"""\nimport os\nimport signal\nimport sys\nimport time\n', 1)
        head = head.replace("(exits 1 while the finding stands)", f"(exits 1 while the call does not return within {limit_seconds:.3g} s)", 1)
        waited = head + hang_wait(case.kernel, call, limit_seconds, f"aten.{op}.{overload or 'default'}",
                                  _call_literal(args, kwargs, names, clone=True))
        if case.opinfo.startswith(REFERENCE_PREFIX):
            waited = waited.replace(f"torch.ops.aten.{op}.{overload or 'default'}", f"_reference_call({case.opinfo!r})")
        return waited
    if guarded:
        text = text.replace('actual = etops.as_program("{0}")('.format(case.kernel),
                            'actual = etops.guard.call(etops.as_program("{0}"), '.format(case.kernel), 1)
        text = text.replace("  # ExecuTorch, as a program calls it", "  # ExecuTorch, as a program calls it, guarded", 1)
    return text.replace("    actual = etops", indent + "actual = etops", 1)


def write_literal_reproducer(directory, name: str, case, func, args, kwargs, **options) -> str:
    """Writes ``literal_reproducer(...)`` as DIRECTORY/NAME.py; returns the path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_slug(name)}.py"
    path.write_text(literal_reproducer(case, func, args, kwargs, **options).replace("python reproducer.py", f"python {path.name}"))
    return str(path)
