"""The status line at the top of the panel: one message per source (checkpoint, trainer, inference, clients)."""

from __future__ import annotations

import threading

import viser


class StatusLine:
    """Keyed messages rendered as markdown; ``set(key, None)`` clears one."""

    def __init__(self, server: viser.ViserServer) -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, str] = {}
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
        self.handle.content = "\n".join(lines) if lines else "Ready."
