"""Supervision of the viewer's background parts: a failure is caught, counted and shown in the page, and the part
keeps running.

Every loop body of a worker (answering a request, drawing it, the work after it, a trainer step, an evaluation,
a page callback) runs inside ``Supervisor.guard``. An exception there never ends the thread silently: the
status line shows which part failed, doing what, the exception, when, and how many failures that part has had.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Report = Callable[[str, str | None], None]  # (status key, message or None)


class Supervisor:
    """Counts failures per part and reports each one through ``report`` under the key ``part``.

    Args:
        report: shows a message in the page (the status line's ``set``).
    """

    def __init__(self, report: Report) -> None:
        self._report = report
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}

    @contextmanager
    def guard(self, part: str, doing: str) -> Iterator[None]:
        """Run the body; an ``Exception`` from it is counted and shown, not raised."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - the point: shown in the page, the part keeps running
            self.failed(part, doing, exc)

    def call(self, part: str, doing: str, action: Callable[..., object], *args: object) -> None:
        """``action(*args)`` under ``guard(part, doing)``: what a button's callback runs."""
        with self.guard(part, doing):
            action(*args)

    def failed(self, part: str, doing: str, exc: BaseException) -> None:
        with self._lock:
            count = self._failures[part] = self._failures.get(part, 0) + 1
        when = time.strftime("%H:%M:%S")
        plural = "" if count == 1 else "s"
        self._report(
            part,
            f"⚠ {part}: {doing} failed at {when}: {type(exc).__name__}: {exc} "
            f"({count} failure{plural} so far; it keeps running)",
        )

    def failures(self, part: str | None = None) -> int:
        """Failures of ``part`` so far (of every part when None)."""
        with self._lock:
            return self._failures.get(part, 0) if part is not None else sum(self._failures.values())
