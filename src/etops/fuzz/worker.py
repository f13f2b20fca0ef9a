"""Runs fuzz cases: materializes a case, runs it through etops and ATen, checks the
properties. Meant to run in a worker process (``runner``), since a kernel may kill
the process it runs in; ``run_case`` also works in-process for cases known safe.

Properties checked for every case (a broken one is a *violation*):

- ``input_written``: an input the schema does not mark mutable keeps its bytes;
- ``out_touched``: an error raised before the kernel ran (anything but
  KernelError) leaves every out's shape and bytes as they were;
- ``refcount``: ``sys.getrefcount`` of every tensor, array and list argument and
  out is the same after the call (or the error) as before;
- valid calls ATen accepts: etops returns the same dtype, shape and values (within
  tolerance) - ``mismatch`` - or raises KernelError / NoMatchingKernelError /
  SchemaError (ExecuTorch kernels implement a subset) - else ``refused``;
- invalid calls: the error is a TypeError, ValueError, OverflowError, IndexError,
  ZeroDivisionError or etops error (``unexpected_exception`` otherwise) and, for a
  mutation of one argument, its message names that argument (``unnamed_arg``);
- ``abort``: ExecuTorch aborted inside the kernel (KernelAborted: an ET_CHECK where
  the kernel should fail cleanly), as it would abort a program;
- ``fault``: the kernel faulted (an unguarded call raised KernelCrashed: SIGFPE,
  SIGSEGV ... caught in this process), ``memory`` the same in a guarded call;
- the adversarial classes (``classes``): a call that ATen accepts is compared with
  ATen's result as a valid one is (``mismatch``); an out sharing memory with an
  input or another out that etops accepts is ``overlap_accepted`` (torch refuses it).

Kernels are called as an exported program calls them (etops.as_program: etops'
workarounds for known bugs do not hide them); a case with ``"direct": True`` calls
the kernel as etops' direct calls do (the rules table's guards and workarounds).
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import re
import sys
import traceback
import warnings

import numpy as np
import torch

import etops
from etops.plan import F_MUTABLE, F_OUT, K_RETURN_SLOT, K_TENSOR
from etops.compare import FUZZ, diff
from etops.ops import rules_for
from etops.out_shapes import functional_arguments
from etops.torch_checks import torch_refusal

from ..guard.wire import frame, read_exact, read_frame_body, write_all

from . import classes
from .memory_limit import limit_memory
from .materialize import materialize, tensor_bytes, torch_copy

ALLOWED_INVALID = (TypeError, ValueError, OverflowError, IndexError, ZeroDivisionError, etops.EtopsError)
ALLOWED_VALID_REFUSAL = (etops.KernelError, etops.NoMatchingKernelError, etops.SchemaError)

_REG = None


def registry():
    global _REG
    if _REG is None:
        _REG = etops.registry()
    return _REG


def warm_up():
    """Builds every kernel object and looks up torch's functional overloads (the
    first quantized op imports executorch.exir: tens of seconds). The runner runs
    this once in its own process, so every worker forked from it starts warm."""
    from ..checkout.load import from_environment

    from_environment()  # the kernels the parent loaded with --load
    for kernel in registry().kernels():
        info = getattr(kernel, "_info", None)
        if info is not None and getattr(info, "callable", False) and info.out_names():
            try:
                info.functional_overload()
            except Exception:  # noqa: BLE001 - the cases will say
                pass


# ---- reference ------------------------------------------------------------------------


def _on_meta(value):
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    if isinstance(value, list):
        return [_on_meta(v) for v in value]
    return value


def reference(kernel, case, args, kwargs):
    """ATen's result: ("ok", [tensors or a scalar]) or ("error", message) or ("none", why).
    For the integer classes (classes.META_CLASSES) ATen runs on the meta device: the
    shapes and dtypes of its result only (ATen's own CPU kernels trap on INT_MIN / -1
    too: torch.div(x, -1, rounding_mode="trunc"))."""
    info = kernel._info
    out_names = info.out_names()
    on_meta = case.get("mutation") in classes.META_CLASSES
    ref_args = [torch_copy(a) for a in args]
    ref_kwargs = {k: torch_copy(v) for k, v in kwargs.items() if k not in out_names}
    if on_meta:
        ref_args, ref_kwargs = _on_meta(ref_args), {k: _on_meta(v) for k, v in ref_kwargs.items()}
    ns, op, overload = info.namespace, info.op, info.overload
    try:
        packet = getattr(getattr(torch.ops, ns), op)
        overload_fn = getattr(packet, overload)
    except (AttributeError, RuntimeError) as exc:
        return ("none", f"torch has no {info.name}: {exc}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not out_names:
                result = overload_fn(*ref_args, **ref_kwargs)
                returned = [r for r in info._plan.returns if r >= 0]
                if returned:  # in-place ops (copy_, index_put_) return self
                    return ("ok", [ref_args[returned[0]] if returned[0] < len(ref_args) else result])
                return ("ok", [result])
            functional = info.functional_overload()
            bound = info.bind(tuple(ref_args), ref_kwargs)
            if functional is not None:
                # ATen's real kernel never runs on what its meta kernel refused (some segfault)
                names = {a.name for a in functional._schema.arguments}
                refusal = torch_refusal(info.name, functional, {n: v for n, v in bound.items() if n in names}, [])
                if refusal is not None:
                    raise refusal
                positional, keywords = functional_arguments(functional, bound)
                result = functional(*positional, **keywords)
            else:
                dtype = getattr(torch, case.get("out_dtype") or "float32")
                outs = {n: torch.empty(0, dtype=dtype) for n in out_names}
                result = overload_fn(*ref_args, **ref_kwargs, **outs)
    except Exception as exc:  # noqa: BLE001 - ATen refuses the arguments
        return ("error", f"{type(exc).__name__}: {str(exc)[:300]}")
    if isinstance(result, torch.Tensor):
        results = [result]
    elif isinstance(result, (list, tuple)) and len(out_names) == 1 and all(isinstance(r, torch.Tensor) for r in result) and _is_list_out(info):
        results = [list(result)]
    else:
        results = list(result) if isinstance(result, (list, tuple)) else [result]
    return ("ok", results)


def _is_list_out(info):
    for entry in info._plan.args:
        if entry.flags & F_OUT:
            return entry.kind != K_TENSOR
    return False


# ---- comparing ------------------------------------------------------------------------


def compare(op, got, want):
    """None when `got` matches `want` (etops.compare's ``fuzz`` policy; comparison
    kind of the op's record in etops.ops), else a description
    of the difference."""
    if isinstance(want, list):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"expected a list of {len(want)} tensors, got {type(got).__name__}"
        for i, (g, w) in enumerate(zip(got, want)):
            d = compare(op, g, w)
            if d:
                return f"[{i}]: {d}"
        return None
    if isinstance(got, np.ndarray) and isinstance(want, torch.Tensor):
        got = torch.from_numpy(got)
    if not isinstance(want, (torch.Tensor, bool, int, float)):
        return None
    judging = rules_for(op).judging
    d = diff(got, want, judging.tolerance_of(FUZZ), judging.compare)
    if d.ok:
        return None
    problem = d.structural
    if isinstance(want, torch.Tensor):
        if problem is not None and problem.what in ("type", "count"):
            return f"expected a tensor, got {type(got).__name__}"
        if problem is not None and problem.what == "dtype":
            return f"dtype {got.dtype} != ATen's {want.dtype}"
        if problem is not None:
            return f"shape {tuple(got.shape)} != ATen's {tuple(want.shape)}"
        if not (want.dtype.is_floating_point or want.dtype.is_complex):
            return f"{d.mismatched} of {d.numel} elements differ (exact dtype {want.dtype})"
        return f"{d.mismatched} of {d.numel} elements differ (max abs diff {d.max_abs:.3g}, dtype {want.dtype})"
    # Python scalars (prim ops)
    if problem is not None:
        return f"returned {type(got).__name__} {got!r}, ATen {type(want).__name__} {want!r}"
    return f"returned {got!r}, ATen {want!r}"


# ---- running a case -------------------------------------------------------------------


def _make_out(spec, want, case, args_by_name, list_out=False):
    dtype = getattr(torch, case.get("out_dtype") or "float32")
    tag = spec[0]
    if want is None and list_out and tag in ("ref", "empty"):
        return [torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype)]
    if isinstance(want, list):  # tensor-list out
        if tag == "ref":
            return [torch.full(w.shape, 7 if w.dtype != torch.bool else True, dtype=w.dtype) for w in want]  # want may be meta
        return [torch.empty(0, dtype=w.dtype) for w in want] if want else [torch.empty(0, dtype=dtype)]
    if isinstance(want, torch.Tensor):
        dtype = want.dtype
    if tag == "ref" and isinstance(want, torch.Tensor):
        t = torch.empty(want.shape, dtype=dtype)
        t.fill_(True if dtype == torch.bool else 7)
        return t
    if tag in ("ref", "empty"):
        return torch.empty(0, dtype=dtype)
    shape = tuple(want.shape) if isinstance(want, torch.Tensor) else (3,)
    if tag == "nondense":
        big = torch.zeros(shape[:-1] + (max(shape[-1], 1) * 2,) if shape else (2,), dtype=dtype)
        return big[..., ::2] if shape else big[::2]
    if tag == "overlap":
        n = max(math.prod(shape), 2)
        return torch.zeros(1, dtype=dtype).expand(n)
    if tag == "alias":
        return args_by_name.get(spec[1])
    if tag == "np_ro":
        arr = np.zeros(shape, dtype=torch.empty(0, dtype=dtype).numpy().dtype if dtype != torch.bfloat16 else np.float32)
        arr.flags.writeable = False
        return arr
    if tag == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if tag == "wrong_type":
        return materialize(spec[1])
    raise ValueError(f"unknown out spec {spec!r}")


def _tracked(obj, into):
    """Objects whose reference counts the call must not change."""
    if isinstance(obj, (torch.Tensor, np.ndarray)):
        into.append(obj)
    elif isinstance(obj, list):
        into.append(obj)
        for item in obj[:64]:
            if isinstance(item, (torch.Tensor, np.ndarray)):
                into.append(item)


def _snapshots(plan, out_names, args_by_name, kwargs, aliased):
    inputs = {}
    for name, value in args_by_name.items():
        entry = plan.get(name)
        if entry is None or entry.flags & (F_OUT | F_MUTABLE):
            continue
        items = value if isinstance(value, list) else [value]
        for j, item in enumerate(items[:64]):
            if isinstance(item, (torch.Tensor, np.ndarray)) and id(item) not in aliased:
                inputs[f"{name}[{j}]" if isinstance(value, list) else name] = (item, tensor_bytes(item))
    outs_before = {}
    for name in out_names:
        if name in kwargs:
            items = kwargs[name] if isinstance(kwargs[name], list) else [kwargs[name]]
            outs_before[name] = [(o, tensor_bytes(o)) for o in items]
    return inputs, outs_before


def _tracking(args, kwargs):
    tracked = []
    for value in list(args) + list(kwargs.values()):
        _tracked(value, tracked)
    return tracked


def _names_an_argument(message, plan):
    return any(re.search(rf"\b{re.escape(name)}\b", message) for name in plan)


#: called as BEFORE_CALL(case, args, kwargs) just before the kernel call (sequences' reproducers)
BEFORE_CALL = None
#: called as ON_PHASE("reference") before ATen's reference call and ON_PHASE("case") once
#: it returned (sequences: whether a process died in ATen's reference)
ON_PHASE = None

#: blocks "<selftest:corrupt>" overflowed, freed when the next case starts
_SELFTEST_BLOCKS: list = []


def _release_selftest_blocks():
    while _SELFTEST_BLOCKS:  # overflowed by an earlier case: their frees find the damage
        _selftest_libc().free(_SELFTEST_BLOCKS.pop())


def end_of_sequence():
    """After the last case of a sequence (etops.fuzz.sequences): frees what the cases
    left alive and walks the heap (malloc_trim consolidates every free chunk), so
    glibc's malloc checking sees corruption no later call happened to touch."""
    import gc

    _release_selftest_blocks()
    gc.collect()
    junk = [bytearray(64 * (k % 97 + 1)) for k in range(20000)]
    del junk
    _selftest_libc().malloc_trim(0)


def _selftest_libc():
    import ctypes

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = (ctypes.c_void_p,)
    return libc


def run_case(case):
    """Runs one case; returns {"status", "exc", "aten", "violations", ...}."""
    if case["op"] == "<selftest:abort>":  # the runner's own tests
        os.abort()
    if case["op"] == "<selftest:fpe>":  # etops.fuzz.sequences' own tests: a fatal signal outside any kernel
        import signal

        signal.signal(signal.SIGFPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGFPE)
    _release_selftest_blocks()
    if case["op"] == "<selftest:corrupt>":  # etops.fuzz.sequences' own tests: a heap overflow that does not crash here
        import ctypes

        blocks = [_selftest_libc().malloc(24) for _ in range(8)]
        ctypes.memset(blocks[0] + 24, 0x5A, 64)  # past the first block's end: over its neighbours' headers
        _SELFTEST_BLOCKS.extend(blocks)
        return {"op": case["op"], "status": "ok", "violations": []}
    if case["op"] == "<selftest:hang>":
        import time

        time.sleep(3600)
    kernel = registry().get_kernel(case["op"])
    if not case.get("direct"):
        kernel = etops.as_program(kernel)
    info = kernel._info
    plan = {e.name: e for e in info._plan.args if e.kind != K_RETURN_SLOT}
    args = [materialize(v) for _, v in case["args"]]
    kwargs = {n: materialize(v) for n, v in case["kwargs"]}
    args_by_name = dict(zip([n for n, _ in case["args"]], args))
    args_by_name.update(kwargs)
    outcome = {"op": case["op"], "violations": [], "status": None, "exc": None, "aten": None}

    ref_status = ("none", "invalid case")
    if case["mode"] == "valid" or case["mutation"] in ("numpy", "nondense_input", "special_values", "index_out_of_range", *classes.CLASSES):
        if ON_PHASE is not None:
            ON_PHASE("reference")
        ref_status = reference(kernel, case, args, kwargs)
        if ON_PHASE is not None:
            ON_PHASE("case")
    outcome["aten"] = ref_status[0]
    if ref_status[0] == "error":
        outcome["aten_error"] = ref_status[1]
    wants = ref_status[1] if ref_status[0] == "ok" else []
    out_names = info.out_names()
    for i, name in enumerate(out_names):
        spec = case["outs"].get(name, ("omit",))
        if spec[0] == "omit":
            continue
        want = wants[i] if i < len(wants) else None
        made = classes.make_out(spec, want, case, args_by_name, kwargs) if spec[0] in classes.OUT_SPECS else None
        if made is None and spec[0] in classes.OUT_SPECS:
            spec = ("ref",)  # the class does not apply (nothing to overlap, an out of one element)
        kwargs[name] = made if made is not None else _make_out(spec, want, case, args_by_name, list_out=_is_list_out(info))
    if case.get("mutation") in classes.OVERLAP_CLASSES:  # a shifted out replaced its input with the copy it overlaps
        args = [args_by_name.get(n, a) for (n, _), a in zip(case["args"], args)]
        kwargs.update({n: args_by_name[n] for n, _ in case["kwargs"] if n in args_by_name})
    aliased = {id(v) for n, v in kwargs.items() if n in out_names}

    inputs, outs_before = _snapshots(plan, out_names, args_by_name, kwargs, aliased)
    tracked = _tracking(args, kwargs)
    counts_before = [sys.getrefcount(o) for o in tracked]

    result = None
    exc_info = None
    if BEFORE_CALL is not None:
        BEFORE_CALL(case, args, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if case.get("guard"):
                from etops.guard import call as guarded_call  # an extension: the worker loads it on demand

                result = guarded_call(kernel, *args, **kwargs)
            else:
                result = kernel(*args, **kwargs)
            outcome["status"] = "ok"
        except etops.KernelCrashed as exc:  # the kernel faulted: a finding, never a pass
            exc_info = None
            outcome["status"] = "raised"
            outcome["argument"] = exc.argument
            outcome["exc"] = f"KernelCrashed: {exc}"
            outcome["violations"].append(("memory" if case.get("guard") else "fault", str(exc)[:400]))
            return outcome
        except Exception as exc:  # noqa: BLE001 - classified below
            exc_info = (type(exc), str(exc))
            outcome["status"] = "raised"
            outcome["argument"] = getattr(exc, "argument", None)  # a guard's refusal names it (etops.errors.refusing)
            outcome["exc"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            if not isinstance(exc, ALLOWED_INVALID + ALLOWED_VALID_REFUSAL):
                outcome["traceback"] = traceback.format_exc()[-2000:]
            del exc
    v = outcome["violations"]

    # results (before refcounts: `result` holds references on purpose)
    if outcome["status"] == "ok" and case.get("mutation") in classes.OVERLAP_CLASSES:
        v.append(("overlap_accepted", f"{case['mutation']} on '{case['target']}' accepted (torch refuses outs that partially overlap)"))
    compared = case["mode"] == "valid" or (case.get("mutation") in classes.VALUE_CLASSES and case["mutation"] not in classes.META_CLASSES)
    if outcome["status"] == "ok" and ref_status[0] == "ok" and compared:
        if out_names:
            got = list(result) if isinstance(result, tuple) else [result]
            if len(out_names) == 1 and _is_list_out(info):
                got = [result if result is not None else kwargs[out_names[0]]]
        else:
            got = [result]
        for i, want in enumerate(wants[: len(got)]):
            d = compare(case["op"], got[i], want)
            if d:
                v.append(("mismatch", f"result {i}: {d}"))
    result = got = None  # noqa: F841

    counts_after = [sys.getrefcount(o) for o in tracked]
    if counts_after != counts_before:
        # References held by a garbage cycle (a traceback's frames) are freed by
        # the cyclic GC: a softer finding than a leak.
        gc.collect()
        counts_gc = [sys.getrefcount(o) for o in tracked]
        for o, b, a, c in zip(tracked, counts_before, counts_after, counts_gc):
            if c != b:
                v.append(("refcount", f"{type(o).__name__} refcount {b} -> {c} (after gc.collect())"))
                break
        else:
            outcome["held_by_cycle"] = True

    for label, (item, before) in inputs.items():
        if tensor_bytes(item) != before and case.get("mutation") not in classes.OVERLAP_CLASSES:  # there: overlap_accepted
            v.append(("input_written", f"input '{label}' was written (not mutable in the schema)"))
    if exc_info is not None and not issubclass(exc_info[0], etops.KernelError):
        for name, items in outs_before.items():
            for o, before in items:
                if before is not None and tensor_bytes(o) != before:
                    v.append(("out_touched", f"out '{name}' changed although the call raised {exc_info[0].__name__} before the kernel ran"))
    if exc_info is not None and issubclass(exc_info[0], etops.KernelAborted):
        v.append(("abort", outcome["exc"]))
    elif exc_info is not None:
        etype, msg = exc_info
        if case["mode"] == "invalid":
            if not issubclass(etype, ALLOWED_INVALID):
                v.append(("unexpected_exception", outcome["exc"]))
            elif case["target"] and not issubclass(etype, etops.KernelError) and case["target"] not in msg and not _names_an_argument(msg, plan):
                v.append(("unnamed_arg", f"{etype.__name__} does not name argument '{case['target']}': {msg[:300]}"))
        elif ref_status[0] == "ok" and not issubclass(etype, ALLOWED_VALID_REFUSAL) and not (info.calls.has_guards and issubclass(etype, ALLOWED_INVALID)):
            v.append(("refused", f"ATen accepts this call; etops raised {outcome['exc']}"))
        elif not issubclass(etype, ALLOWED_INVALID):
            v.append(("unexpected_exception", outcome["exc"]))
    return outcome


def serve(request_fd: int, result_fd: int, stderr_path=None):
    """Worker loop: read a case from `request_fd` (a ``C`` frame of etops.guard.wire),
    write its outcome to `result_fd` (an ``O`` frame), until the pipe closes.

    What the worker inherited from its parent (torch, etops, the parent's own
    objects: hundreds of thousands) is frozen (gc.freeze): a collection scans only
    what the cases made, where a call's garbage cycles are (the refcount check's
    gc.collect took 0.2 s of CPU each, plus copying every page of the parent's heap
    that the collection touched; it ran for one case in six of `make test`'s fuzz)."""
    if stderr_path:
        fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    torch.set_num_threads(1)
    limit_memory()
    registry()
    gc.freeze()
    while read_exact(request_fd, 1) == b"C":
        body = read_frame_body(request_fd)
        if body is None:
            return
        case = pickle.loads(body)
        try:
            out = run_case(case)
        except Exception as exc:  # noqa: BLE001 - a fuzzer bug, not a kernel finding
            out = {"op": case.get("op"), "status": "harness_error", "violations": [("harness", f"{type(exc).__name__}: {exc}")], "traceback": traceback.format_exc()[-3000:]}
        sys.stderr.flush()
        write_all(result_fd, frame(b"O", pickle.dumps(out)))
