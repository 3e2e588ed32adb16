"""Whether a scene's interactive answers are being computed, so that a background trainer can yield to them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class BusySignal:
    """Whether an interactive request is being computed; the trainer waits for idle before each step.

    On this project's 2-core machines two compute threads slow each other down about twofold, so training yields
    to the page: a step never starts while the ghosts are being recomputed.
    """

    def __init__(self) -> None:
        self._idle = threading.Event()
        self._idle.set()

    @contextmanager
    def busy(self) -> Iterator[None]:
        self._idle.clear()
        try:
            yield
        finally:
            self._idle.set()

    @property
    def is_busy(self) -> bool:
        return not self._idle.is_set()

    def wait_idle(self, timeout: float) -> bool:
        return self._idle.is_set() or self._idle.wait(timeout)
