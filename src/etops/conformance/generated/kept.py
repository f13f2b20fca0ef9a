"""The generated cases a process keeps, so that none is made twice: ``etops dev``
makes each generated task's cases once, before its task processes fork
(``prepare``), and keeps them on disk for its next process (etops.dev.learned,
through ``of_kernel``, ``keep`` and ``changed``); ``case_of`` answers from them
(with copies of their tensors: a kernel may write the arguments it is given) and
makes the cases of a kernel nobody keeps as cases.case_of does, each time.

Making a case asks ATen's meta kernel of its functional overload whether it is
valid; the first such call in a process imports torch._dynamo and sympy (about as
long as ``import torch``), and before this each task process made its tasks'
cases again, in each dim-order layout too.

May import torch, the standard library, etops.conformance.values and this
package's cases module.
"""

from __future__ import annotations

import dataclasses

from ..values import exact_clone
from .cases import Case, case_key, plan
from .cases import case_of as made_case

#: kernel -> {case key: Case} for the kernels whose cases are kept
_KEPT: dict[str, dict[str, Case]] = {}
#: kernels with cases made or kept since the last changed()
_CHANGED: set = set()


def _kernel_of(key: str) -> str:
    return key.split("|", 1)[0]


def _copy(case: Case) -> Case:
    return dataclasses.replace(case, args=exact_clone(case.args), kwargs={k: exact_clone(v) for k, v in case.kwargs.items()})


def case_of(key: str) -> Case:
    """The case of `key`: from the kept cases when its kernel's are kept (made and
    kept now when missing), else made as cases.case_of makes it; its tensors are
    the caller's own."""
    kept = _KEPT.get(_kernel_of(key))
    if kept is None:
        return made_case(key)
    found = kept.get(key)
    if found is None:
        found = kept[key] = made_case(key)
        _CHANGED.add(_kernel_of(key))
    return _copy(found)


def prepare(kernel: str, dtype: str) -> int:
    """Makes and keeps every case of `kernel`'s generated task at `dtype` (its plan's
    rows of that dtype) not kept yet; its kernel's cases are kept from now on. How
    many were made now. A plan or a case that cannot be made is left to the task's
    run, which says why (run.run_generated_task's sample error)."""
    kept = _KEPT.setdefault(kernel, {})
    made = 0
    try:
        rows = plan(kernel).rows_of(dtype)
    except Exception:  # noqa: BLE001 - the task's run meets it and reports it
        return 0
    for row in rows:
        key = case_key(kernel, row)
        if key not in kept:
            try:
                kept[key] = made_case(key)
            except Exception:  # noqa: BLE001 - likewise: made (and failing) again when the task runs
                break
            made += 1
    if made:
        _CHANGED.add(kernel)
    return made


def keep(kernel: str, cases: dict) -> None:
    """Keeps `cases` ({key: Case} of `kernel`, another process's) with those kept
    already; a value that is not a Case of `kernel` is left out."""
    mine = {k: v for k, v in cases.items() if isinstance(k, str) and isinstance(v, Case) and v.key == k
            and _kernel_of(k) == kernel}
    _KEPT.setdefault(kernel, {}).update(mine)


def kept(kernel: str) -> bool:
    """Whether `kernel`'s cases are kept in this process."""
    return kernel in _KEPT


def of_kernel(kernel: str) -> dict:
    """`kernel`'s kept cases ({key: Case}; empty when none are kept)."""
    return dict(_KEPT.get(kernel, {}))


def changed() -> set:
    """The kernels with cases made since the last call."""
    found = set(_CHANGED)
    _CHANGED.clear()
    return found


__all__ = ["case_of", "changed", "keep", "kept", "of_kernel", "prepare"]
