"""The regression view: two upstream reports (``summary.json`` of two executorch
versions) side by side, each root cause (kernel, kind, signature, layout) marked
*fixed* (the older version's finding only), *new* (the newer's only) or *stays*
(both), with the outcome of its test in each. Structured keys only.

May import: nothing of etops (JSON in, rows and markdown out).
"""

from __future__ import annotations

import json
from pathlib import Path

FIXED, NEW, STAYS = "fixed", "new", "stays"


def _key(f: dict) -> tuple:
    return (f.get("kernel"), f.get("kind"), f.get("signature"), f.get("layout"))


def read_summary(path) -> dict:
    """A report's summary.json; ValueError naming the file when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"argument 'against': {path}: not a readable summary.json ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ValueError(f"argument 'against': {path}: no 'findings' list (not an etops report upstream summary.json)")
    return data


def compare(old: dict, new: dict) -> list[dict]:
    """One row per root cause of either report: kernel, category, status (fixed /
    new / stays), each version's test outcome; stays first, then new, then fixed."""
    before = {_key(f): f for f in old["findings"]}
    after = {_key(f): f for f in new["findings"]}
    rows = []
    for key in list(dict.fromkeys([*after, *before])):
        a, b = before.get(key), after.get(key)
        status = STAYS if a and b else NEW if b else FIXED
        f: dict = b or a or {}
        rows.append({"kernel": f["kernel"], "category": f.get("category"), "status": status,
                     "old": a.get("outcome") if a else None, "new": b.get("outcome") if b else None,
                     "test": (b or {}).get("test") or (a or {}).get("test")})
    order = {STAYS: 0, NEW: 1, FIXED: 2}
    return sorted(rows, key=lambda r: (order[r["status"]], r["kernel"], r["category"] or ""))


def markdown(rows: list[dict], old_version: str, new_version: str) -> str:
    """The comparison as a markdown table with a count line."""
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (STAYS, NEW, FIXED)}
    lines = [f"{counts[STAYS]} root causes in both, {counts[NEW]} new in {new_version}, {counts[FIXED]} fixed since "
             f"{old_version}.", "", f"| kernel | category | {old_version} | {new_version} | test |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['kernel']}` | {r['category']} | {r['old'] or 'no finding'} | {r['new'] or 'no finding'} | "
                     + (f"`{r['test']}`" if r["test"] else "") + " |")
    return "\n".join(lines) + "\n"
