"""Registering, overriding and deregistering ExecuTorch kernels at run time.

ExecuTorch's registry only appends, aborts on a duplicate name + key and on
exceeding 2000 kernels, and has no unregister. Everything here checks first and
raises with the registry unchanged; the edits themselves are registry_edit.cpp's
(in place, see the invariants there):

- ``register_kernel`` appends an entry, or reuses a deregistered one;
- ``override`` swaps an entry's function in place and remembers the one it
  replaced; ``restore`` (or leaving ``with``) puts exactly that back, also when
  overrides are restored out of order;
- ``KernelHandle`` is what both return (``undo()`` either way);
  ``deregister`` turns the entry into a free slot that the next
  registration reuses, so register/deregister cycles never fill the registry.

Each change is seen at once by etops calls and by every ``.pte`` Method loaded
afterwards through executorch.runtime (they look kernels up when they load); a
Method loaded before keeps the function it resolved then.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import threading
from typing import NamedTuple

from .. import _native
from ..errors import DuplicateKernelError, KernelNotFoundError, RegistrationError, RegistryFullError
from ..registry import registry
from ..kernel import KernelOrigin, library_of, make_kernel
from ..schemas import find_schema, set_schema, split_name
from .compiled import compile_kernel, custom_origin, looks_like_source, tell_previous  # noqa: F401 - custom_origin: registration's API too
from .kernel_keys import kernel_key

_core = _native._core

REG_OK, REG_DUPLICATE, REG_FULL, REG_BAD_KEY, REG_NOT_FOUND, REG_BAD_NAME, REG_STALE = range(7)


#: held while etops edits the registry (every registration, override, deregistration, library load)
registry_lock = threading.RLock()

#: registry index -> origin of the kernel etops registered there (custom, python, ...)
_registered: dict[int, dict] = {}
#: registry index -> [[token, function, origin], ...]: the entry's original function
#: first, then each override in the order applied; the last one is installed.
_stacks: dict[int, list] = {}
_tokens = itertools.count(1)
#: shared libraries loaded by load_library (path -> names registered)
loaded_libraries: dict[str, list] = {}


# ---- implementations -----------------------------------------------------------------


class Built(NamedTuple):
    """A kernel function compiled already (one of a kernel set's, see
    etops.custom.build): its address and origin record. register_kernel and
    override take it as the implementation."""

    address: int
    origin: dict


def _schema_for(name: str, schema):
    if schema is not None:
        if isinstance(schema, str):
            text = schema if "::" in schema.split("(")[0] else f"{split_name(name)[0]}::{schema}"
            return set_schema(name, text)
        return schema
    found, why = find_schema(name)
    if found is None:
        raise RegistrationError(f"{name}: no schema known ({why}); pass schema='{name.split('::')[-1]}(...) -> ...'")
    return found


def _resolve(name, impl, schema, function=None, sources=None, cflags=(), ldflags=()):
    """(function address, origin) for any form of kernel implementation."""
    if isinstance(impl, KernelHandle):
        return impl.address, dict(impl.origin)
    if isinstance(impl, Built):
        return impl.address, dict(impl.origin)
    if isinstance(impl, bool):
        raise RegistrationError(f"{name}: {impl!r} is not a kernel implementation")
    if isinstance(impl, int):
        if impl == 0:
            raise RegistrationError(f"{name}: null function pointer")
        return impl, {"kind": "pointer"}
    if isinstance(impl, ctypes._CFuncPtr):
        return ctypes.cast(impl, ctypes.c_void_p).value, {"kind": "pointer"}
    if isinstance(impl, tuple) and len(impl) == 2:
        lib, symbol = impl
        handle = ctypes.CDLL(os.fspath(lib)) if isinstance(lib, (str, os.PathLike)) else lib
        try:
            address = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value
        except AttributeError:
            raise RegistrationError(f"{name}: {handle._name} has no symbol {symbol!r}") from None
        return address, {"kind": "symbol", "library": handle._name, "function": symbol}
    if isinstance(impl, str) or (impl is None and sources):
        if isinstance(impl, str) and not looks_like_source(impl) and ":" in impl:
            path, _, symbol = impl.rpartition(":")
            if os.path.exists(path):
                return _resolve(name, (path, symbol), schema)
        if schema is None:
            raise RegistrationError(f"{name}: no schema known; pass schema=")
        return compile_kernel(name, schema, impl, sources, function, cflags, ldflags)
    if callable(impl):
        from .python_kernel import python_kernel_function

        if schema is None:
            raise RegistrationError(f"{name}: a Python kernel needs a schema")
        return python_kernel_function(name, impl, schema)
    raise RegistrationError(f"{name}: cannot register {type(impl).__name__} as a kernel (give C++ source, a function pointer, (library, symbol) or a Python function)")


def _release(origin) -> None:
    """Frees what an implementation held (a Python kernel's trampoline slot)."""
    if origin and origin.get("kind") == "python" and "slot" in origin:
        from .python_kernel import release_slot

        release_slot(origin["slot"])


# ---- registry edits ------------------------------------------------------------------


def _entries():
    return _native.registered_kernels()


def _check_name(name: str):
    if not re.match(r"^[A-Za-z_]\w*::[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$", name or ""):
        raise RegistrationError(f"{name!r} is not an operator name like 'namespace::op.overload'")


def origins(name: str) -> list[KernelOrigin]:
    """Each registered kernel of `name`: built-in, from a library, custom (with the
    source hash and build directory), Python, and whether it is overridden."""
    et_dir = os.path.dirname(_native.executorch_lib_dir())
    out = []
    with registry_lock:
        for index, (n, key, address) in enumerate(_entries()):
            if n != name:
                continue
            stack = _stacks.get(index)
            base_address = stack[0][1] if stack else address
            info = _registered.get(index)
            if info is not None:
                kind = info["kind"]
                library = info.get("library") or library_of(base_address)
            else:
                library = library_of(base_address)
                kind = "built-in" if library.startswith(et_dir) else "library"
            overrides = tuple(o[2]["kind"] for o in stack[1:]) if stack else ()
            out.append(
                KernelOrigin(key, kind, library, info.get("source_hash") if info else None,
                             info.get("build_dir") if info else None, bool(overrides), overrides)
            )
    return out


def register_kernel(name, impl=None, kernel_key=None, *, schema=None, function=None, sources=None, cflags=(), ldflags=()):
    """Registers one ExecuTorch kernel and returns its KernelHandle (callable like
    the kernel object; ``.deregister()`` removes it).

    ``impl`` is C++ source (a string; the typed kernel function etops wraps, or a
    boxed ``void f(KernelRuntimeContext&, Span<EValue*>)``), ``sources=[paths or
    strings]``, a function pointer (int or ctypes function), ``(library, symbol)``,
    ``"path.so:symbol"`` or a Python function (see register_python_kernel).
    ``kernel_key`` is None (the fallback), ExecuTorch's key string, or one
    ``(dtype, dim order or rank)`` per Tensor argument. ``schema`` is needed for
    operators torch does not define. Raises (registry unchanged) on a duplicate name +
    key, a full registry, a bad key or name, a BuildError."""
    _check_name(name)
    sch = None
    if schema is not None or not (isinstance(impl, int) or isinstance(impl, ctypes._CFuncPtr)):
        sch = _schema_for(name, schema)
    else:
        sch, _ = find_schema(name)
    key = _key_of(kernel_key, sch)
    with registry_lock:
        if _core.reg_find(name, key) >= 0:
            raise DuplicateKernelError(
                f"{name} already has a {'kernel for key ' + key if key else 'fallback kernel'}; ExecuTorch allows one per "
                "name and key: use etops.override(name, ...) to replace it, or deregister it first"
            )
        if not isinstance(impl, (int, KernelHandle)) and _core.reg_free_count() == 0:
            _check_room()  # before compiling anything
    address, origin = _resolve(name, impl, sch, function, sources, cflags, ldflags)
    with registry_lock:
        rc, index = _core.reg_add(name, key, address)
        if rc != REG_OK:
            _release(origin)
        _raise_for(rc, name, key)
        _registered[index] = origin
        _stacks.pop(index, None)
    return KernelHandle(name, key, index, address, origin)


def _key_of(spec, schema):
    return kernel_key(spec, schema)


def _check_room():
    if len(_entries()) >= _core.REG_CAPACITY and _core.reg_free_count() == 0:
        raise RegistryFullError(f"ExecuTorch's kernel registry is full ({_core.REG_CAPACITY} kernels) and none is free")


def _raise_for(rc: int, name: str, key):
    if rc == REG_OK:
        return
    if rc == REG_DUPLICATE:
        raise DuplicateKernelError(f"{name} ({key or 'fallback'}) is already registered")
    if rc == REG_FULL:
        raise RegistryFullError(f"ExecuTorch's kernel registry is full ({_core.REG_CAPACITY} kernels)")
    if rc == REG_BAD_KEY:
        raise RegistrationError(f"kernel key {key!r} is too long for ExecuTorch")
    if rc == REG_NOT_FOUND:
        raise KernelNotFoundError(f"no kernel is registered for {name} ({key or 'fallback'})", name)
    if rc == REG_STALE:
        raise RegistrationError(f"{name}: the registry entry changed underneath (another override?); nothing was changed")
    raise RegistrationError(f"{name}: refused (code {rc})")


class KernelHandle:
    """One function etops installed in an entry of ExecuTorch's registry, and how
    to undo it: a registration (``register_kernel``: the entry is etops'; ``deregister()``
    frees it, ``replace()`` swaps its function) or an override (``override``: swapped
    in over the entry's function; ``restore()`` puts back exactly the function it
    replaced, ``previous`` calls that one). ``undo()`` (or leaving a ``with`` block)
    does whichever applies. Calls and attributes go to the operator's kernel object
    (``handle.kernel``). ``Override`` is the same class."""

    def __init__(self, name, key, index, address, origin, *, token=None, previous_address=0, schema=None):
        self.name = name
        self.key = key
        self.index = index
        self.address = address
        self.origin = origin
        #: the override's place on the entry's stack (None: a registration)
        self._token = token
        self._registered = token is None
        #: the function an override replaced (the built-in kernel, or an earlier
        #: override): C++ sources built by etops get it as etops::previous_kernel(name)
        self.previous_address = previous_address
        self._schema = schema
        self._previous = None

    @property
    def overrides(self) -> bool:
        """Whether this is an override (else a registration of etops')."""
        return self._token is not None

    @property
    def active(self) -> bool:
        """Whether the edit is still in force (not deregistered, not restored)."""
        if not self.overrides:
            return self._registered
        return any(e[0] == self._token for e in _stacks.get(self.index) or [])

    @property
    def kernel(self):
        return registry().get_kernel(self.name)

    @property
    def source_hash(self):
        return self.origin.get("source_hash")

    @property
    def build_dir(self):
        return self.origin.get("build_dir")

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.kernel, attr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False

    def undo(self) -> None:
        """Restores an override; deregisters a registration still in force."""
        if self.overrides:
            self.restore()
        elif self.active:
            self.deregister()

    def _registration_only(self, what: str) -> None:
        if self.overrides:
            raise RegistrationError(f"{self.name}: {what} is for a kernel etops registered; an override is undone by restore()")

    def deregister(self) -> None:
        """Removes this kernel: later lookups (etops calls, .pte programs loaded
        afterwards) no longer find it. Its registry slot is reused by the next
        registration."""
        self._registration_only("deregister()")
        with registry_lock:
            if not self._registered:
                raise RegistrationError(f"{self.name} ({self.key or 'fallback'}) was already deregistered")
            if _core.reg_find(self.name, self.key) != self.index:
                self._registered = False
                raise RegistrationError(f"{self.name} ({self.key or 'fallback'}) is no longer registered")
            rc = _core.reg_free(self.index, 0)
            _raise_for(rc, self.name, self.key)
            _registered.pop(self.index, None)
            for entry in [[0, 0, self.origin]] + _stacks.pop(self.index, []):
                _release(entry[2])
            self._registered = False

    def replace(self, impl, **kw) -> None:
        """Installs a new implementation in this registration's slot (the
        edit-compile-run loop): same name and key, at once for new lookups."""
        self._registration_only("replace()")
        sch, _ = find_schema(self.name)
        address, origin = _resolve(self.name, impl, sch, **kw)
        with registry_lock:
            if not self._registered:
                raise RegistrationError(f"{self.name} was deregistered")
            stack = _stacks.get(self.index)
            current = stack[-1][1] if stack else self.address
            if stack:
                raise RegistrationError(f"{self.name}: restore the overrides on it first")
            rc = _core.reg_swap(self.index, current, address)
            if rc != REG_OK:
                _release(origin)
            _raise_for(rc, self.name, self.key)
            _release(self.origin)
            self.address = address
            self.origin = origin
            _registered[self.index] = origin

    @property
    def previous(self):
        """The kernel this override replaced, as a callable kernel object (registered
        under a private name, ``etops_previous::<op>_<n>.<overload>``, until the
        override is restored): "fast path, else the built-in" in Python, and the
        built-in side of A/B checks and timings."""
        if self._previous is None:
            if not self.previous_address:
                raise RegistrationError(f"{self.name}: this {'override' if self.overrides else 'registration'} does not know the kernel it replaced")
            if self._schema is None:
                raise RegistrationError(f"{self.name}: no schema known, so the previous kernel cannot be called")
            self._previous = callable_function(self.name, self._schema, self.previous_address, f"prev{self._token}")
        return self._previous

    def restore(self) -> None:
        """Puts back exactly the function this override replaced (also when
        overrides of the entry are restored out of order); nothing once restored."""
        if not self.overrides:
            raise RegistrationError(f"{self.name}: restore() is for an override; a registration is undone by deregister()")
        with registry_lock:
            stack = _stacks.get(self.index)
            if not stack:
                return
            pos = next((i for i, e in enumerate(stack) if e[0] == self._token), None)
            if pos is None:
                return
            if self._previous is not None and self._previous.active:
                self._previous.deregister()
            if pos == len(stack) - 1:
                _raise_for(_core.reg_swap(self.index, stack[pos][1], stack[pos - 1][1]), self.name, self.key)
            _release(stack[pos][2])
            del stack[pos]
            if len(stack) == 1:
                del _stacks[self.index]

    def __repr__(self):
        if self.overrides:
            return f"<etops override of {self.name} ({self.key or 'fallback'}) by a {self.origin.get('kind')} kernel{'' if self.active else ', restored'}>"
        state = "registered" if self.active else "deregistered"
        return f"<etops custom kernel {self.name} ({self.key or 'fallback'}), {self.origin.get('kind')}, {state}>"


#: an override is a KernelHandle (``handle.overrides``); the name stays for isinstance and annotations
Override = KernelHandle


def override(name, impl, kernel_key=None, *, schema=None, function=None, sources=None, cflags=(), ldflags=()) -> KernelHandle:
    """Replaces the kernel registered for `name` (and `kernel_key`, None: the
    fallback) by `impl` (any form register_kernel takes), built-in kernels included.
    Takes effect at once; ``with etops.override(...):`` restores the previous kernel
    on exit. .pte Methods loaded before may keep the old kernel."""
    _check_name(name)
    sch = _schema_for(name, schema) if not isinstance(impl, int) else find_schema(name)[0]
    key = kernel_key_of(kernel_key, sch)
    with registry_lock:
        index = _core.reg_find(name, key)
        if index < 0:
            _missing(name, key)
    address, origin = _resolve(name, impl, sch, function, sources, cflags, ldflags)
    with registry_lock:
        index = _core.reg_find(name, key)
        if index < 0:
            _missing(name, key)
        stack = _stacks.get(index)
        current = stack[-1][1] if stack else _entries()[index][2]
        tell_previous(origin, current)
        rc = _core.reg_swap(index, current, address)
        if rc != REG_OK:
            _release(origin)
        _raise_for(rc, name, key)
        token = next(_tokens)
        if stack is None:
            stack = _stacks[index] = [[0, current, {"kind": "original"}]]
        stack.append([token, address, origin])
    return KernelHandle(name, key, index, address, origin, token=token, previous_address=current, schema=sch)


class StandIn(KernelHandle):
    """A kernel function of operator `name` registered under a private name, called
    as `name` is (torch's checks, etops' rules and out shapes of `name`)."""

    def __init__(self, handle: KernelHandle, name: str, schema) -> None:
        super().__init__(handle.name, handle.key, handle.index, handle.address, handle.origin)
        self.stands_for = name
        self._schema_of = schema
        self._kernel = None

    @property
    def kernel(self):
        if self._kernel is None:
            self._kernel = make_kernel(self.stands_for, self._schema_of, "the operator it stands in for", registered_as=self.name)
        return self._kernel


def callable_function(name: str, schema, address: int, tag: str) -> StandIn:
    """Function `address`, a kernel of operator `name` (schema `schema`), made
    callable as `name` is: registered as the fallback of a private operator
    ``etops_previous::<ns>_<op>_<tag>.<overload>`` with the same schema (its
    ``deregister()`` removes it)."""
    ns, op, overload = split_name(name)
    private = f"etops_previous::{ns}_{op}_{tag}" + (f".{overload}" if overload != "default" else "")
    handle = registration_for(private, None)
    if handle is None:
        text = str(schema).split("(", 1)[1]
        handle = register_kernel(private, address, schema=f"{private}({text}")
    return StandIn(handle, name, schema)


def builtin_function(name: str, kernel_key=None) -> int | None:
    """The function registered for `name` (and `kernel_key`) before any etops
    override was applied to it; None when it is not overridden."""
    with registry_lock:
        sch, _ = find_schema(name)
        index = _core.reg_find(name, kernel_key_of(kernel_key, sch))
        stack = _stacks.get(index)
        return stack[0][1] if index >= 0 and stack else None


def kernel_key_of(spec, schema):
    return kernel_key(spec, schema)


def _missing(name, key):
    same = [k for n, k, _ in _entries() if n == name]
    if same:
        keys = ", ".join(k or "fallback" for k in same)
        raise KernelNotFoundError(f"{name} has no kernel for {key or 'the fallback key'} (registered: {keys})", name)
    raise registry()._missing(*split_name(name))


def deregister(name, kernel_key=None) -> None:
    """Deregisters a kernel etops registered, by name and key."""
    with registry_lock:
        sch, _ = find_schema(name)
        key = kernel_key_of(kernel_key, sch)
        index = _core.reg_find(name, key)
        if index < 0 or index not in _registered:
            raise RegistrationError(f"{name} ({key or 'fallback'}) is not a kernel etops registered")
        origin = _registered[index]
        handle = KernelHandle(name, key, index, _entries()[index][2], origin)
    handle.deregister()


def registration_for(name, key) -> KernelHandle | None:
    """The handle of a live etops registration for name + key, or None."""
    with registry_lock:
        index = _core.reg_find(name, key)
        if index < 0 or index not in _registered:
            return None
        stack = _stacks.get(index)
        address = stack[0][1] if stack else _entries()[index][2]
        return KernelHandle(name, key, index, address, _registered[index])
