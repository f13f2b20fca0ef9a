"""What a reference is: per kernel, the callable whose results the kernel must
equal and the inputs to call both on (valid ones, and invalid ones both must
refuse). Imports torch and the standard library only."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import torch

#: task ids of reference tasks start with this (OpInfo ids never do)
TASK_PREFIX = "ref:"


@dataclasses.dataclass(frozen=True)
class Sample:
    """One call: the kernel's arguments without its outs (`args` by position,
    `kwargs` by name). An invalid sample (`valid=False`) is one the reference
    refuses and the kernel must refuse too (`why`: what is wrong with it)."""

    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)
    valid: bool = True
    why: str = ""


def invalid(why: str, *args, **kwargs) -> Sample:
    """An invalid sample: `why` says which argument is wrong and how."""
    return Sample(tuple(args), kwargs, valid=False, why=why)


@dataclasses.dataclass(frozen=True)
class Reference:
    """The reference of one registered kernel.

    `reference(*args, **kwargs)` computes what the kernel must return for a
    sample's arguments (a torch operator or a Python function; it raises where
    the input is invalid; None: ATen's functional counterpart of the kernel,
    the overload etops sizes its outs with); `samples(dtype)` yields the Samples of one dtype (a
    label for scalar ops); `dtypes`: the dtype names a sweep runs; `schema`: the
    kernel's schema when no installed package defines one (etops.set_schema);
    `library`: a module to import first (the library that registers the kernel);
    `compare`: an etops.compare kind ("metadata" for uninitialized results; None:
    the kind the rules table's record of the kernel gives);
    `tolerance`: (rtol, atol), a dict of them by dtype name, or None
    (torch.testing's defaults); `witnesses`: more callables each valid sample is
    also compared with, one case each (a second opinion: the ATen
    implementations of a library beside the math); `writes`: the names of
    mutable arguments whose values after the call are judged: the kernel's and
    the reference's results are then ``(result, *written)``, or only the written
    values when `placeholder` (the result carries nothing); `layout`:
    "preserve" to call the kernel under etops.layout("preserve") (true dim orders);
    `outs_from_reference`: the kernel's outs are sized as the reference's results
    (torch has no meta kernel to size them); `refusal_on_meta`: invalid samples
    are checked against the reference on meta tensors (its CPU implementation
    would abort the process)."""

    kernel: str
    reference: Callable | None
    samples: Callable[[torch.dtype], Iterable[Sample]]
    dtypes: tuple = ("float32",)
    schema: str | None = None
    library: str | None = None
    compare: str | None = None
    tolerance: tuple | dict | None = None
    witnesses: tuple = ()
    writes: tuple = ()
    placeholder: bool = False
    layout: str | None = None
    outs_from_reference: bool = False
    refusal_on_meta: bool = False

    def __post_init__(self):
        if "::" not in self.kernel:
            raise ValueError(f"Reference: argument 'kernel' must be a 'namespace::op.overload' name, got {self.kernel!r}")
        if self.reference is not None and not callable(self.reference):
            raise TypeError(f"Reference: argument 'reference' for {self.kernel} must be callable, got {type(self.reference).__name__}")
        if not callable(self.samples):
            raise TypeError(f"Reference: argument 'samples' for {self.kernel} must be callable (dtype -> Samples)")
        if any(not callable(w) for w in self.witnesses):
            raise TypeError(f"Reference: argument 'witnesses' for {self.kernel} must be a tuple of callables")
        if isinstance(self.writes, str) or (self.placeholder and not self.writes):
            raise TypeError(f"Reference: argument 'writes' for {self.kernel} must be a tuple of argument names (non-empty with 'placeholder')")
        if isinstance(self.tolerance, dict) and set(self.tolerance) != set(self.dtypes):
            raise ValueError(f"Reference: argument 'tolerance' for {self.kernel} must give one (rtol, atol) per dtype of 'dtypes'")
        if isinstance(self.dtypes, str) or not self.dtypes:
            raise TypeError(f"Reference: argument 'dtypes' for {self.kernel} must be a non-empty tuple of dtype names")

    @property
    def task_id(self) -> str:
        return TASK_PREFIX + self.kernel

    def tolerance_of(self, dtype_name: str) -> tuple | None:
        """(rtol, atol) of the cases at `dtype_name` (None: torch.testing's defaults)."""
        return self.tolerance.get(dtype_name) if isinstance(self.tolerance, dict) else self.tolerance


class _Schema:
    """The parts of a FunctionSchema the sweep reads (name, overload, arguments)."""

    def __init__(self, name: str, overload_name: str, arguments, returns=()):
        self.name, self.overload_name, self.arguments, self.returns = name, overload_name, list(arguments), list(returns)


class ReferenceOp:
    """A reference callable dressed as the ATen overload the sweep's TaskRunner
    expects: it binds arguments by the kernel's schema, is named after the
    reference and calls it. Values are compared unless `compare` is "metadata"."""

    is_view = False

    def __init__(self, reference: Callable, kernel_schema, compare: str | None = None):
        self._reference = reference
        schema = getattr(reference, "_schema", None)
        if schema is not None:
            name, overload = schema.name, schema.overload_name
        else:
            ns = kernel_schema.name.split("::", 1)[0]
            name, overload = f"{ns}::{getattr(reference, '__name__', 'reference')}", "reference"
        self._schema = _Schema(name, overload, [a for a in kernel_schema.arguments if not a.is_out], kernel_schema.returns)
        self.out_names = tuple(a.name for a in kernel_schema.arguments if a.is_out)
        self.tags = (torch.Tag.nondeterministic_seeded,) if compare == "metadata" else ()

    def __call__(*args, **kwargs):  # no named self: a kernel argument may be called 'self'
        """The reference's result (out placeholders of `kwargs` left out)."""
        op, args = args[0], args[1:]
        return op._reference(*args, **{k: v for k, v in kwargs.items() if k not in op.out_names})

    def __repr__(self) -> str:
        return f"ReferenceOp({self._schema.name}.{self._schema.overload_name})"


def torch_op(namespace: str, name: str, overload: str = "default", modules=()):
    """A callable running ``torch.ops.<namespace>.<name>.<overload>`` after
    importing `modules` (the ones that define the operator for torch), named
    after the operator."""

    def call(*args, **kwargs):
        from ...llm_library import import_module

        for module in modules:
            import_module(module)
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)(*args, **kwargs)

    call.__name__ = name if overload == "default" else f"{name}_{overload}"
    return call
