"""Helpers of the viewer's tests: a free port, waiting for a condition, typing into a box and dragging a gizmo (the
``start_viewer`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import msgspec.msgpack
import numpy as np
import pytest
import viser
import websockets.sync.client
from viser._messages import ViewerCameraMessage


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


def type_text(box, text: str, key_interval_s: float = 0.0) -> list[str]:
    """Type ``text`` into a viser text box as a browser does, one key at a time: each key sends the box's whole text
    and viser runs the box's callbacks on a pool thread. Returns what the box said after each key (and the
    ``key_interval_s`` after it): a box never rewritten under the cursor says each prefix typed. An empty ``text``
    is one key that clears the box (select all, Backspace)."""
    said = []
    for end in range(1, len(text) + 1) if text else [0]:
        box._impl.value = text[:end]
        for callback in list(box._impl.update_cb):
            event = viser.GuiEvent(client_id=None, client=None, target=box)
            threading.Thread(target=callback, args=(event,)).start()
        time.sleep(key_interval_s)
        said.append(box.value)
    return said


def drag(viewer, positions) -> None:
    """As a browser dragging ``viewer``'s target gizmo: start, one update per position, end (viser runs each
    callback)."""
    handle = viewer.gizmo.handle

    def fire(phase: str) -> None:
        event = viser.TransformControlsEvent(client=None, client_id=None, target=handle, phase=phase)
        for callback in list(handle._impl_aux.update_cb):
            callback(event)

    fire("start")
    for p in positions:
        handle._impl.position = np.asarray(p, dtype=float)
        fire("update")
    fire("end")


def rested(viewer, keys=None) -> bool:
    """Whether the G1 scene has drawn the rested answers of ``keys`` (reach only and the policy) for its current goal."""
    from app.counterweight.answers import POLICY, REACH_ONLY, RESTED, BodyAnswer

    keys = (REACH_ONLY, POLICY) if keys is None else keys
    drawn = viewer.drawn
    return (
        viewer.drawn_question is not None
        and viewer.drawn_question.p == viewer.board.current.p
        and all(isinstance(drawn[key], BodyAnswer) and drawn[key].phase == RESTED for key in keys)
        and not set(keys) & viewer.pending
    )


@contextlib.contextmanager
def websocket_tab(url: str):
    """A browser tab as viser counts one: a websocket of its protocol that has reported its camera."""
    with websockets.sync.client.connect(url, subprotocols=[f"viser-v{viser.__version__}"], max_size=None) as socket:
        camera = ViewerCameraMessage(
            wxyz=(1.0, 0.0, 0.0, 0.0), position=(1.0, 1.0, 1.0), fov=1.0, near=0.01, far=100.0,
            image_height=480, image_width=640, look_at=(0.0, 0.0, 0.0), up_direction=(0.0, 0.0, 1.0),
        )  # fmt: skip
        socket.send(msgspec.msgpack.encode(camera.as_serializable_dict()))
        yield socket
