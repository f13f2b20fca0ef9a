"""Nothing Linux-only runs when etops is imported (docs/installation.md, Platforms):
in a fresh interpreter, with torch imported first (its behaviour is not etops'),
Python's audit hooks see every file open, fork, mmap, subprocess and dlopen that
``import etops`` and a registry lookup cause. The only libraries opened are the
executorch package's runtime and kernel libraries, by this platform's file names;
with the platform faked as macOS, the names asked for are the .dylib ones."""

from __future__ import annotations

import json
import subprocess
import sys

AUDIT = r'''
import json, sys
import torch
events = []
WATCHED = {"open", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.system", "subprocess.Popen",
           "mmap.__new__", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "signal.pthread_kill"}
def hook(event, args):
    if event in WATCHED:
        events.append([event, str(args[0])])
sys.addaudithook(hook)
import etops
etops.registry().aten.add.out
from etops import _native
print(json.dumps({"events": events, "lib_dir": _native.executorch_lib_dir(),
                  "libraries": [_native.RUNTIME_LIBRARY, *_native.KERNEL_LIBRARIES]}))
'''


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_import_opens_only_the_executorch_libraries_and_nothing_linux_only():
    done = run(AUDIT)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    events = [tuple(e) for e in found["events"]]
    opened = [path for event, path in events if event == "open"]
    assert not [p for p in opened if p.startswith(("/proc", "/sys", "/dev"))], opened
    assert not [e for e in events if e[0] not in ("open", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle")], events
    libraries = [path for event, path in events if event == "ctypes.dlopen" and path != "None"]
    assert libraries, events
    allowed = {f"{found['lib_dir']}/{name}" for name in found["libraries"]}
    assert set(libraries) <= allowed, (libraries, allowed)
    assert f"{found['lib_dir']}/libexecutorch.so" in libraries


def test_on_macos_the_dylib_names_are_asked_for():
    """The platform faked after torch's import: the runtime is looked for as
    libexecutorch.dylib, which a Linux wheel lacks: a clear ImportError naming it."""
    done = run("import sys, torch\nsys.platform = 'darwin'\n"
               "try:\n    import etops\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    assert done.returncode == 0, done.stderr
    assert "IMPORTERROR the executorch package has no " in done.stdout, done.stdout
    assert "/lib/libexecutorch.dylib: etops needs its shared runtime" in done.stdout, done.stdout
