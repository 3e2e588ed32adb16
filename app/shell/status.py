"""The status line at the top of the panel: one message per source (each scene names its sources: checkpoint,
trainer, a worker, clients, ...), and the count of connected browsers that feeds its ``clients`` message. The same
keyed lines serve as notes under a group of inputs (a refused or clipped value said where the user types)."""

from __future__ import annotations

import threading

import viser


class StatusLine:
    """Keyed messages rendered as markdown where it is built; ``set(key, None)`` clears one; ``empty``: what it says
    without any (the page's status: "Ready."; notes under inputs: nothing)."""

    def __init__(self, server: viser.ViserServer, empty: str = "Ready.") -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, str] = {}
        self._empty = empty
        self.handle = server.gui.add_markdown("")
        self._render()

    def set(self, key: str, message: str | None) -> None:
        with self._lock:
            if message is None:
                self._messages.pop(key, None)
            else:
                self._messages[key] = message
            self._render()

    @property
    def messages(self) -> dict[str, str]:
        with self._lock:
            return dict(self._messages)

    def _render(self) -> None:
        lines = [f"- {text}" for text in self._messages.values()]
        self.handle.content = "\n".join(lines) if lines else self._empty


class ClientCount:
    """Counts the browsers connected to ``server`` and, while there is more than one (each moves the same goal),
    says so in ``status`` under ``"clients"``."""

    def __init__(self, server: viser.ViserServer, status: StatusLine) -> None:
        self._lock = threading.Lock()
        self._status = status
        self.clients = 0
        server.on_client_connect(lambda _: self._count(+1))
        server.on_client_disconnect(lambda _: self._count(-1))

    def _count(self, delta: int) -> None:
        with self._lock:  # the message set under it too: the last count wins
            self.clients += delta
            self._status.set("clients", f"{self.clients} browsers connected" if self.clients > 1 else None)
