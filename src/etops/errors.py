"""The exceptions etops raises. Every one names the operator and, where it applies,
the argument at fault."""

from __future__ import annotations


class EtopsError(Exception):
    """Base of every etops error."""


class KernelNotFoundError(EtopsError, AttributeError, KeyError):
    """No ExecuTorch kernel is registered under the name asked for.

    An AttributeError (for ``reg.aten.add.Tensor``) and a KeyError (for
    ``reg.get_kernel("aten::add.Tensor")``) at once; ``suggestions`` holds the
    closest registered names."""

    def __init__(self, message: str, name: str = "", suggestions: tuple[str, ...] = ()):
        super().__init__(message)
        self.name = name
        self.suggestions = tuple(suggestions)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NoMatchingKernelError(EtopsError, LookupError):
    """The operator is registered, but none of its kernels matches the dtypes and
    dim orders of the tensors passed (no exact kernel key and no fallback)."""


class SchemaError(EtopsError, LookupError):
    """The operator's schema is unknown or uses a type ExecuTorch kernels cannot take,
    so etops cannot check a call against it."""


class KernelError(EtopsError, RuntimeError):
    """The kernel ran and reported a failure (``ctx.fail``).

    Attributes: ``op`` (operator name), ``error_name`` and ``error_code``
    (ExecuTorch's ``Error``), ``log`` (the messages the kernel logged before it
    failed, possibly empty)."""

    def __init__(self, op: str, error_code: int, error_name: str, log: str = ""):
        self.op = op
        self.error_code = error_code
        self.error_name = error_name
        self.log = log
        message = f"ExecuTorch kernel {op} failed with Error::{error_name} (0x{error_code:02x})"
        lines = [line.rstrip(" :") for line in log.splitlines() if line.strip(" :")]
        if lines:
            message += ": " + "; ".join(lines)
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (self.op, self.error_code, self.error_name, self.log))
