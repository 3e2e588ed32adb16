"""Helpers of the viewer's tests: a free port and waiting for a condition (the ``start_viewer`` fixture is in
``conftest.py``)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.01) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout_s`` naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
