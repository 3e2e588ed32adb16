"""The status line at the top of the panel: one message per source (each scene names its sources: checkpoint,
trainer, a worker, clients, ...), and the count of connected browsers that feeds its ``clients`` message. The same
keyed lines serve as notes under a group of inputs (a refused or clipped value said where the user types)."""

from __future__ import annotations

import threading
from collections.abc import Callable

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

    def clear(self) -> None:
        """Every message gone (notes about an input once a new tab opens: the panel is shared by every tab)."""
        with self._lock:
            self._messages.clear()
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
    says so in ``status`` under ``"clients"``. ``on_new_tab`` callbacks run for each browser that connects, before it
    is counted (so a count that includes it means they have run)."""

    def __init__(self, server: viser.ViserServer, status: StatusLine) -> None:
        self._lock = threading.Lock()
        self._status = status
        self._new_tab: list[Callable[[], None]] = []
        self.clients = 0
        server.on_client_connect(lambda _: self._connected())
        server.on_client_disconnect(lambda _: self._count(-1))

    def on_new_tab(self, callback: Callable[[], None]) -> None:
        self._new_tab.append(callback)

    def _connected(self) -> None:
        try:
            for callback in self._new_tab:
                callback()
        finally:
            self._count(+1)

    def _count(self, delta: int) -> None:
        with self._lock:  # the message set under it too: the last count wins
            self.clients += delta
            self._status.set("clients", f"{self.clients} browsers connected" if self.clients > 1 else None)
