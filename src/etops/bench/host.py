"""The machine a benchmark ran on: the facts a figure needs next to it. Imports
torch (and executorch's version) when asked, nothing of etops."""

from __future__ import annotations

import os
import platform
import time


def machine() -> dict:
    """The facts a benchmark figure needs next to it."""
    import torch

    try:
        import executorch.version as ev

        et_version = ev.__version__
    except Exception:  # noqa: BLE001
        et_version = "?"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "executorch": et_version,
    }
