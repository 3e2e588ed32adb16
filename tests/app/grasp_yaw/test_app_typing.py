"""Numbers typed into the Franka scene's boxes, in-process: taken only when committed (Enter, or the Set button),
however slowly the keys come (a pause takes nothing: under load it took half-typed numbers), never rewritten under
the cursor, clamped with a message under the boxes, and text that is not a number refused with a message; the box
shows the value in force after the commit."""

from __future__ import annotations

import time

import numpy as np
import pytest
from viewer_support import type_text, wait_until, websocket_tab

import assets
from app.grasp_yaw.panel import TYPED_Q0, TYPED_TARGET
from app.grasp_yaw.scene import BOUNDS, Viewer
from app.shell.typed_numbers import format_value

KEY_INTERVAL_S = 0.1  # a user's typing pace (viser sends at most one update per 50 ms)
SLOW_KEY_S = 1.6  # a loaded page: keys reach the server more than a second apart
AXIS = {"x": 0, "y": 1, "z": 2}


def _box(viewer: Viewer, label: str):
    boxes = (*viewer.grasp.targets.boxes, *viewer.grasp.joints.boxes)
    return next(box for box in boxes if box.label == label)


@pytest.mark.slow
@pytest.mark.parametrize(("axis", "text"), [("y", "-0.25"), ("z", "0.05")])
def test_a_target_typed_key_by_key_is_taken_once_committed_and_never_rewritten(start_viewer, axis, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, f"target {axis} (m)")
    said = type_text(box, text, KEY_INTERVAL_S)
    assert said == [text[:end] for end in range(1, len(text) + 1)], "the box was rewritten while typed in"
    time.sleep(1.0)
    assert viewer.board.current.p == before, "a typed number was taken before Enter"
    viewer.grasp.targets.form.submit()  # Enter in a box of the form
    expected = list(before)
    expected[AXIS[axis]] = float(text)
    assert viewer.board.current.p == tuple(expected), "only the typed coordinate moves"
    assert box.value == text, "the value in force is the typed one: its text stays as typed"
    assert not viewer.grasp.target_notes.messages and viewer.grasp.target_notes.handle.content == ""


def test_keys_slower_than_any_pause_take_nothing_until_enter(start_viewer) -> None:
    """A loaded machine: ``1e9`` arrives a key at a time, more than a second apart; no prefix (``1``, ``1e``) is
    taken, the box says each prefix as typed, and Enter takes the whole number (moved into reach, with a note)."""
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target x (m)")
    said = type_text(box, "1e9", SLOW_KEY_S)
    assert said == ["1", "1e", "1e9"], "the box was rewritten while typed in"
    assert viewer.board.current.p == before, "a half-typed number was taken"
    viewer.grasp.targets.commit()  # Enter
    assert viewer.board.current.p[0] < 0.8  # 1e9 m, moved to the nearest reachable point
    assert "outside the arm's top-down reach" in viewer.grasp.target_notes.messages[BOUNDS]
    assert box.value == format_value(viewer.board.current.p[0]), "the box shows where the target went"


@pytest.mark.slow
def test_the_set_buttons_commit_as_enter_does(start_viewer) -> None:
    viewer = start_viewer(train=False)
    type_text(_box(viewer, "target x (m)"), "0.45")
    viewer.grasp.targets.commit()  # Set target (the button calls it)
    assert viewer.board.current.p[0] == 0.45


@pytest.mark.slow
def test_a_joint_typed_outside_its_limits_is_clipped_with_a_message(start_viewer) -> None:
    viewer = start_viewer(train=False)
    joint = assets.PANDA.joints[3]
    lower, upper = viewer.robot.limits[joint]
    assert upper < 0
    box = _box(viewer, joint)
    said = type_text(box, "0.5", KEY_INTERVAL_S)
    assert said == ["0", "0.", "0.5"], "the box was rewritten while typed in"
    viewer.grasp.joints.commit()  # Enter
    assert viewer.board.current.q0[3] == upper
    assert f"{joint} 0.500 -> {upper:.3f}" in viewer.grasp.q0_notes.messages[BOUNDS], "the clip is said under the boxes"
    assert box.value == format_value(upper), "the box shows the value in force"


@pytest.mark.slow
@pytest.mark.parametrize("text", ["NaN", "abc", "", "inf"])
def test_text_that_is_not_a_number_is_refused_with_a_message(start_viewer, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target y (m)")
    type_text(box, text)
    viewer.grasp.targets.commit()
    assert viewer.board.current.p == before
    assert box.value == format_value(before[1]), "the box shows the value in force"
    message = viewer.grasp.target_notes.messages[TYPED_TARGET]
    said = "the box is empty" if text == "" else f"{text!r} is not a number"
    assert "target y (m)" in message and said in message and f"stays {format_value(before[1])}" in message
    type_text(box, "0.1")
    viewer.grasp.targets.commit()
    assert TYPED_TARGET not in viewer.grasp.target_notes.messages, "a commit that refuses nothing clears the message"


def test_text_that_is_not_a_number_waits_for_enter_then_is_refused_and_the_box_restored(start_viewer) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target y (m)")
    type_text(box, "abc")
    time.sleep(1.0)
    assert box.value == "abc" and TYPED_TARGET not in viewer.grasp.target_notes.messages, "a draft is left alone"
    viewer.grasp.targets.commit()  # Enter
    assert "'abc' is not a number" in viewer.grasp.target_notes.messages[TYPED_TARGET]
    assert box.value == format_value(before[1]) and viewer.board.current.p == before


def test_a_new_tab_opens_without_the_notes_about_another_tabs_input(start_viewer) -> None:
    """viser's panel is one for every tab: what one tab's input did is not said to the next tab opened."""
    viewer = start_viewer(train=False)
    url = f"ws://127.0.0.1:{viewer.server.get_port()}"
    with websocket_tab(url):
        wait_until(lambda: viewer.clients.clients == 1, 5, "the tab counted")
        type_text(_box(viewer, "target x (m)"), "9")
        type_text(_box(viewer, "target y (m)"), "abc")
        viewer.grasp.targets.commit()  # x moved into reach, y refused
        type_text(_box(viewer, assets.PANDA.joints[0]), "x")
        viewer.grasp.joints.commit()  # refused
        assert {TYPED_TARGET, BOUNDS} <= set(viewer.grasp.target_notes.messages)
        assert TYPED_Q0 in viewer.grasp.q0_notes.messages
        with websocket_tab(url):
            wait_until(lambda: viewer.clients.clients == 2, 5, "the second tab counted")
            assert not viewer.grasp.target_notes.messages and not viewer.grasp.q0_notes.messages
            assert viewer.grasp.target_notes.handle.content == "" == viewer.grasp.q0_notes.handle.content
            assert viewer.status.messages.get("clients") == "2 browsers connected"  # the page's status stays


@pytest.mark.slow
def test_a_box_being_typed_in_is_left_alone_by_changes_from_elsewhere(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.board.newest_policy is not None, 60, "a snapshot")
    y = _box(viewer, "target y (m)")
    type_text(y, "-0.21")  # not committed yet
    viewer._snapshot(99_999, viewer.board.newest_policy)  # a snapshot's question change
    viewer.set_target(np.array([0.47, 0.1, 0.2]))  # a button: the other boxes follow
    assert y.value == "-0.21", "the typed y was overwritten"
    assert _box(viewer, "target x (m)").value == "0.47" and _box(viewer, "target z (m)").value == "0.2"
    viewer.grasp.targets.commit()  # Enter
    assert viewer.board.current.p == (0.47, -0.21, 0.2)
