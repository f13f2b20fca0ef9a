"""Two `etops list --json` registries compared kernel by kernel: each kernel's schema,
callability, status, kernel keys and providing libraries (by file name). Used by
tests/packaging/wheel_travel.sh (make test-compat: another executorch version) and
the aarch64 lane (tests/aarch64/lane_calls.py: another architecture).

    python registry_compare.py HERE.json REFERENCE.json   exits 1 naming each difference
"""

from __future__ import annotations

import json
import os
import sys


def registry(path) -> dict:
    """kernel name -> (schema, schema_known, callable, status, sorted (key, origin, library file name))."""
    with open(path) as f:
        entries = json.load(f)
    return {e["name"]: (e["schema"], e["schema_known"], e["callable"], e["status"],
                        sorted((str(k["key"]), k["origin"], os.path.basename(k["library"] or "")) for k in e["kernels"]))
            for e in entries}


def differences(here: dict, reference: dict) -> list[str]:
    """One line per kernel that differs or is in one registry only; [] when they agree."""
    lines = []
    for name in sorted(n for n in here.keys() & reference.keys() if here[n] != reference[n]):
        lines.append(f"{name}:\n  here:      {here[name]}\n  reference: {reference[name]}")
    for label, names in (("only here", here.keys() - reference.keys()), ("only in the reference", reference.keys() - here.keys())):
        if names:
            lines.append(f"{label}: {sorted(names)}")
    return lines


def main(argv: list[str]) -> int:
    here, reference = registry(argv[0]), registry(argv[1])
    found = differences(here, reference)
    if found:
        print("\n".join(found))
        print("the registries differ (above): etops must handle each difference, and docs/installation.md list it")
        return 1
    print(f"registry: the same {len(here)} kernels, schemas, keys and libraries as the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
