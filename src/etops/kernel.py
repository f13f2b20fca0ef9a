"""What a kernel object knows about itself (KernelInfo), and the kernel objects.

The callable is the C ``Kernel`` (``etops._native``), built once per operator from
its argument plan (``plan``); its fast path handles a call with correctly sized
outs alone and hands the rest to ``slow_path``. Attributes the C object lacks
(``_schema``, ``kernels``, ``explain`` ...) are looked up on its KernelInfo:
what a call does before the kernel runs is the call policy the kernel is made with
(etops.ops: ``DIRECT`` for etops' direct calls, ``PROGRAM`` for the kernel as an
exported program calls it, ``as_program``), one C kernel per operator and policy;
registered kernels and their keys, ExecuTorch's kernel selection (``select``,
``explain``), the functional overload torch sizes outs with (``out_shapes``).
"""

from __future__ import annotations

from typing import Any, Union

import torch

from . import _native, dtypes, layouts
from .registered import KernelOrigin, RegisteredKernel, Selection, builtin_origins, decode_key, library_of, select_kernel  # noqa: F401 - kernel's API too
from .plan import F_HAS_DEFAULT, F_MUTABLE, F_OUT, K_OPT_TENSOR_LIST, K_RETURN_SLOT, K_TENSOR, K_TENSOR_LIST, Plan, build_plan
from .ops import DIRECT, CallPolicy, policy_of
from .ops.policy import workaround_note
from .errors import KernelError, SchemaError
from .hooks import origin_provider
from .out_shapes import infer_outs
from .tensors import as_torch
from .schemas import split_name, torch_overload
from .slow_path import SLOW_PATH
from .torch_checks import check_values, checked_with_torch
from .layouts import layout_warning, wrong_layout_message


#: the 0-dim tensor a call passes for a Python number given for a Tensor parameter
#: the kernel only reads (torch's wrapped-number dtypes; _native/kernel_convert.c)
_WRAPPED_NUMBER_DTYPE = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


class KernelInfo:
    """Describes one operator of ExecuTorch's registry: name, schema, registered
    kernels and where they come from. Shared by the C kernel object (as ``_info``)."""

    #: what a failed call raises (a delegate's info raises DelegateError)
    error_type = KernelError
    #: the registry name calls look the function up under when not `name` (a kernel an
    #: override replaced, registered privately; see make_kernel)
    registered_as: str | None = None

    def __init__(self, name: str, schema, schema_source: str, plan: Plan | None, plan_error: str | None,
                 policy: CallPolicy = DIRECT, registered_as: str | None = None):
        self.name = name
        #: what this info's kernel does before the kernel runs (etops.ops.DIRECT or PROGRAM)
        self.policy = policy
        if registered_as is not None:
            self.registered_as = registered_as
        self.namespace, self.op, self.overload = split_name(name)
        self._schema = schema
        self.schema_source = schema_source
        self._plan = plan
        self._plan_error = plan_error
        self._functional = None
        #: policy -> the C kernel of this operator made with it (made_with), shared by the infos of each
        self._made: dict = {}

    # ---- introspection -------------------------------------------------------------

    @property
    def callable(self) -> bool:
        """Whether etops can call this kernel (it needs a schema it can plan)."""
        return self._plan is not None

    @property
    def kernels(self) -> list[RegisteredKernel]:
        """Every kernel registered under this name, in registration order."""
        out = []
        for name, key, address in _native.registered_kernels():
            if name == self.name:
                out.append(RegisteredKernel(key, decode_key(key), library_of(address), address))
        return out

    @property
    def origins(self) -> list[KernelOrigin]:
        """Where each registered kernel of this operator comes from: built-in, a
        library, custom (source hash, build directory), Python, overridden."""
        provider = origin_provider()
        return provider(self.name) if provider is not None else builtin_origins(self.name)

    @property
    def library(self) -> str:
        """The library that registered this operator (of its first kernel)."""
        kernels = self.kernels
        return kernels[0].library if kernels else "<not registered>"

    def __repr__(self) -> str:
        lines = [f"ExecuTorch kernel {self.name}"]
        lines.append(f"  schema:  {self._schema if self._schema is not None else '(unknown) ' + self.schema_source}")
        if self._plan_error:
            lines.append(f"  not callable: {self._plan_error}")
        for k in self.kernels:
            lines.append(f"  kernel:  {k.describe()}  [{k.library.rsplit('/', 1)[-1]}]")
        return "\n".join(lines)

    # ---- binding (Python-side APIs only: calls, and the slow path, bind in C) -------

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """Schema argument name -> value (defaults filled, missing outs as None), for
        the APIs that take a call's arguments in Python (explain, tensor_metas, the
        fuzzer). A call binds in C and hands the slow path what it bound."""
        plan = self._require_plan()
        names = [a.name for a in plan.args if a.kind != K_RETURN_SLOT]
        bound = dict(zip(names, args))
        bound.update(kwargs)
        for entry in plan.args:
            if entry.kind == K_RETURN_SLOT or entry.name in bound:
                continue
            bound[entry.name] = entry.default if entry.flags & F_HAS_DEFAULT else None
        return {n: bound[n] for n in names}

    def _require_plan(self) -> Plan:
        if self._plan is None:
            raise SchemaError(f"{self.name} cannot be called: {self._plan_error}")
        return self._plan

    # ---- kernel selection ----------------------------------------------------------

    def arg_names(self) -> tuple[str, ...]:
        """The plan's argument names in plan order (the order C binds a call in)."""
        names = self.__dict__.get("_arg_names")
        if names is None:
            names = self._arg_names = tuple(a.name for a in self._require_plan().args if a.kind != K_RETURN_SLOT)
        return names

    def tensor_metas(self, args: tuple, kwargs: dict) -> list[tuple[str, int, tuple[int, ...]]]:
        """(slot, ExecuTorch dtype, dim order) of every Tensor on the kernel's stack,
        in the order ExecuTorch builds the kernel key from: the Tensor arguments,
        then each return that is an out (ExecuTorch passes the out a second time)."""
        return self.bound_tensor_metas(self.bind(args, kwargs))

    def bound_tensor_metas(self, bound: dict) -> list[tuple[str, int, tuple[int, ...]]]:
        """tensor_metas of a call already bound (argument name -> value)."""
        plan = self._require_plan()
        names = [entry.name for entry in plan.args]
        metas: list[tuple[str, int, tuple[int, ...]]] = []
        for entry in plan.args:
            name, kind = entry.name, entry.kind
            if kind == K_RETURN_SLOT and isinstance(entry.extra, int):
                name, kind = names[entry.extra], K_TENSOR
                label = f"return ({name})"
            else:
                label = name
            value = bound.get(name)
            if kind == K_TENSOR and isinstance(value, (bool, int, float, complex)) and not entry.flags & (F_OUT | F_MUTABLE):
                wrapped = next(d for t, d in _WRAPPED_NUMBER_DTYPE.items() if isinstance(value, t))  # bool before int
                metas.append((label, dtypes.ET_SCALAR_TYPE[wrapped], ()))  # a 0-dim tensor, as torch wraps it
            elif kind == K_TENSOR and value is not None:
                dtype, order, kept = self._tensor_meta(value, label)
                # a tensor not kept as it is reaches the kernel as a contiguous copy
                metas.append((label, dtype, tuple(order) if kept else tuple(range(len(order)))))
        return metas

    def check_tensors(self, bound: dict) -> None:
        """Raises as a call with these bound arguments would for any tensor etops
        cannot pass to the kernel (not a CPU tensor ExecuTorch can represent; one the
        kernel writes that is read-only or expanded), naming the argument."""
        for entry in self._require_plan().args:
            value = bound.get(entry.name)
            if value is None or entry.kind not in (K_TENSOR, K_TENSOR_LIST, K_OPT_TENSOR_LIST):
                continue
            writable = bool(entry.flags & (F_OUT | F_MUTABLE))
            items = [(entry.name, value)] if entry.kind == K_TENSOR else \
                [(f"{entry.name}[{i}]", v) for i, v in enumerate(value) if v is not None] if isinstance(value, (list, tuple)) else []
            for label, item in items:
                if not writable and isinstance(item, (bool, int, float, complex)):
                    continue  # a Python number: wrapped as a 0-dim tensor, as torch wraps it
                _native.tensor_meta(item, self.name, label, writable)

    def _tensor_meta(self, value, label):
        """_native.tensor_meta as this kernel borrows the tensor: (dtype, dim order,
        whether it reaches the kernel as it is)."""
        dtype, order, kept = _native.tensor_meta(value, self.name, label)
        if kept and self.contiguous_only and tuple(order) != tuple(range(len(order))):
            kept = False
        return dtype, order, kept

    def copied_tensors(self, bound: dict) -> list[str]:
        """Lines naming each Tensor argument of a bound call that reaches the kernel
        as a contiguous copy (not dense, or in a dim order no program produces)."""
        lines = []
        for entry in self._require_plan().args:
            value = bound.get(entry.name)
            if entry.kind != K_TENSOR or value is None or isinstance(value, (bool, int, float, complex)):
                continue  # a Python number goes as a 0-dim tensor of its own
            _dtype, order, kept = self._tensor_meta(value, entry.name)
            if kept:
                continue
            strides = tuple(as_torch(value).stride())
            shape = tuple(as_torch(value).shape)
            if self.contiguous_only and layouts.is_dense(shape, strides):
                why = (f"dim order {list(order)}: the rules table marks this kernel contiguous_only (it mishandles "
                       "other dim orders), so no layout mode passes it as it is")
            elif layouts.is_dense(shape, strides):
                why = (f"dim order {list(layouts.dim_order_of(shape, strides))} is neither contiguous nor channels-last; "  # type: ignore[arg-type]
                       "etops.layout('preserve') passes it as it is")
            else:
                why = "it is not dense"
            lines.append(f"  {entry.name}: a contiguous copy reaches the kernel ({why}; a written one is copied back after the call)")
        return lines

    def wrong_layout_lines(self, metas) -> list[str]:
        """Lines warning of each tensor (of `metas`, as bound_tensor_metas gives them)
        reaching the kernel in a layout the rules table records it as silently
        wrong on (whether or not the user opted in)."""
        judging = self.entry.judging
        lines = []
        for label, _dtype, order in metas:
            finding = judging.wrong_on(layouts.layout_name(order))
            if finding is not None:
                opted = " (you opted in: etops.layout('preserve'))" if layouts.layout_is_preserved() else ""
                lines.append("warning: " + wrong_layout_message(self.name, finding, label) + opted)
        return lines

    def select(self, pairs) -> Selection:
        """The kernel ExecuTorch would run for tensors of these (ExecuTorch dtype,
        dim order) pairs, in kernel-key order (``tensor_metas``)."""
        key = _native.make_key(list(pairs)) if pairs else "(no tensors)"
        return select_kernel(self.kernels, key)

    def explain(self, *args, **kwargs) -> str:
        """Which registered kernel a call with these arguments would run, and why
        (or why none matches): the kernel key the call builds, outs it allocates
        (``out=`` omitted) included."""
        return self.describe_call(self.bind(args, kwargs))

    def with_allocated_outs(self, bound: dict) -> tuple[dict, list[str]]:
        """`bound` with every missing out allocated as the call allocates it (torch's
        shape, dtype and dense strides), and the lines saying so (or why etops
        cannot size them: the key then lacks them, as the call would fail)."""
        missing = [n for n in self.out_names() if bound.get(n) is None]
        if not missing:
            return bound, []
        try:
            specs = self.out_specs(bound)
        except Exception as exc:  # noqa: BLE001 - the call itself would raise this
            return bound, [f"outs: the call cannot size {', '.join(missing)} ({type(exc).__name__}: {exc})"]
        from .out_shapes import allocate

        outs = {n: allocate(specs.get(n)) for n in missing}
        return {**bound, **outs}, [f"outs allocated by the call (no out= given): {', '.join(missing)}"]

    def describe_call(self, bound: dict) -> str:
        """explain() of a call already bound (argument name -> value)."""
        bound, notes = self.with_allocated_outs(bound)
        metas = self.bound_tensor_metas(bound)
        pairs = [(dtype, order) for _, dtype, order in metas]
        key = _native.make_key(pairs) if pairs else "(no tensors)"
        lines = [f"{self.name} called with:"]
        for name, dtype, order in metas:
            lines.append(f"  {name}: {dtypes.dtype_name(dtype)}, dim order {list(order)}")
        lines.extend(notes)
        copied = self.copied_tensors(bound)
        if copied:
            lines.append("layouts (as an exported program would give them):")
            lines.extend(copied)
        lines.extend(self.wrong_layout_lines(metas))
        lines.append(f"kernel key: {key}")
        registered = self.kernels
        how, chosen = select_kernel(registered, key)
        if chosen is not None and how == "exact":
            lines.append(f"runs: the {self._kind_of(chosen)} kernel registered for exactly this key, from {chosen.library}")
        elif chosen is not None and how == "fallback":
            why = "no kernel is registered for this key" if len(registered) > 1 else "it is the only kernel"
            lines.append(f"runs: the {self._kind_of(chosen)} fallback kernel ({why}), from {chosen.library}")
        else:
            lines.append("runs: nothing - no kernel matches this key and there is no fallback kernel")
        has_fallback = any(k.key is None for k in registered)
        if len(registered) > 1 or not has_fallback:
            lines.append("registered kernels:")
            lines.extend(f"  {k.key or 'fallback'}: {k.describe()}" for k in registered)
        return "\n".join(lines)

    def _kind_of(self, kernel: RegisteredKernel) -> str:
        """'built-in', 'custom', 'python' ... (and 'overridden') of one registered kernel."""
        for origin in self.origins:
            if origin.key == kernel.key:
                return origin.kind + (" (overridden)" if origin.overridden else "")
        return "registered"

    # ---- outs ----------------------------------------------------------------------

    def out_names(self) -> tuple[str, ...]:
        return self._require_plan().out_names

    def out_specs(self, bound: dict) -> dict:
        """What the outs of a call with these arguments must be (see infer_outs)."""
        return infer_outs(self, bound)

    @property
    def entry(self):
        """The operator's entry in the policy table (etops.ops.policy_of): its
        sizing, direct, safety and judging parts."""
        return policy_of(self.name)

    @property
    def calls(self):
        """What this info's kernel runs before each call (the entry's CallRules
        under this info's policy)."""
        return self.entry.calls(self.policy)

    @property
    def contiguous_only(self) -> bool:
        """Whether every tensor reaches the kernel as a contiguous copy (the policy
        table's workaround for kernels that mishandle other dim orders)."""
        return self.calls.contiguous_only

    def precheck(self, bound: dict) -> dict | None:
        """The arguments rewritten by the normalizers of this info's policy (the
        caller calls again with them), or None after its guards accepted the
        arguments; a guard's refusal raises a GuardRefusal, naming the argument.
        First the entry's footprint checks (every policy's): a value torch refuses
        raises ValueError naming the argument."""
        calls = self.calls
        calls.check_footprint(bound, self)
        normalized = calls.normalized(bound, self)
        if normalized is not None:
            return normalized
        calls.check(bound, self)
        return None

    def refuse_footprint(self, bound: dict, argument: str) -> None:
        """The C call path found a value of index `argument` outside the dim it
        indexes (kernel_footprint.c): raises the footprint check's ValueError,
        naming the argument."""
        self.calls.check_footprint(bound, self, every=True)
        raise ValueError(f"{self.name}: argument '{argument}' holds a value outside the dim it indexes")

    def nothing_to_compute(self, bound: dict) -> bool:
        """Whether this info's policy says this call has nothing to compute (its
        outs are only sized, the kernel is not called)."""
        return self.calls.nothing_to_compute(bound)

    def workaround(self, bound: dict) -> str | None:
        """For a kernel made with PROGRAM: what one made with DIRECT does about a
        call with these arguments that it does not (etops.ops.policy.workaround_note),
        a note beside the judge's verdict; None for a DIRECT kernel."""
        if self.policy is DIRECT:
            return None
        return workaround_note(self.entry, bound, self)

    def made_with(self, policy: CallPolicy, kernel):
        """The C kernel of this operator made with `policy` (`kernel` is this info's
        own): `kernel` itself when it is made with `policy`, else one made once, with
        an info of its own that shares the plan and schema."""
        if policy is self.policy:
            return kernel
        made = self._made.get(policy)
        if made is None:
            info = KernelInfo(self.name, self._schema, self.schema_source, self._plan, self._plan_error,
                              policy=policy, registered_as=self.registered_as)
            info._made = self._made
            made = self._made[policy] = _make_c_kernel(info)
        return made

    def other_policies(self) -> list:
        """The kernels of this operator made with another policy than this info's
        (by made_with), if any were made."""
        return [k for policy, k in self._made.items() if policy is not self.policy]

    def validate(self, bound: dict, meta_checked: bool = False) -> dict | None:
        """torch's checks of a call: its meta kernel of this out variant with the
        given outs (skipped when `meta_checked`: the outs were sized by torch's
        functional on these arguments), then the rules table's checks of what torch's
        real kernel refuses and its meta kernel does not (check_values, then the
        rules table's torch_checks). Raises what torch refuses,
        naming the argument where torch's message lets it; when torch accepts,
        returns out name -> the shape torch's out= would resize a given out to (the
        outs whose shape differs: ExecuTorch cannot change an out's rank, and some
        kernels then write past it), empty when none (or when `meta_checked`: the
        functional gave the shapes), None when torch cannot check them."""
        check_values(self.name, bound, self.out_names())
        overload = torch_overload(self.name) if self.name.startswith("aten::") else None
        resizes: dict | None = {} if meta_checked else None
        if not meta_checked and overload is not None:
            refusal, resizes = checked_with_torch(self.name, overload, bound, self.out_names())
            if refusal is not None:
                raise refusal
        self.entry.check_like_torch(bound, self)
        return resizes

    def explain_mismatch(self, bound: dict) -> None:
        """A registered kernel has no tensor specs (only a delegate's call checks
        them): every call matches, there is nothing to refuse."""

    def functional_overload(self):
        """torch's functional counterpart of this out variant (same non-out
        arguments, no outs), used to infer out shapes; None if there is none."""
        if self._functional is not None:
            return self._functional or None
        found = False
        overload = torch_overload(self.name)
        if overload is not None:
            plan = self._require_plan()
            del plan
            wanted = [(a.name, str(a.real_type)) for a in self._schema.arguments if not a.is_out]
            packet = getattr(getattr(torch.ops, self.namespace), self.op)
            for name in sorted(packet.overloads(), key=lambda n: (n != "default", n)):
                candidate = getattr(packet, name)
                if _sizes_outs_of(candidate._schema, wanted):
                    found = candidate
                    break
        self._functional = found
        return found or None


def _sizes_outs_of(schema, wanted) -> bool:
    """Whether the functional `schema` computes what an out variant with non-out
    arguments `wanted` ((name, type) pairs) writes: the same arguments in the same
    order, plus at most keyword-only options defaulting to None (`dtype`, `layout`,
    `device`, `pin_memory` of _to_copy and full_like, which the out variant takes
    from its out) left at their defaults."""
    if any(a.is_out for a in schema.arguments):
        return False
    own = [(a.name, str(a.real_type)) for a in schema.arguments]
    extra = [a for a in schema.arguments if (a.name, str(a.real_type)) not in wanted]
    if [p for p in own if p in wanted] != wanted:
        return False
    return all(a.kwarg_only and a.has_default_value() and a.default_value is None for a in extra)


class UncallableKernel:
    """Stands for a registered operator etops cannot call (no schema it can plan):
    inspectable like a kernel, raises SchemaError when called."""

    def __init__(self, info: KernelInfo):
        self._info = info
        self.name = info.name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._info, attr)

    def __dir__(self) -> list[str]:
        return sorted(set(object.__dir__(self)) | set(dir(self._info)))

    def __repr__(self) -> str:
        return repr(self._info)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._info._require_plan()


#: What the registry gives for an operator name: the C kernel object, or an
#: UncallableKernel (inspectable, raises SchemaError when called).
KernelObject = Union[_native.Kernel, UncallableKernel]


def make_kernel(name: str, schema: Any, schema_source: str, registered_as: str | None = None) -> KernelObject:
    """The kernel object for `name`: the C Kernel when the schema can be planned,
    else an UncallableKernel that says why. `registered_as`: the registry name the
    call looks its function up under, when not `name` (a kernel an override
    replaced, registered under a private name, called as `name` is: the same
    checks, rules and out shapes)."""
    plan, error = None, None
    if schema is None:
        error = schema_source
    else:
        try:
            plan = build_plan(name, schema)
        except SchemaError as exc:
            error = str(exc).split(": ", 1)[-1]
    info = KernelInfo(name, schema, schema_source, plan, error, registered_as=registered_as)
    if plan is None:
        return UncallableKernel(info)
    return _make_c_kernel(info)


def _make_c_kernel(info: KernelInfo):
    """The C kernel object of a plannable `info`, its prechecks as its policy says."""
    name, plan = info.name, info._require_plan()
    # torch checks calls of its own operators (aten::) before the kernel sees them;
    # torch_checks.check_values also a dim order of ExecuTorch's dim-order ops
    validate = (name.startswith("aten::") and torch_overload(name) is not None) or any(a.name == "dim_order" for a in plan.args)
    calls, judging = info.calls, info.entry.judging
    # only a channels-last tensor reaches the kernel in another order than contiguous
    # outside etops.layout("preserve") (where the user opted in): no callback otherwise
    warn = layout_warning(name, judging) if judging.wrong_on("channels-last") is not None and not calls.contiguous_only else None
    position = {a.name: i for i, a in enumerate(plan.args)}
    ranges = tuple((position[index], position[source], position[dim] if isinstance(dim, str) else -1, dim if isinstance(dim, int) else 0)
                   for index, source, dim in calls.index_ranges)
    return _native.Kernel(info.registered_as or name, plan.args, plan.returns, info, SLOW_PATH, precheck=calls.has_precheck,
                          validate=validate, contiguous_only=calls.contiguous_only, warn_layout=warn, index_ranges=ranges)


__all__ = ["KernelInfo", "RegisteredKernel", "Selection", "UncallableKernel", "decode_key", "library_of", "make_kernel"]
