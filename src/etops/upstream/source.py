"""Where findings come from: the JSON of ``etops check`` or ``etops dev`` (each
finding's representative case named by its id), or a list of kernels, checked
first (``etops check KERNEL... --json``, in a child process: an abort or a crash
of the sweep is its own). Each finding becomes a conformance Cluster whose
smallest failing call is found again (the case's task rerun without kernels) and
shrunk: ``smallest(finding_and_cluster)``.

May import: the core, etops.conformance (case, clusters).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..conformance.case import CaseResult
from ..conformance.clusters import Cluster, smallest_call

#: the finding kinds an upstream test is written for
KINDS = ("mismatch", "abort", "crash", "unsupported")
#: the JSON lists of a check report holding recorded cases
_CASE_LISTS = ("mismatches", "crashes", "hangs", "unsupported", "guarded", "errors")


@dataclass
class Finding:
    """One finding of a report: its JSON (kernel, kind, category, summary, ...) and
    its conformance cluster (the representative case first)."""

    data: dict
    cluster: Cluster
    versions: dict
    #: the kernels the sweep selected (the calls of a task are numbered among theirs)
    selected: list | None = None


def _case_from_id(case_id: str, kind: str, recorded: dict) -> CaseResult:
    """The representative case: as recorded in the report when it is there, else
    made from its id (``kernel|opinfo|dtype|s<sample>c<call>``)."""
    if case_id in recorded:
        return CaseResult.from_json(recorded[case_id])
    parts = case_id.split("|")
    if len(parts) != 4 or not parts[3].startswith("s") or "c" not in parts[3]:
        raise ValueError(f"finding's example {case_id!r} is not a case id (kernel|opinfo|dtype|s<N>c<N>)")
    sample, _, call = parts[3][1:].partition("c")
    return CaseResult(parts[0], "", parts[1], parts[2], int(sample), int(call), kind)


def read_report(path) -> list[Finding]:
    """The findings of an ``etops check --json`` file (its ``findings``) or an ``etops
    dev --json`` file (each kernel file's ``findings``, its ``ops`` the kernels it
    selected); ValueError naming the file when it holds neither."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"argument 'report': {path}: not a readable JSON report ({exc})") from exc
    if isinstance(data, dict) and isinstance(data.get("files"), list):  # etops dev
        out = []
        for f in data["files"]:
            if isinstance(f, dict) and isinstance(f.get("findings"), list):
                out += _findings({"findings": f["findings"], "options": {"kernels": f.get("ops") or None}})
        return out
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ValueError(f"argument 'report': {path}: no 'findings' list (not an etops check or etops dev JSON)")
    return _findings(data)


def _findings(data: dict) -> list[Finding]:
    recorded = {c["kernel"] + "|" + c["opinfo"] + "|" + c["dtype"] + f"|s{c['sample']}c{c['call']}": c
                for name in _CASE_LISTS for c in data.get(name, ()) if isinstance(c, dict) and "opinfo" in c}
    versions = data.get("versions") or _versions()
    options = data.get("options") or {}
    selected = options.get("kernels") or sorted({f["kernel"] for f in data["findings"] if "kernel" in f})
    out = []
    for f in data["findings"]:
        example = f.get("example")
        if not example:
            continue
        case = _case_from_id(example, f["kind"], recorded)
        cluster = Cluster(f["kernel"], f["kind"], f.get("signature", ""), f.get("layout"), [case])
        out.append(Finding(f, cluster, versions, list(selected)))
    return out


def _versions() -> dict:
    import torch

    from .. import __version__

    try:
        from importlib.metadata import version

        et = version("executorch")
    except Exception:  # noqa: BLE001
        et = "?"
    return {"etops": __version__, "torch": torch.__version__, "executorch": et}


def check_kernels(kernels: list[str], workdir, timeout: float | None = None) -> Path:
    """Runs ``etops check KERNEL... --isolated --json`` (a child process) and
    returns its JSON; RuntimeError with the child's last lines when it wrote none."""
    if not kernels:
        raise ValueError("argument 'kernels': no kernel given")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "check.json"
    cmd = [sys.executable, "-m", "etops", "check", *kernels, "--isolated", "--json", str(out), "--report-dir",
           str(workdir / "check"), "--quiet", "--no-progress", "--report-only"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    if not out.is_file():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"etops check {' '.join(kernels)} wrote no report (exit {proc.returncode}): {tail}")
    return out


def smallest(finding: Finding):
    """(func, args, kwargs) of the finding's smallest failing call (its cluster's
    example refigured on it), or None when its inputs are not found again."""
    from ..conformance.runner import default_kmap

    kmap = default_kmap()
    selected = None if finding.selected is None or len(finding.selected) >= len(kmap.registered) else finding.selected
    return smallest_call(finding.cluster, kmap=kmap, selected=selected)


def default_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="etops-upstream-"))
