"""The cases ``etops dev`` runs for each operator of a file: the same case source
as ``etops check`` (the OpInfos whose samples reach the operator, found by
discovery, its reference, and its generated cases: etops.conformance.generated,
``--no-generated`` leaves them out), and for an operator neither reaches, cases derived
from a sibling overload's samples (``derived``); ``--opinfo`` keeps the named
OpInfos' alone (``only_opinfos``).

Discovery is check's (``etops.conformance.sweep.discover``): computed here when no
cache holds it (then cached), so a fresh cache gives the same cases as a warm one;
the OpInfos named after the operator are always included.
"""

from __future__ import annotations

import torch

from ..conformance.runner import dtype_from_name, dtype_name, opinfo_dtypes, opinfos
from ..schemas import split_name

#: task ids of derived tasks (etops.dev.derived): ``derived:<target>|<sibling>|<OpInfo>``
DERIVED_PREFIX = "derived:"


def named_opinfos(name: str) -> set[str]:
    """OpInfos named after aten operator `name` (a view's ``_copy`` variant by the
    view's name, ``nn.functional.<op>`` too)."""
    ns, op, _ = split_name(name)
    if ns != "aten":
        return set()
    bases = {op, op.removesuffix("_copy"), op.lstrip("_"), op.removesuffix("_with_indices")}
    bases |= {f"nn.functional.{b}" for b in set(bases)}
    return {oid for oid, info in opinfos().items() if getattr(info, "name", None) in bases or getattr(info, "aten_name", None) in bases}


def wheel_kmap():
    """The kernel map of the registry without the operators etops registered that
    had no kernel (discovery's cache key is that of the wheel's registry)."""
    import etops

    from ..conformance.mapping import KernelMap

    names = [n for n in etops.registry().operator_names
             if not n.startswith("etops_previous::") and not _added_by_etops(n)]
    return KernelMap(names)


def _added_by_etops(name: str) -> bool:
    from ..custom.registration import origins

    try:
        found = origins(name)
    except Exception:  # noqa: BLE001 - not a registration of etops'
        return False
    return bool(found) and all(o.kind == "custom" and not o.overridden for o in found)


def reaching(names, progress=False) -> dict[str, list[str]]:
    """Operator -> the OpInfos whose samples reach it (discovery, run here on the
    wheel's registry when not cached, plus the OpInfos named after it)."""
    from ..conformance.sweep import discover

    wanted = [n for n in names if n.startswith("aten::")]
    found = discover(wheel_kmap(), progress=progress) if wanted else {}
    out = {}
    for name in names:
        ids = set(named_opinfos(name)) | {oid for oid, info in found.items() if name in info.get("kernels", ())}
        out[name] = sorted(oid for oid in ids if oid in opinfos())
    return out


def chosen_opinfos(names) -> frozenset | None:
    """`names` (OpInfo ids, as ``etops check --opinfo`` takes them) as a set; None
    when none is given. A name no OpInfo has is a ValueError."""
    if not names:
        return None
    unknown = [n for n in names if n not in opinfos()]
    if unknown:
        raise ValueError(f"no OpInfo named {', '.join(unknown)}")
    return frozenset(names)


def only_opinfos(plan: dict, chosen) -> dict:
    """`plan` (operator -> tasks) with only the tasks of the OpInfos `chosen`
    (chosen_opinfos; a derived task counts as the OpInfo whose samples it takes;
    reference and generated tasks are no OpInfo's: left out); `plan` itself when
    `chosen` is None."""
    if chosen is None:
        return plan

    def of(task: dict) -> str:
        oid = task["opinfo"]
        return oid.rsplit("|", 1)[-1] if oid.startswith(DERIVED_PREFIX) else oid

    return {op: [t for t in tasks if of(t) in chosen] for op, tasks in plan.items()}


def _order(task: dict) -> tuple:
    """float32 first, then the other floating dtypes, then the rest."""
    d = task["dtype"]
    return (d != "float32", not dtype_from_name(d).is_floating_point, d, task["opinfo"])


def tasks_for(name: str, opinfo_ids, dtypes=None, generated: bool = True) -> list[dict]:
    """(OpInfo, reference or generated, dtype) tasks of operator `name`, float32
    first (`generated`: its generated cases' tasks too)."""
    from ..conformance.generated import generated_tasks
    from ..conformance.sweep import reference_tasks

    wanted = None if dtypes is None else {dtype_name(d if isinstance(d, torch.dtype) else dtype_from_name(str(d))) for d in dtypes}
    tasks = []
    for oid in opinfo_ids:
        for dtype in opinfo_dtypes(opinfos()[oid]):
            if wanted is None or dtype_name(dtype) in wanted:
                tasks.append({"opinfo": oid, "dtype": dtype_name(dtype), "kernel": name})
    for t in reference_tasks([name], None if wanted is None else [dtype_from_name(d) for d in wanted]):
        tasks.append({"opinfo": t["opinfo"], "dtype": t["dtype"], "kernel": name})
    for t in generated_tasks([name], wanted) if generated else ():
        tasks.append({"opinfo": t["opinfo"], "dtype": t["dtype"], "kernel": name})
    return sorted(tasks, key=_order)


def plan(names, dtypes=None, progress=False, generated: bool = True) -> dict[str, list[dict]]:
    """Operator -> its tasks (OpInfo samples, reference, and generated cases when
    `generated`). An operator OpInfo's samples and its reference never reach gets
    derived tasks from a sibling overload when judged (``derived.tasks_for``,
    ``judge.judge``)."""
    reach = reaching(names, progress)
    return {name: tasks_for(name, reach[name], dtypes, generated) for name in names}
