"""Telling a refusal by etops' own pre-call guards from an ordinary argument error.

The policy table (etops.ops) guards kernels known to abort or corrupt memory on
some inputs. A guard's refusal is an ``etops.GuardRefusal`` (a ValueError, and the
TypeError / IndexError / ZeroDivisionError its guard raised) carrying the
operator, the declaration and the guard that refused and the known finding about
the argument; any other exception is an ordinary argument error. ``refusing_rule``
words the refusal for a report: the guard, with the table's known finding when
there is one.

Imports etops.errors only."""

from __future__ import annotations

from ..errors import GuardRefusal


def _describe_guard(guard) -> str:
    """``min_dim(low=1, name='self')``: the constructor and the values it closed over."""
    code = getattr(guard, "__code__", None)
    if code is None:
        return getattr(guard, "__name__", repr(guard))
    constructor = code.co_qualname.split(".<locals>", 1)[0] if hasattr(code, "co_qualname") else code.co_name
    values = []
    for name, cell in zip(code.co_freevars, guard.__closure__ or ()):
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


def refusing_guard(kernel_name: str, exc: BaseException):
    """The guard of `kernel_name`'s entry that refused the call `exc` stands for,
    or None when `exc` is no guard refusal of that operator (an ordinary argument
    error, or another operator's refusal)."""
    if isinstance(exc, GuardRefusal) and exc.op == kernel_name:
        return exc.guard
    return None


def refusing_rule(kernel_name: str, exc: BaseException) -> str | None:
    """What caught the call when `exc` is a refusal by one of `kernel_name`'s
    pre-call guards: the guard (``min_dim(low=1, name='self')``), then the table's
    known finding about the same argument when there is one (``; finding: ...``).
    None when `exc` is not a guard refusal."""
    guard = refusing_guard(kernel_name, exc)
    if guard is None or not isinstance(exc, GuardRefusal):
        return None
    text = _describe_guard(guard)
    if exc.finding is not None:
        return f"{text}; finding: {exc.finding.summary}"
    return text
