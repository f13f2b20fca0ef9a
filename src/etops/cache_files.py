"""Where etops keeps what one process learned for the next one, and how a cache file
is read and written: $ETOPS_CACHE_DIR, else $XDG_CACHE_HOME/etops (~/.cache/etops);
JSON files written whole (a temporary file renamed over the old one, so a reader
never sees half a file) and read back as None when absent or unreadable (a cache
is never worth an error). Core module: imports the standard library only."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """The folder every etops disk cache lives under (created by the writers)."""
    base = os.environ.get("ETOPS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "etops")
    return Path(base)


def read_json(path: Path) -> Any:
    """The JSON value in `path`, or None when it is absent or not readable JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    """Writes `value` to `path` whole (best effort: a full disk or a read-only cache
    folder leaves the cache unwritten, never raises)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)
    except OSError:
        pass
