"""Reproducers that load the kernel under development: each script check's
clusters and runner wrote for an ``etops dev`` round gets, after ``import etops``,
the line that builds the file (or loads its cached library) and swaps it in, so
the script calls the developed kernel and exits 1 while the bug stands."""

from __future__ import annotations

from pathlib import Path

MARK = "# etops dev: the kernel file under development, built (or its cached library) and swapped in"


def load_line(files, helpers=None) -> str:
    """The lines loading kernel files `files`, each built with its `helpers`
    (file -> helper sources; --changed)."""
    extra = f", helpers={ {str(f): [str(h) for h in hs] for f, hs in helpers.items() if hs}!r}" if helpers and any(helpers.values()) else ""
    return f"{MARK}\nfrom etops.dev.load import load_all as _etops_dev_load\n_etops_dev_load({[str(f) for f in files]!r}{extra})\n"


def load_in_reproducers(report_dir, files, helpers=None) -> int:
    """Adds the loading lines to every reproducer script under `report_dir`
    (findings/ and reproducers/) that lacks them; returns how many it changed.
    `helpers`: kernel file -> the helper sources built with it."""
    changed = 0
    for folder in ("findings", "reproducers"):
        for script in sorted((Path(report_dir) / folder).glob("*.py")):
            text = script.read_text()
            if MARK in text or "\nimport etops\n" not in text:
                continue
            script.write_text(text.replace("\nimport etops\n", "\nimport etops\n" + load_line(files, helpers), 1))
            changed += 1
    return changed
