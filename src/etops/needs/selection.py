"""What this process's registry gives each call site: the kernel ExecuTorch's loader
would pick (exact kernel key, else the fallback kernel, else nothing: KernelInfo.select) with its
provenance, and for each delegate call whether its backend is registered and
available."""

from __future__ import annotations

from dataclasses import dataclass

from .. import _native
from ..delegate import backends
from ..kernel import KernelOrigin, RegisteredKernel
from ..registry import registry
from .call_sites import DelegateCallSite, KernelCallSite

@dataclass(frozen=True)
class KernelNeed:
    """A kernel call site and what the registry gives it."""

    site: KernelCallSite
    key: str | None  #: the kernel key ExecuTorch builds for the call (None: the call has no tensors)
    how: str  #: 'exact', 'fallback' or 'missing'
    kernel: RegisteredKernel | None  #: the RegisteredKernel picked
    origin: KernelOrigin | None  #: its KernelOrigin (built-in, library, custom, python; overridden)
    reason: str  #: why it is missing ('' when found)

    @property
    def missing(self) -> bool:
        return self.how == "missing"


@dataclass(frozen=True)
class DelegateNeed:
    """A delegate call site and whether this process can run it."""

    site: DelegateCallSite
    registered: bool
    available: bool

    @property
    def missing(self) -> bool:
        return not (self.registered and self.available)

    @property
    def reason(self) -> str:
        if not self.registered:
            return f"backend {self.site.backend} is not registered in this process"
        if not self.available:
            return f"backend {self.site.backend} is registered but not available here"
        return ""


def _origin_of(info, kernel):
    for origin in getattr(info, "origins", ()):
        if origin.key == kernel.key:
            return origin
    return None


def _registered_keys(info) -> str:
    keys = [k.key or "fallback" for k in info.kernels]
    shown = ", ".join(keys[:6]) + (f", ... ({len(keys)} in all)" if len(keys) > 6 else "")
    return shown or "none"


def kernel_need(site: KernelCallSite) -> KernelNeed:
    """What ExecuTorch's loader would resolve `site` to in this process's registry."""
    try:
        key = _native.make_key(list(site.tensors)) if site.tensors else None
    except ValueError as exc:  # too many tensors for ExecuTorch's key buffer: loading fails too
        return KernelNeed(site, None, "missing", None, None, f"ExecuTorch cannot build a kernel key: {exc}")
    reg = registry()
    info = reg.get_kernel(site.operator) if site.operator in reg else None
    if info is None or info.name != site.operator:  # ExecuTorch compares names exactly
        return KernelNeed(site, key, "missing", None, None, f"no kernel is registered under {site.operator}")
    how, kernel = info.select(site.tensors)  # ExecuTorch's rule: exact key, else the fallback
    if kernel is None:
        return KernelNeed(site, key, "missing", None, None,
                          f"no kernel for key {key} and no fallback kernel (registered: {_registered_keys(info)})")
    return KernelNeed(site, key, how, kernel, _origin_of(info, kernel), "")


def delegate_needs(sites: list[DelegateCallSite]) -> list[DelegateNeed]:
    """Each delegate call with its backend's state in this process (etops.backends())."""
    if not sites:
        return []
    state = {b.name: b.available for b in backends()}
    return [DelegateNeed(s, s.backend in state, bool(state.get(s.backend, False))) for s in sites]
