"""Telling a refusal by etops' own pre-call guards from an ordinary argument error.

The rules table (etops.ops) guards kernels known to abort or corrupt memory on some
inputs: a guard is a closure made by a constructor of etops.ops.guards, and it
raises a plain TypeError / ValueError / IndexError naming the argument, like any
other argument check. What tells the two apart is where the exception was raised:
a guard refusal has, in its traceback, the frame of one of the guards the
operator's record lists. ``refusing_rule`` finds that guard and words it, with the
known finding of the table it stands for when one names the same argument.

Imports etops.ops only."""

from __future__ import annotations

from ..ops import rules_for


def _describe_guard(guard) -> str:
    """``min_dim(low=1, name='self')``: the constructor and the values it closed over."""
    code = guard.__code__
    constructor = code.co_qualname.split(".<locals>", 1)[0] if hasattr(code, "co_qualname") else code.co_name
    cells = guard.__closure__ or ()
    values = []
    for name, cell in zip(code.co_freevars, cells):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        values.append(f"{name}={_word(value)}")
    return f"{constructor}({', '.join(values)})"


def _word(value) -> str:
    """A value a guard closed over, in words that are the same in every process:
    literals as their repr, a function by its name, a rules-table record by the
    names it covers (never a repr carrying an address)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset, set)):
        items = sorted(map(_word, value)) if isinstance(value, (set, frozenset)) else [_word(v) for v in value]
        return f"({', '.join(items)})"
    if callable(value):
        return getattr(value, "__qualname__", getattr(value, "__name__", type(value).__name__)).replace(".<locals>", "")
    names = getattr(value, "names", None)
    if names:
        return f"{type(value).__name__}({', '.join(map(str, names))})"
    summary = getattr(value, "summary", None)
    return repr(summary) if isinstance(summary, str) else type(value).__name__


def _same_closure(guard, frame) -> bool:
    cells = guard.__closure__ or ()
    for name, cell in zip(guard.__code__.co_freevars, cells):
        try:
            if frame.f_locals.get(name, cell.cell_contents) is not cell.cell_contents:
                return False
        except ValueError:
            continue
    return True


def refusing_guard(kernel_name: str, exc: BaseException):
    """The guard of `kernel_name`'s record in the rules table that raised `exc`,
    or None when `exc` was raised anywhere else (an ordinary argument error)."""
    guards = rules_for(kernel_name).guards + rules_for(kernel_name, program=True).guards  # a direct call's or the judge's
    if not guards:
        return None
    by_code: dict = {}
    for guard in guards:
        if hasattr(guard, "__code__"):
            by_code.setdefault(guard.__code__, []).append(guard)
    tb = exc.__traceback__
    while tb is not None:
        candidates = by_code.get(tb.tb_frame.f_code)
        if candidates:
            for guard in candidates:
                if _same_closure(guard, tb.tb_frame):
                    return guard
            return candidates[0]
        tb = tb.tb_next
    return None


def refusing_rule(kernel_name: str, exc: BaseException) -> str | None:
    """What caught the call when `exc` is a refusal by one of `kernel_name`'s
    pre-call guards: the guard (``min_dim(low=1, name='self')``), then the table's
    known finding about the same argument when there is one (``; finding: ...``).
    None when `exc` is not a guard refusal."""
    guard = refusing_guard(kernel_name, exc)
    if guard is None:
        return None
    text = _describe_guard(guard)
    message = str(exc)
    for finding in rules_for(kernel_name).findings:
        if f"argument '{finding.argument}'" in message and not finding.computes:
            return f"{text}; finding: {finding.summary}"
    return text
