"""The watchdog of a driver's processes: a killed driver's watched trees are killed (even a process whose parent
died first, and, when the driver's whole process group is killed, a watched process outside that group), nothing else
is, and a closed watchdog kills nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from grid_support import alive, wait_gone

ROOT = Path(__file__).resolve().parents[3]

_DRIVER = textwrap.dedent(
    """
    import subprocess, sys, time
    from learning.common.reaper import Reaper
    reaper = Reaper.start()
    # watched: a shell that starts a grandchild after the watch began, and a sleep in a session of its own (as Ray
    # starts some of its processes: a signal to the driver's group does not reach it); not watched: a sleep
    watched = subprocess.Popen(["sh", "-c", "sleep 0.2; sleep 600 & echo $! > " + sys.argv[1] + "; wait"])
    apart = subprocess.Popen(["sleep", "600"], start_new_session=True)
    unwatched = subprocess.Popen(["sleep", "600"])
    reaper.watch({watched.pid, apart.pid})
    print(reaper.process.pid, watched.pid, unwatched.pid, apart.pid, flush=True)
    if sys.argv[2] == "close":
        time.sleep(1.5)
        reaper.close()
        print("closed", flush=True)
    time.sleep(600)
    """
)


def _start_driver(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, int, int, int, int, int]:
    """The driver (leading a process group of its own), its watchdog, the watched shell, the unwatched sleep, the
    watched sleep in a session of its own, and the shell's grandchild."""
    grandchild_file = tmp_path / "grandchild"
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(grandchild_file), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    reaper, watched, unwatched, apart = (int(pid) for pid in driver.stdout.readline().split())
    deadline = time.monotonic() + 30
    while not grandchild_file.exists() or not grandchild_file.read_text().strip():
        assert time.monotonic() < deadline, "the watched shell did not start its grandchild"
        time.sleep(0.05)
    return driver, reaper, watched, unwatched, apart, int(grandchild_file.read_text())


def _kill_all(*pids: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_driver_takes_its_watched_trees_with_it_even_a_process_orphaned_before(tmp_path):
    driver, reaper, watched, unwatched, apart, grandchild = _start_driver(tmp_path, "kill")
    try:
        time.sleep(1.5)  # the watchdog's refresh has seen the grandchild
        os.kill(watched, signal.SIGKILL)  # its parent dies first: the grandchild is orphaned, off the watched tree
        assert wait_gone({watched}, 10) == set()
        assert alive({grandchild}) == {grandchild}
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        assert wait_gone({grandchild, apart, reaper}, 10) == set()  # killed, and the watchdog exited
        assert alive({unwatched}) == {unwatched}  # what it was not told to watch is left alone
    finally:
        _kill_all(driver.pid, watched, unwatched, apart, grandchild, reaper)


def test_a_driver_killed_with_its_whole_process_group_takes_a_watched_process_outside_the_group(tmp_path):
    """A closed terminal's hang-up, or a job-control kill, signals the driver's whole group: the watchdog, in a
    session of its own, outlives it and kills the watched process that the group's signal did not reach."""
    driver, reaper, watched, unwatched, apart, grandchild = _start_driver(tmp_path, "kill")
    try:
        assert os.getsid(reaper) == reaper and os.getpgid(apart) != driver.pid
        time.sleep(1.5)  # the watchdog's refresh has seen the grandchild
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        assert wait_gone({watched, unwatched, grandchild}, 10) == set()  # the group's: gone with it
        assert wait_gone({apart, reaper}, 10) == set()  # the watchdog's work, then it exited
    finally:
        _kill_all(driver.pid, watched, unwatched, apart, grandchild, reaper)


def test_a_closed_watchdog_exits_and_kills_nothing(tmp_path):
    driver, reaper, watched, unwatched, apart, grandchild = _start_driver(tmp_path, "close")
    try:
        assert driver.stdout.readline().strip() == "closed"
        assert wait_gone({reaper}, 10) == set()
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        time.sleep(1.0)
        assert alive({watched, grandchild, unwatched, apart}) == {watched, grandchild, unwatched, apart}
    finally:
        _kill_all(driver.pid, watched, unwatched, apart, grandchild, reaper)
