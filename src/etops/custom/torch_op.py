"""etops.custom_op: one definition, a torch op and the ExecuTorch kernel behind it.

From the functional schema ``ns::op(args) -> Tensor`` etops defines with
torch.library the functional op and its out variant ``ns::op.out(args, *, Tensor(a!)
out) -> Tensor(a!)`` (what ExecuTorch's to_executorch turns the functional op into),
a fake implementation for both (the user's, a shape function, or "like the first
tensor argument"), and CPU implementations that run the ExecuTorch kernel through
etops. The ExecuTorch kernel is registered for ``ns::op.out``; an exported program
that calls the op runs it from its .pte.
"""

from __future__ import annotations

import threading

import torch

from .registration import register_kernel, registration_for

_libs: dict[str, torch.library.Library] = {}
_lock = threading.Lock()


def out_schema(functional) -> str:
    """``op.out(...)`` schema (without namespace) of a functional FunctionSchema."""
    text = str(functional)
    inner = text[text.index("(") + 1 : text.rindex(") -> ")]
    args = [inner] if inner.strip() else []
    if not any(a.kwarg_only for a in functional.arguments):
        args.append("*")
    rets = functional.returns
    for r in rets:
        if str(r.type) != "Tensor":
            raise ValueError(f"custom_op: returns must be Tensors (got {r.type}) to derive the out variant")
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = ["out"] if len(rets) == 1 else [f"out{i}" for i in range(len(rets))]
    for i, n in enumerate(names):
        args.append(f"Tensor({letters[i]}!) {n}")
    ret = f"Tensor({letters[0]}!)" if len(rets) == 1 else "(" + ", ".join(f"Tensor({letters[i]}!)" for i in range(len(rets))) + ")"
    op = functional.name.split("::", 1)[1]
    return f"{op}.out({', '.join(args)}) -> {ret}"


class CustomOp:
    """A custom op: ``op(...)`` / ``op.torch_op`` is the torch op (functional),
    ``op.out`` the ExecuTorch kernel object of ``ns::op.out``, ``op.handle`` its
    registration."""

    def __init__(self, qualname, functional, handle, lib):
        self.qualname = qualname
        self.functional_schema = functional
        self.handle = handle
        self._lib = lib

    @property
    def name(self) -> str:
        return f"{self.qualname}.out"

    @property
    def out(self):
        return self.handle.kernel

    @property
    def torch_op(self):
        ns, op = self.qualname.split("::")
        return getattr(getattr(torch.ops, ns), op)

    def __call__(self, *args, **kwargs):
        return self.torch_op(*args, **kwargs)

    def deregister(self) -> None:
        """Deregisters the ExecuTorch kernel (the torch op stays defined)."""
        self.handle.deregister()

    def __repr__(self):
        return f"<etops custom op {self.qualname} (ExecuTorch kernel {self.name}, {self.handle.origin.get('kind')})>"


def _default_fake(functional):
    def fake(*args, **kwargs):
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, torch.Tensor):
                return torch.empty_like(a) if len(functional.returns) == 1 else tuple(torch.empty_like(a) for _ in functional.returns)
        raise RuntimeError(f"{functional.name}: give custom_op a fake= or shape= function (no tensor argument to copy)")

    return fake


def custom_op(schema: str, source=None, *, function=None, sources=None, fake=None, shape=None, kernel_key=None, cflags=(), ldflags=(), python=None) -> CustomOp:
    """Defines torch op ``schema`` (functional, e.g. ``"mylib::scaled_add(Tensor a,
    Tensor b, float alpha) -> Tensor"``) and its out variant, and registers the
    ExecuTorch kernel of ``ns::op.out`` from ``source``/``sources`` (the typed
    function with the out variant's signature, named by ``function=``) or from a
    Python function ``python=`` (``f(*args, out)``). ``fake(*args)`` returns fake
    results (or ``shape(*args)`` their shape; default: like the first tensor).
    Calling it again with the same name replaces the kernel in place (the
    edit-compile-run loop)."""
    functional = torch._C.parse_schema(schema)
    if functional.overload_name:
        raise ValueError("custom_op takes the functional schema without an overload name: 'ns::op(...) -> Tensor'")
    qualname = functional.name
    ns, op = qualname.split("::")
    out_text = out_schema(functional)
    ET_name = f"{qualname}.out"

    if shape is not None and fake is None:
        def fake(*args, **kwargs):  # noqa: F811
            first = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor))
            return first.new_empty(shape(*args, **kwargs))
    fake_fn = fake or _default_fake(functional)

    with _lock:
        lib = _libs.get(qualname)
        existing = getattr(getattr(torch.ops, ns, None), op, None) if lib is not None else None
        same = existing is not None and str(existing.default._schema) == str(functional)
        redefined = lib is not None and not same
        if lib is not None and redefined:
            lib._destroy()
            lib = None
        if lib is None:
            lib = torch.library.Library(ns, "FRAGMENT")
            lib.define(schema.split("::", 1)[1])
            lib.define(out_text)
            _libs[qualname] = lib
            _define_impls(lib, ns, op, functional, fake_fn)
        else:
            _state[qualname]["fake"] = fake_fn

    if redefined:
        # The schema changed: kernel objects made for the old one must be remade.
        from ..registry import registry

        if ET_name in registry():
            registry().get_kernel(ET_name, schema=f"{ns}::{out_text}")
    impl = python if python is not None else source
    handle = registration_for(ET_name, None if kernel_key is None else _key(ET_name, kernel_key))
    if handle is not None:
        handle.replace(impl, function=function, sources=sources, cflags=cflags, ldflags=ldflags)
    else:
        handle = register_kernel(ET_name, impl, kernel_key, function=function, sources=sources, cflags=cflags, ldflags=ldflags)
    return CustomOp(qualname, functional, handle, lib)


def _key(name, spec):
    from ..schemas import find_schema
    from .registration import kernel_key

    return kernel_key(spec, find_schema(name)[0])


#: qualname -> mutable state the torch implementations read (the fake function)
_state: dict[str, dict] = {}


def _define_impls(lib, ns, op, functional, fake_fn):
    qualname = f"{ns}::{op}"
    state = _state[qualname] = {"fake": fake_fn}
    n_out = len(functional.returns)
    out_names = ["out"] if n_out == 1 else [f"out{i}" for i in range(n_out)]

    def kernel():
        from ..registry import registry

        return registry().get_kernel(f"{qualname}.out")

    def functional_cpu(*args, **kwargs):
        meta_args = [torch.empty_like(a, device="meta") if isinstance(a, torch.Tensor) else a for a in args]
        meta_kwargs = {k: torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        fakes = state["fake"](*meta_args, **meta_kwargs)
        fakes_list = [fakes] if n_out == 1 else list(fakes)
        outs = {n: torch.empty(f.shape, dtype=f.dtype) for n, f in zip(out_names, fakes_list)}
        kernel()(*args, **kwargs, **outs)
        values = [outs[n] for n in out_names]
        return values[0] if n_out == 1 else tuple(values)

    def functional_fake(*args, **kwargs):
        return state["fake"](*args, **kwargs)

    def out_cpu(*args, **kwargs):
        kernel()(*args, **kwargs)
        values = [kwargs[n] for n in out_names]
        return values[0] if n_out == 1 else tuple(values)

    def out_fake(*args, **kwargs):
        values = [kwargs[n] for n in out_names]
        return values[0] if n_out == 1 else tuple(values)

    lib.impl(op, functional_cpu, "CPU")
    lib.impl(f"{op}.out", out_cpu, "CPU")
    torch.library.register_fake(qualname, functional_fake, lib=lib)
    torch.library.register_fake(f"{qualname}.out", out_fake, lib=lib)

