"""Cases for an overload no OpInfo sample and no reference reaches (such as
``aten::add.Scalar_out`` when discovery finds nothing for it): derived from its
schema and a sibling overload's samples.

A derived task runs the OpInfo samples that reach a sibling overload of the same
operator (``aten::add.out``); each call the sibling's kernel would get becomes a
call of the target's functional overload (``aten.add.Scalar``), its arguments
taken by name and converted to the target's types (a Tensor where a Scalar is
wanted gives its first element; a number where a Tensor is wanted a 0-dim
tensor), and the runner checks the target's kernel on it as on any case (ATen's
result of the functional overload is the expected value).
"""

from __future__ import annotations

import time
import warnings
import zlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..conformance.runner import bind, dtype_from_name, dtype_name, opinfo_dtypes, opinfos, tolerance
from ..schemas import split_name
from .cases import DERIVED_PREFIX


def functional(name: str):
    """The ATen overload computing what out variant `name` writes
    (``aten::add.Scalar_out`` -> ``aten.add.Scalar``), or None."""
    ns, op, overload = split_name(name)
    if ns != "aten":
        return None
    if overload == "out":
        wanted = "default"
    elif overload.endswith("_out"):
        wanted = overload[: -len("_out")]
    else:
        return None
    packet = getattr(torch.ops.aten, op, None)
    return getattr(packet, wanted, None) if packet is not None else None


def siblings(name: str) -> list[str]:
    """The other registered overloads of `name`'s operator."""
    import etops

    ns, op, _ = split_name(name)
    return sorted(n for n in etops.registry().operator_names if n != name and split_name(n)[:2] == (ns, op))


def tasks_for(name: str, dtypes=None) -> list[dict]:
    """Derived tasks of `name`: per sibling overload with OpInfo samples, each
    OpInfo reaching it at each of its dtypes (`dtypes` narrows)."""
    from .cases import reaching

    if functional(name) is None:
        return []
    wanted = None if dtypes is None else {dtype_name(d if isinstance(d, torch.dtype) else dtype_from_name(str(d))) for d in dtypes}
    sibs = siblings(name)
    reach = reaching(sibs) if sibs else {}
    tasks = []
    for sib in sibs:
        for oid in reach.get(sib, ()):
            for dtype in opinfo_dtypes(opinfos()[oid]):
                if wanted is None or dtype_name(dtype) in wanted:
                    tasks.append({"opinfo": f"{DERIVED_PREFIX}{name}|{sib}|{oid}", "dtype": dtype_name(dtype), "kernel": name})
    return sorted(tasks, key=lambda t: (t["dtype"] != "float32", t["dtype"], t["opinfo"]))


def convert(func, args, kwargs, target):
    """(args, kwargs) of ATen call `func` as arguments of overload `target`, by
    argument name; None when a required argument has no counterpart."""
    bound = bind(func, args, kwargs)
    out_args, out_kwargs = [], {}
    positional = [a.name for a in target._schema.arguments if not a.kwarg_only]
    for arg in target._schema.arguments:
        if arg.name in bound:
            value = bound[arg.name]
            want = arg.type.kind()
            if want == "NumberType" and isinstance(value, torch.Tensor):
                if value.numel() == 0:
                    return None
                value = value.reshape(-1)[0].item()
            elif want == "TensorType" and not isinstance(value, torch.Tensor):
                value = torch.tensor(value)
        elif arg.has_default_value():
            continue
        else:
            return None
        if arg.kwarg_only or positional.index(arg.name) != len(out_args):
            out_kwargs[arg.name] = value
        else:
            out_args.append(value)
    return out_args, out_kwargs


class _DeriveMode(TorchDispatchMode):
    def __init__(self, runner, target: str, sibling: str, target_func) -> None:
        super().__init__()
        self.runner, self.target, self.sibling, self.target_func = runner, target, sibling, target_func

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.runner.kmap.target(func) == self.sibling:
            converted = convert(func, args, kwargs, self.target_func)
            if converted is not None:
                try:
                    self.runner.handle(self.target_func, self.target, *converted)
                except Exception:  # noqa: BLE001 - ATen refuses the derived call: no case
                    pass
        return func(*args, **kwargs)


def run_derived(runner, task_id: str, dtype: torch.dtype):
    """Runs derived task `task_id` at `dtype` on `runner` (check's TaskRunner, in
    check mode) and returns its TaskResult."""
    target, sibling, oid = task_id[len(DERIVED_PREFIX):].split("|", 2)
    op = opinfos()[oid]
    runner.begin(task_id, dtype, *tolerance(op, dtype), op=op)
    target_func = functional(target)
    start = time.perf_counter()
    torch.manual_seed(zlib.crc32(f"{task_id}|{runner.dname}".encode()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for index, sample in enumerate(op.sample_inputs_func(op, "cpu", dtype, False)):
                runner.sample_index, runner.call_index = index, 0
                runner.result.samples += 1
                try:
                    with _DeriveMode(runner, target, sibling, target_func):
                        op(sample.input, *sample.args, **sample.kwargs)
                except Exception:  # noqa: BLE001 - ATen refused the sample itself
                    runner.result.samples_failed += 1
        except Exception as exc:  # noqa: BLE001 - the sample generator failed
            runner.result.sample_error = f"{type(exc).__name__}: {exc}"[:300]
    runner.result.seconds = time.perf_counter() - start
    return runner.result
