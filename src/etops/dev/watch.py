"""``etops dev --watch``: the loop again on every save of a kernel file or of a
checkout header it includes. Each round first puts back the kernels the previous
round swapped in (so "the built-in" is always the wheel's kernel), then builds;
a file that does not compile shows its diagnostics and the watch goes on."""

from __future__ import annotations

import gc
import hashlib
import time
from pathlib import Path

from ..checkout.layout import CheckoutError, kernel_files


def watched_files(files: list[Path], root=None) -> set[Path]:
    """The kernel files and the checkout headers they include."""
    from ..checkout.install import locate

    out = set(files)
    for f in files:
        try:
            out |= locate(f, root).headers
        except (CheckoutError, OSError):
            continue
    return out


def fingerprint(paths: set[Path]) -> str:
    """A digest of the files' contents (a missing file counts as empty)."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p).encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"\0missing")
    return h.hexdigest()


#: seconds without a save after which the watch collects what the rounds left
SETTLE_AFTER = 1.0


def _freeze(collect: bool) -> None:
    """Every object alive now frozen (gc.freeze), after a full collection when
    `collect`: later collections scan only what came after them. A full collection
    of the half million objects a round keeps (the recordings, the base's results)
    took 0.26 s, in every other round; the task processes forked from this one leave
    the frozen objects' pages alone. A round ends with a freeze (no time); the
    collection of what the rounds left waits until the watch idles (SETTLE_AFTER)."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def watch(paths, on_round=print, *, rounds: int | None = None, poll: float = 0.2, idle_timeout: float | None = None,
          **options):
    """Runs ``etops.dev(paths, **options)`` now and after every change of a kernel
    file or a checkout header it includes, calling ``on_round(result)`` after each
    round. Stops after `rounds` rounds, after `idle_timeout` seconds without a
    change, or on KeyboardInterrupt; returns the last round's DevResult (its
    kernels stay swapped in)."""
    from .loop import dev

    files = kernel_files([paths] if isinstance(paths, (str, Path)) else paths)
    root = options.get("root")
    result = None
    done = 0
    try:
        while True:
            watched = watched_files(files, root)
            seen = fingerprint(watched)
            if result is not None:
                result.restore()
            try:
                result = dev(files, **options)
            except Exception as exc:  # noqa: BLE001 - the watch goes on; the round says what failed
                from .report import DevResult, FileResult

                result = DevResult([FileResult(str(files[0]), error=f"etops dev failed: {type(exc).__name__}: {exc}")])
            done += 1
            on_round(result)
            _freeze(collect=False)
            if rounds is not None and done >= rounds:
                return result
            watched = watched_files(files, root) | watched
            waited = time.monotonic()
            settled = False
            while fingerprint(watched) == seen:
                idle = time.monotonic() - waited
                if idle_timeout is not None and idle > idle_timeout:
                    return result
                if not settled and idle > SETTLE_AFTER:
                    _freeze(collect=True)
                    settled = True
                time.sleep(poll)
    except KeyboardInterrupt:
        return result
    finally:
        gc.unfreeze()  # the caller's collections see every object again
