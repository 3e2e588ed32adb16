"""A watchdog for the processes a driver started: killed when the driver dies without closing them (SIGKILL, a
crash), within a second.

An embedded Ray asks the kernel to kill its GCS and raylet with their parent (``PR_SET_PDEATHSIG``), and its
workers and agents follow the raylet. Where that signal does not arrive, the raylet outlives a killed driver until
its own wait for the dead GCS times out (a minute), and its agents after it: seen on a CI machine, a raylet still
running 60 s after its driver's SIGKILL. This watchdog does not depend on it.

It is a small process in its own session (a signal to the driver's process group does not reach it), reading a
pipe whose write end only the driver holds, so the driver's death, however it dies, is an end of file. The driver
names the roots to watch (``watch``); the watchdog follows the process trees below them, refreshed every second,
each process known by its pid and its start time (a reused pid is never killed). At an end of file it SIGKILLs
every process it followed that still runs, and exits; after ``close`` (the driver shut them down itself) it exits
and kills nothing. Linux only (``/proc``); elsewhere ``Reaper.start`` gives one that watches nothing.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_CLOSED = b"closed"
_REFRESH_SECONDS = 1.0


class Reaper:
    """The driver's side: ``start`` it, start the processes inside ``watching_new_children`` (or name them to
    ``watch``), ``close`` it after stopping them."""

    def __init__(self, process: subprocess.Popen | None) -> None:
        self.process = process  # None: no /proc here, nothing is watched

    @classmethod
    def start(cls) -> Reaper:
        if not Path("/proc/self/stat").exists():
            return cls(None)
        return cls(subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, start_new_session=True))

    @contextlib.contextmanager
    def watching_new_children(self) -> Iterator[None]:
        """Watch the processes this process starts in the block (its new children and every process below them),
        also where the block raises (what a failed start left is killed if this process dies)."""
        if self.process is None:
            yield
            return
        before = _children(os.getpid())
        try:
            yield
        finally:
            self.watch(_children(os.getpid()) - before)

    def watch(self, pids: set[int]) -> None:
        """Follow these processes and every process below them."""
        if self.process is not None:
            self.process.stdin.write(" ".join(str(pid) for pid in sorted(pids)).encode() + b"\n")
            self.process.stdin.flush()

    def close(self) -> None:
        """The watched processes were stopped by the driver: the watchdog exits and kills nothing."""
        if self.process is not None:
            self.process.communicate(_CLOSED + b"\n")  # a watchdog already gone: the write's broken pipe ignored


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` now."""
    return {child for child, (parent, _) in _processes().items() if parent == pid}


def _processes() -> dict[int, tuple[int, int]]:
    """Every process: pid -> (its parent's pid, its start time in clock ticks since boot)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # gone while we read
            continue
        if fields[0] != b"Z":  # a zombie is already dead
            table[int(entry.name)] = (int(fields[1]), int(fields[19]))
    return table


def _trees(roots: dict[int, int], followed: dict[int, int]) -> dict[int, int]:
    """The roots and every process below them or below a followed one, alive now: pid -> start time. A root or a
    followed process whose pid now names another process (another start time) is dropped."""
    table = _processes()
    alive = {pid: start for pid, start in (roots | followed).items() if table.get(pid, (0, -1))[1] == start}
    below: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        below.setdefault(parent, []).append(pid)
    stack = list(alive)
    while stack:
        for child in below.get(stack.pop(), []):
            if child not in alive:
                alive[child] = table[child][1]
                stack.append(child)
    return alive


def _kill(followed: dict[int, int]) -> None:
    """SIGKILL each followed process that still runs. Each is pinned by a pidfd before its start time is checked,
    so a pid reused in between is never signalled (where the kernel has no pidfds, the check comes just before)."""
    handles: dict[int, int | None] = {}
    for pid in followed:
        try:
            handles[pid] = os.pidfd_open(pid)
        except ProcessLookupError:  # gone
            continue
        except OSError:  # no pidfds in this kernel
            handles[pid] = None
    table = _processes()
    for pid, handle in handles.items():
        try:
            if table.get(pid, (0, -1))[1] == followed[pid]:
                if handle is None:
                    os.kill(pid, signal.SIGKILL)
                else:
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
        except ProcessLookupError:
            pass
        finally:
            if handle is not None:
                os.close(handle)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the driver, which closes us
    roots: dict[int, int] = {}
    followed: dict[int, int] = {}
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], _REFRESH_SECONDS)
        if ready:
            chunk = os.read(0, 4096)
            if not chunk:  # the driver died with the pipe's only write end
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if _CLOSED in lines:
                return 0
            table = _processes()
            for line in lines:
                roots |= {int(pid): table[int(pid)][1] for pid in line.split() if int(pid) in table}
        if roots:
            followed = _trees(roots, followed)
    _kill(_trees(roots, followed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
