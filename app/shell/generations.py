"""The stale-result rule: a latest-request mailbox whose results are drawn only while their inputs are current.

Every change of inputs gets a new generation. A worker takes only the newest request (older ones it never saw are
skipped) and hands its result back through ``publish``, which draws it under the same lock that ``submit`` takes
to bump the generation: a result can never be drawn after its inputs changed, however the threads interleave.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Request(Generic[T]):
    """Inputs as submitted, stamped with their generation (1, 2, ...)."""

    generation: int
    inputs: T


class GenerationGate(Generic[T]):
    """Thread-safe mailbox of the latest inputs; counts drawn and discarded results."""

    def __init__(self, lock: threading.Condition | None = None) -> None:
        """``lock``: share one condition between several gates (and their owner) so that changing their inputs
        together, and drawing a result of any of them, are mutually atomic; a private one by default."""
        self._lock = lock if lock is not None else threading.Condition()
        self._latest: Request[T] | None = None
        self._taken = 0  # generation of the newest request a worker has taken
        self._closed = False
        self.drawn = 0
        self.discarded = 0

    def submit(self, inputs: T, on_submit: Callable[[], None] | None = None) -> int:
        """Make ``inputs`` the current inputs; returns their generation. Any result in flight becomes stale.

        ``on_submit`` (e.g. drawing a pending state) runs under the lock, so no older result can overwrite it.
        """
        with self._lock:
            generation = 1 if self._latest is None else self._latest.generation + 1
            self._latest = Request(generation, inputs)
            if on_submit is not None:
                on_submit()
            self._lock.notify_all()
            return generation

    @property
    def latest(self) -> Request[T] | None:
        with self._lock:
            return self._latest

    def is_current(self, generation: int) -> bool:
        with self._lock:
            return self._latest is not None and self._latest.generation == generation

    def take(self, timeout: float | None = None) -> Request[T] | None:
        """The newest request not taken yet, waiting up to ``timeout`` s for one; None on timeout or close."""
        with self._lock:
            ready = self._lock.wait_for(
                lambda: self._closed or (self._latest is not None and self._latest.generation > self._taken),
                timeout,
            )
            if not ready or self._closed:
                return None
            self._taken = self._latest.generation
            return self._latest

    @property
    def untaken(self) -> bool:
        """A request is waiting that no worker has taken yet."""
        with self._lock:
            return self._latest is not None and self._latest.generation > self._taken

    def wait_newer(self, generation: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a request newer than ``generation`` (or close); True if one came."""
        with self._lock:
            return self._lock.wait_for(
                lambda: self._closed or (self._latest is not None and self._latest.generation > generation), timeout
            )

    def publish(self, generation: int, draw: Callable[[], None]) -> bool:
        """Call ``draw`` if ``generation`` is still current (atomically with respect to ``submit``), else discard.

        ``draw`` runs under the gate's lock, so it must be quick and must not call ``submit``.
        """
        with self._lock:
            if self._latest is None or self._latest.generation != generation:
                self.discarded += 1
                return False
            draw()
            self.drawn += 1
            return True

    def close(self) -> None:
        """Wake every waiting worker; ``take`` returns None from now on."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed
