"""Progress over a grid's jobs: a tqdm bar with elapsed time and ETA on a terminal, one plain line per finished job
otherwise (a log file, CI), each with the count, the elapsed time and the ETA."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tqdm import tqdm


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class GridProgress:
    """``total`` jobs of which ``done`` finished before this run (resumed); ``update(text)`` after each job.
    ``log`` gets the plain lines (None: standard error); ``enabled=False`` says nothing."""

    def __init__(
        self,
        phase: str,
        total: int,
        done: int = 0,
        log: Callable[[str], None] | None = None,
        enabled: bool = True,
        terminal: bool | None = None,
    ) -> None:
        self.phase, self.total, self.done, self.resumed = phase, total, done, done
        self.enabled, self.started = enabled, time.perf_counter()
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        terminal = sys.stderr.isatty() if terminal is None else terminal
        self.bar = None
        if enabled and terminal:
            self.bar = tqdm(total=total, initial=done, desc=phase, unit="job", dynamic_ncols=True)
        elif enabled and done:
            self.log(f"{phase}: {done}/{total} jobs finished before, resumed")

    def drop(self, count: int) -> None:
        """``count`` of the jobs left will not run (skipped for a reason found on the way): the total shrinks."""
        self.total -= count
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def eta(self) -> float | None:
        """Seconds left at this run's rate of jobs, None before its first job."""
        ran = self.done - self.resumed
        if ran == 0:
            return None
        return (time.perf_counter() - self.started) / ran * (self.total - self.done)

    def update(self, text: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
            return
        eta = self.eta()
        left = f", ETA {_clock(eta)}" if eta is not None and self.done < self.total else ""
        elapsed = _clock(time.perf_counter() - self.started)
        self.log(f"{self.phase}: {self.done}/{self.total} jobs, {elapsed} elapsed{left}: {text}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
