"""A command run under a memory watchdog: the summed RSS of its process tree polled,
the tree killed above a limit, its peak, wall time and exit code printed.

    python benchmarks/peak_rss.py [--limit-gb 6] [--every 0.5] [--log FILE] -- COMMAND ...

The command starts in a session of its own; every 0.5 s the watchdog sums the
resident memory (``/proc/PID/statm``'s second field) of every process descended
from it (by ``/proc/PID/stat``'s parent) or in its session, and above ``--limit-gb``
sends SIGKILL to each of them and to the session's process group. It prints one
line: ``peak_rss_gb=... wall_s=... exit=... killed=yes|no``, the peak being the
largest sum seen (a poll's, so up to 0.5 s of growth above it can be missed; the
kill happens at the first poll above the limit). ``--log`` also writes each poll's
sum (s, GB, processes) to FILE.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree(root: int) -> list[int]:
    """The processes descended from ``root`` (itself included) or in its session."""
    parents: dict[int, int] = {}
    sessions: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(name)] = int(fields[1])
        sessions[int(name)] = int(fields[3])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found = {pid for pid, session in sessions.items() if session == root}
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in parents:
            found.add(pid)
        stack.extend(children.get(pid, ()))
    return sorted(found)


def _rss(pids: list[int]) -> int:
    """The summed resident bytes of ``pids`` (those that have ended count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-gb", type=float, default=6.0)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--log")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    limit = int(args.limit_gb * 1024**3)
    log = open(args.log, "w") if args.log else None
    start = time.monotonic()
    child = subprocess.Popen(command, start_new_session=True)
    peak, killed = 0, False
    while child.poll() is None:
        pids = _tree(child.pid)
        used = _rss(pids)
        peak = max(peak, used)
        if log:
            print(f"{time.monotonic() - start:.1f} {used / 1024**3:.3f} {len(pids)}", file=log, flush=True)
        if used > limit and not killed:
            killed = True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(args.every)
    wall = time.monotonic() - start
    print(
        f"peak_rss_gb={peak / 1024**3:.2f} wall_s={wall:.1f} exit={child.returncode} "
        f"killed={'yes' if killed else 'no'}",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
