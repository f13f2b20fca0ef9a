"""The exceptions etops raises. Every one names the operator and, where it applies,
the argument at fault."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .process_end import signal_name
from .taint import WHAT_TO_DO, site_reason


class EtopsError(Exception):
    """Base of every etops error."""


class KernelNotFoundError(EtopsError, AttributeError, KeyError):
    """No ExecuTorch kernel is registered under the name asked for.

    An AttributeError (for ``reg.aten.add.Tensor``) and a KeyError (for
    ``reg.get_kernel("aten::add.Tensor")``) at once; ``suggestions`` holds the
    closest registered names. Given as a function (the registry's lookups), they
    are computed only when asked for or when the message is shown, which then
    ends in "(did you mean ...?)": a failed ``hasattr`` does not pay for them."""

    def __init__(self, message: str, name: str = "", suggestions: tuple[str, ...] | Callable[[], Iterable[str]] = ()):
        super().__init__(message)
        self.name = name
        self._suggest = suggestions if callable(suggestions) else None
        self._hinted = self._suggest is not None
        self._suggestions = () if callable(suggestions) else tuple(suggestions)

    @property
    def suggestions(self) -> tuple[str, ...]:
        if self._suggest is not None:
            self._suggestions, self._suggest = tuple(self._suggest()), None
        return self._suggestions

    def __str__(self) -> str:  # KeyError would quote the message
        message = str(self.args[0]) if self.args else ""
        if self._hinted and self.suggestions:
            message += f" (did you mean {', '.join(self.suggestions)}?)"
        return message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.name, self.suggestions))


class NoMatchingKernelError(EtopsError, LookupError):
    """The operator is registered, but none of its kernels matches the dtypes and
    dim orders of the tensors passed (no exact kernel key and no fallback)."""


class SchemaError(EtopsError, LookupError):
    """The operator's schema is unknown or uses a type ExecuTorch kernels cannot take,
    so etops cannot check a call against it."""


class UnrepresentableError(EtopsError, TypeError, ValueError):
    """A value torch accepts that ExecuTorch's types cannot express, so no kernel
    call can carry it: a memory format ExecuTorch's ``MemoryFormat`` lacks
    (``torch.channels_last`` for ``_to_copy.out``), a complex Scalar (ExecuTorch's
    ``Scalar`` holds bool, int and float), a dtype, a rank or a size beyond its
    limits. ExecuTorch's refusal, not an etops failure: the conformance sweep counts
    it ``unsupported``. The message names the argument."""



class GuardRefusal(EtopsError, ValueError):
    """The rules table (etops.ops) refused a call before the kernel ran: an input the
    kernel is known to abort on, corrupt memory on or mishandle. The message names
    the argument, like any argument check; the exception carries what refused it:

    ``op`` (the operator), ``argument`` (the argument the message names), ``rule``
    (the table's declaration, an etops.ops.Rule), ``guard`` (its guard function),
    ``finding`` (the table's known finding about that argument, an etops.ops.Finding,
    or None) and ``policy`` ("direct" or "program": how the kernel was called).
    A guard that raised TypeError, IndexError or ZeroDivisionError gives the
    subclass that is one too (``refusal_type``), so ``except TypeError`` still
    catches it. Pickled, it keeps all but ``rule`` and ``guard`` (functions)."""

    def __init__(self, message: str, op: str = "", *, argument: str | None = None, rule: Any = None, guard: Any = None,
                 finding: Any = None, policy: str | None = None):
        super().__init__(message)
        self.op, self.argument, self.rule, self.guard, self.finding, self.policy = op, argument, rule, guard, finding, policy

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"argument": self.argument, "finding": self.finding, "policy": self.policy}
        return (_rebuild_refusal, (type(self), str(self), self.op, state))


class GuardTypeRefusal(GuardRefusal, TypeError):
    """A GuardRefusal of an argument of the wrong type or dtype."""


class GuardIndexRefusal(GuardRefusal, IndexError):
    """A GuardRefusal of an index or dim out of range."""


class GuardZeroDivisionRefusal(GuardRefusal, ZeroDivisionError):
    """A GuardRefusal of an integer zero divisor."""


#: the exception types a guard raises -> the GuardRefusal that is one too
_REFUSALS: dict[type, type] = {ValueError: GuardRefusal, TypeError: GuardTypeRefusal, IndexError: GuardIndexRefusal,
             ZeroDivisionError: GuardZeroDivisionRefusal}


def refusal_type(exc: BaseException) -> type | None:
    """The GuardRefusal class standing for `exc` as a guard raised it (a plain
    ValueError, TypeError, IndexError or ZeroDivisionError), or None for any other
    exception (a guard's own failure stays what it is)."""
    return _REFUSALS.get(type(exc))


def _rebuild_refusal(cls: type, message: str, op: str, state: dict) -> GuardRefusal:
    return cls(message, op, **state)

class UnsupportedCheck(EtopsError):
    """etops.testing: the kernel refused every case of a check (``unsupported``:
    it does not take the dtype), raised outside pytest (under pytest the check is
    skipped with the same reason, starting "unsupported")."""


def _log_lines(log: str) -> list[str]:
    """The messages of a call log worth showing, one a line (ExecuTorch's checks end
    some with " :")."""
    return [line.rstrip(" :") for line in log.splitlines() if line.strip(" :")]


def refusing(error_type: type, argument: str | None, message: str) -> Exception:
    """``error_type(message)`` (ValueError, TypeError, IndexError, ...) carrying the
    argument it refuses as its ``argument`` attribute (None: no one argument): what a guard's GuardRefusal
    (etops.ops.policy), the Outcomes and the fuzzer read, never the message's words."""
    exc = error_type(message)
    exc.argument = argument
    return exc


class KernelError(EtopsError, RuntimeError):
    """The kernel ran and reported a failure (``ctx.fail``).

    Attributes: ``op`` (operator name), ``error_name`` and ``error_code``
    (ExecuTorch's ``Error``), ``log`` (the messages the kernel logged before it
    failed, possibly empty), ``site`` (``file:line`` of the last error it logged,
    the check that failed; "" when it logged none), ``origin`` (``file:line`` of
    the first error it logged when that is not ``site``: the inner check whose
    failure the outer one at ``site`` reported; else "")."""

    def __init__(self, op: str, error_code: int, error_name: str, log: str = "", site: str = "", origin: str = ""):
        self.op = op
        self.error_code = error_code
        self.error_name = error_name
        self.log = log
        self.site = site
        self.origin = origin
        message = f"ExecuTorch kernel {op} failed with Error::{error_name} (0x{error_code:02x})"
        lines = _log_lines(log)
        if lines:
            message += ": " + "; ".join(lines)
        if site:
            message += f" [{site}]"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.error_code, self.error_name, self.log, self.site, self.origin))


class KernelAborted(KernelError):
    """ExecuTorch aborted inside the kernel (an ``ET_CHECK``, ``ET_CHECK_MSG``,
    ``ET_ASSERT_UNREACHABLE`` or a failed resize) and etops unwound the kernel: the
    interpreter and the registry are as before the call, the next call works. The
    kernel may have left its outs half-written (docs/reliability.md).

    Attributes, besides KernelError's: ``log`` holds ExecuTorch's own message (the
    check's text), ``site`` the ``file:line`` of the check ("" when it logged none).
    ``error_name`` is ``"Aborted"``."""

    def __init__(self, op: str, error_code: int = 0x1000, error_name: str = "Aborted", log: str = "", site: str = "",
                 origin: str = ""):
        super().__init__(op, error_code, error_name, log, site, origin)
        lines = _log_lines(log)
        message = f"ExecuTorch kernel {op} aborted"
        if lines:
            message += ": " + "; ".join(lines)
        if site:
            message += f" [{site}]"
        self.args = (message,)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.error_code, self.error_name, self.log, self.site, self.origin))


#: signal numbers a kernel can raise (Linux's), and what SIGFPE's si_code says
_FPE_CODES = {1: "integer division by zero or overflow", 2: "integer overflow", 3: "floating-point division by zero",
              4: "floating-point overflow", 5: "floating-point underflow", 6: "inexact floating-point result",
              7: "invalid floating-point operation"}


class KernelCrashed(KernelError):
    """The kernel died of a fatal signal. In-process: a synchronous fault (SIGSEGV,
    SIGBUS, SIGFPE, SIGILL) on the calling thread, trapped and raised as this
    exception (the kernel's frames were abandoned, the process goes on, the next
    call works). In a guarded call (etops.guard.call): the guard process died: the
    kernel read or wrote outside a tensor argument (a guard page), wrote an input
    the schema does not mark mutable, or raised another fatal signal (an abort).

    Attributes, besides KernelError's (``error_name`` is ``"Crashed"``): ``signal``
    (its name, e.g. ``SIGSEGV``); ``reason`` (what SIGFPE's code says, or "");
    ``argument`` (the tensor argument whose memory the address is in or next to,
    or None); ``access`` ("read", "write" or None); ``where`` ("past the end",
    "before the start", "inside a read-only input", "inside", "stack overflow" (the
    address is the end of the thread's stack; argument None) or None); ``offset``
    (bytes beyond the buffer, or into it; None when unknown); ``address`` (the
    faulting address, in-process only); ``memory_may_be_corrupt`` (an in-process
    fault on a write, or of unknown direction: what the kernel wrote before it is
    unchecked; a guarded call finds it); ``log`` (what the kernel logged, or the
    last lines the guard child wrote to stderr); ``detail`` (what else the message
    says: where a guarded call's fault lies relative to every tensor argument when
    no guard region explains it, or ""); ``why`` (in-process: why the fault taints
    the process, from where its program counter was, etops.taint(); "" when it does
    not); ``outs_may_be_partial`` (the out arguments the kernel may have partly
    written before the fault: every out the caller gave of an in-process call that
    ran on the caller's memory; empty when the outs are as before the call: a probe,
    a guarded call)."""

    def __init__(self, op: str, signal: str, argument: str | None = None, access: str | None = None,
                 where: str | None = None, offset: int | None = None, log: str = "", address: int | None = None,
                 reason: str = "", memory_may_be_corrupt: bool = False, detail: str = "", why: str = "",
                 outs_may_be_partial: tuple[str, ...] = ()):
        super().__init__(op, 0x1002, "Crashed", log)
        self.signal, self.argument, self.access = signal, argument, access
        self.where, self.offset, self.address, self.reason = where, offset, address, reason
        self.memory_may_be_corrupt, self.detail = memory_may_be_corrupt or bool(why), detail
        self.why, self.outs_may_be_partial = why, tuple(outs_may_be_partial)
        memory_may_be_corrupt = self.memory_may_be_corrupt
        if not signal:  # no signal: etops' canary bytes around a probed tensor caught the write
            head = f"ExecuTorch kernel {op} wrote outside its memory, stopped by etops before it corrupted anything"
        elif argument is not None or address is not None:
            head = f"ExecuTorch kernel {op} crashed with {signal}"
        else:
            head = f"ExecuTorch kernel {op} died with {signal}"
        if reason:
            head += f" ({reason})"
        message = head
        if argument is not None:
            message += f": {access or 'access'} {where} of argument '{argument}'"
            if offset is not None:
                if where in ("inside a read-only input", "inside"):
                    message += f" ({offset} bytes into it)"
                else:  # offset 0 is the first byte outside it
                    message += " (its first byte beyond it)" if offset == 0 else f" ({offset} bytes beyond it)"
            if address is not None:
                message += f" at address {address:#x}"
        elif where == "stack overflow":
            at = f" at address {address:#x}" if address is not None else ""
            message += (f": stack overflow, {access or 'access'}{at} at the end of its thread's stack (its calls went "
                        "deeper than the stack holds; no tensor argument)")
        elif address is not None and signal in ("SIGSEGV", "SIGBUS"):
            message += f": {access or 'access'} at address {address:#x}, " + (
                "through a null pointer" if address < 65536 else "in no tensor argument")
        if detail:
            message += f"; {detail}"
        if address is not None:
            message += "; the call was abandoned, the process goes on"
        if self.outs_may_be_partial:
            names = ", ".join(f"'{n}'" for n in self.outs_may_be_partial)
            message += f"; out argument{'s' if len(self.outs_may_be_partial) > 1 else ''} {names} may be partly written"
        if why:
            message += f"; the process is tainted: {why}; {WHAT_TO_DO}"
        elif memory_may_be_corrupt:
            message += ("; memory may already be corrupt (what the kernel wrote before the fault is unchecked): "
                        "run the call guarded (etops.guard.call, guard=True, or --isolated) to find the bad write")
        if address is not None and not why:
            message += f"; later calls of {op} run guarded (its own locks may be held) until etops.clear_taint()"
        last = [line for line in log.splitlines() if line.strip()]
        if last:
            message += f" (last log line: {last[-1].strip()})"
        self.args = (message,)

    @classmethod
    def in_process(cls, op: str, fault: Any, log: str = "", site_of: Any = None,
                   outs: tuple[str, ...] = ()) -> KernelCrashed:
        """The exception for a fault the bridge trapped on the calling thread
        (`fault`: a Fault of etops._native, its argument set when a probe's guard
        page stopped the access; `outs`: the out arguments the caller gave, partly
        written unless the fault hit a probe's copies of them)."""
        signo, code, address, is_write = fault.signal, fault.code, fault.address, fault.is_write
        guarded = (fault.argument, fault.where, fault.offset) if fault.argument is not None else None
        signal = signal_name(signo)
        memory = signal in ("SIGSEGV", "SIGBUS")
        reason = _FPE_CODES.get(code, "") if signal == "SIGFPE" else ""
        access = {1: "write", 0: "read"}.get(is_write) if memory else None
        place: tuple[str | None, str, int | None] | None
        if guarded is None and fault.stack_overflow:  # the end of the stack, whatever tensor lies near
            place = (None, "stack overflow", None)
        else:
            place = guarded or (site_of(address) if site_of is not None and memory else None)
        argument, where, offset = place if place is not None else (None, None, None)
        if guarded is not None:
            reason = "stopped by etops' guard page: nothing outside the argument was written"
        # an arithmetic trap, a read, a write into etops' guard page or into the guard
        # below a thread's stack (a stack overflow) writes nothing outside; any other
        # write (or an access of unknown direction) may follow writes nothing caught
        corrupt = memory and is_write != 0 and guarded is None and not fault.stack_overflow
        partial = () if fault.outs_untouched else tuple(outs)
        return cls(op, signal, argument, access, where, offset, log, address, reason, corrupt,
                   why=site_reason(fault.site), outs_may_be_partial=partial)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.signal, self.argument, self.access, self.where, self.offset, self.log,
                             self.address, self.reason, self.memory_may_be_corrupt, self.detail, self.why,
                             self.outs_may_be_partial))


class TaintedError(EtopsError, RuntimeError):
    """A call that cannot run since a fault tainted the process or this kernel
    (etops.taint()) and that the guard process cannot run either (a delegate's);
    the message says why and what to do (etops.clear_taint())."""


class DelegateError(KernelError):
    """A delegate's backend failed: it is not registered or not available, refused
    the lowered module's processed blob at init, or failed to execute.

    ``op`` is the delegate's name (``"XnnpackBackend::lowered_module_0"``);
    ``action`` says which step failed ("init" or "execute"); ``detail`` is etops'
    own explanation, when it has one."""

    def __init__(self, op: str, error_code: int, error_name: str, log: str = "", site: str = "", origin: str = "",
                 action: str = "execute", detail: str = ""):
        super().__init__(op, error_code, error_name, log, site, origin)
        self.action = action
        self.detail = detail
        message = f"ExecuTorch delegate {op} failed to {action} with Error::{error_name} (0x{error_code:02x})"
        if detail:
            message += f": {detail}"
        lines = _log_lines(log)
        if lines:
            message += ("; " if detail else ": ") + "; ".join(lines)
        if site:
            message += f" [{site}]"
        self.args = (message,)

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.error_code, self.error_name, self.log, self.site, self.origin, self.action,
                             self.detail))


# ---- custom kernels (etops.custom) -------------------------------------------------


class RegistrationError(EtopsError, ValueError):
    """A registration, override or deregistration was refused; the registry is unchanged."""


class DuplicateKernelError(RegistrationError):
    """A kernel with this name and kernel key is already registered (ExecuTorch
    would abort the process); use etops.override to replace it."""


class RegistryFullError(RegistrationError):
    """ExecuTorch's registry holds 2000 kernels and none is free."""


class BuildError(EtopsError, RuntimeError):
    """A kernel source did not compile or link. ``diagnostics`` holds the compiler's
    messages as ``(source, line, column, severity, message)`` with source the user's
    label ('<source>' for a string source, the path for a file) and line the user's
    own line; ``log`` is the whole compiler output, paths mapped the same way."""

    def __init__(self, message: str, diagnostics: Iterable[str] = (), log: str = "", build_dir: str = ""):
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.log = log
        self.build_dir = build_dir


# ---- kernel files of a checkout (etops.dev) -----------------------------------------


class CheckoutError(EtopsError, ValueError):
    """A kernel file whose source root, YAML or operators etops cannot work out; the
    message names the file."""


class NoOperators(CheckoutError):
    """A source that implements none of its YAML's operators (a helper file)."""


class LoadError(EtopsError, ValueError):
    """A --load spec that names nothing loadable, or whose kernels failed to build."""


# ---- generated cases (etops.conformance.generated) ----------------------------------


class NoGeneratedCases(EtopsError, ValueError):
    """A kernel the case generator makes no case for; the message names the kernel
    and why (not an aten kernel, no functional overload, an argument no class
    describes, its constraint-table entry's skip)."""


# ---- findings as upstream tests (etops.upstream) -----------------------------------


class NotTestable(EtopsError, ValueError):
    """A finding no upstream test is written for here (``etops report upstream``
    names it in its summary); the message says why."""


class NotWritable(NotTestable):
    """A value (or dtype) with no C++ literal here: complex32, quantized, float8."""


# ---- edge programs (etops.edge) ----------------------------------------------------


class UnsupportedNodeError(EtopsError, NotImplementedError):
    """A graph node etops.edge cannot run on ExecuTorch kernels (a higher-order op
    other than cond, an unknown call target); the message names the node."""


# ---- programs read from a .pte (etops.needs) ---------------------------------------


class ProgramFileError(EtopsError, ValueError):
    """The program is not a readable ExecuTorch program (not a .pte, truncated,
    corrupted); the message names the file and what is wrong."""


# ---- guarded calls (etops.guard) ----------------------------------------------------


class GuardTimeout(EtopsError, TimeoutError):
    """A guarded call (etops.guard.call) whose guard process did not answer: it ran
    longer than ``etops.guard.set_timeout`` allows, or it stopped making progress
    (no CPU time used for ``etops.guard.server.STALL_SECONDS``: blocked, not
    computing). The guard process was killed; the next guarded call forks a new one.

    Attributes: ``op``; ``seconds`` (the limit that was reached); ``stalled``
    (True when the guard process was blocked rather than slow); ``started`` (whether
    the guard process had begun running the kernel: False when it blocked before); ``blocked_in`` (where the kernel says the
    blocked process waited, /proc's wchan such as ``futex_do_wait`` or
    ``anon_pipe_read``; None when not known)."""

    def __init__(self, op: str, seconds: float, stalled: bool = False, started: bool = True,
                 blocked_in: str | None = None):
        self.op, self.seconds, self.stalled = op, seconds, stalled
        self.started, self.blocked_in = started, blocked_in
        waiting = f" (waiting in {blocked_in})" if blocked_in else ""
        if stalled and not started:
            message = (f"guarded call of {op}: its guard process blocked before it ran the kernel{waiting}: "
                       f"no CPU time for {seconds:g} s, and was killed. The kernel did not run: this is etops' "
                       "own, please report it with the call")
        elif stalled:
            message = (f"guarded call of {op} stopped making progress: its guard process used no CPU time for "
                       f"{seconds:g} s while running the kernel{waiting} (blocked, not computing) and was killed. "
                       "A guarded call must not block: please report it with the call; the unguarded call does "
                       "not use a guard process")
        else:
            message = (f"guarded call of {op} did not finish within {seconds:g} s and its guard process was killed; "
                       "if the kernel needs longer, raise the limit with etops.guard.set_timeout(seconds) (None: no limit)")
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.seconds, self.stalled, self.started, self.blocked_in))


class ForkBlocked(EtopsError, OSError):
    """A child forked by etops (a guard process, a task or worker process) blocked
    before it ran a line of its own: asleep without CPU time for ``seconds`` after
    each of ``forks`` forks. Nothing it was given ran. qemu-user 7.2's fork of a
    multithreaded process does that now and then (docs/aarch64.md); ``blocked_in``:
    where the last one waited (/proc's wchan), or None."""

    def __init__(self, forks: int, seconds: float, blocked_in: str | None = None):
        self.forks, self.seconds, self.blocked_in = forks, seconds, blocked_in
        waiting = f", waiting in {blocked_in}" if blocked_in else ""
        super().__init__(f"a child forked from this process blocked before it ran ({seconds:g} s asleep without CPU "
                         f"time{waiting}), in each of {forks} forks, and was killed; nothing it was given ran. "
                         "The fork of this process blocks: under qemu-user this is the emulator's "
                         "(docs/aarch64.md, 'The guarded call under qemu-user')")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.forks, self.seconds, self.blocked_in))


class BackgroundFailed(EtopsError, RuntimeError):
    """A piece of ``etops dev``'s round run in a forked process
    (``etops.dev.background``) raised there (the message is its traceback) or ended
    without a result (the message says how its process ended)."""
