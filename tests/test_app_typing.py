"""Numbers typed into the Franka scene's boxes, in-process: taken when committed (Enter or a pause), never rewritten
under the cursor, clamped with a message, and text that is not a number refused with a message."""

from __future__ import annotations

import time

import numpy as np
import pytest
from viewer_support import type_text, wait_until

import assets
from app.grasp_panel import TYPED_TARGET
from app.typed_numbers import COMMIT_PAUSE_S, format_value
from app.viewer import Viewer

KEY_INTERVAL_S = 0.1  # a user's typing pace (viser sends at most one update per 50 ms)
AXIS = {"x": 0, "y": 1, "z": 2}


def _box(viewer: Viewer, label: str):
    boxes = (*viewer.grasp.targets.boxes, *viewer.grasp.joints.boxes)
    return next(box for box in boxes if box.label == label)


@pytest.mark.parametrize(("axis", "text"), [("y", "-0.25"), ("z", "0.05")])
def test_a_target_typed_key_by_key_is_taken_once_committed_and_never_rewritten(start_viewer, axis, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, f"target {axis} (m)")
    said = type_text(box, text, KEY_INTERVAL_S)
    assert said == [text[:end] for end in range(1, len(text) + 1)], "the box was rewritten while typed in"
    assert viewer.board.current.p == before, "a half-typed number was taken"
    wait_until(lambda: viewer.board.current.p != before, 5 * COMMIT_PAUSE_S, "the pause to commit the typed value")
    time.sleep(0.1)  # the commit's write-back, if any, after the question changed
    expected = list(before)
    expected[AXIS[axis]] = float(text)
    assert viewer.board.current.p == tuple(expected), "only the typed coordinate moves"
    assert box.value == text, "the value in force is the typed one: its text stays as typed"
    assert "target bounds" not in viewer.status.messages and TYPED_TARGET not in viewer.status.messages


def test_enter_commits_at_once(start_viewer) -> None:
    viewer = start_viewer(train=False)
    type_text(_box(viewer, "target x (m)"), "0.45")
    viewer.grasp.targets.form.submit()  # Enter in a box of the form
    assert viewer.board.current.p[0] == 0.45


def test_a_joint_typed_outside_its_limits_is_clipped_with_a_message(start_viewer) -> None:
    viewer = start_viewer(train=False)
    joint = assets.PANDA.joints[3]
    lower, upper = viewer.robot.limits[joint]
    assert upper < 0
    box = _box(viewer, joint)
    said = type_text(box, "0.5", KEY_INTERVAL_S)
    assert said == ["0", "0.", "0.5"], "the box was rewritten while typed in"
    wait_until(lambda: box.value == format_value(upper), 5 * COMMIT_PAUSE_S, "the box to show the value in force")
    assert viewer.board.current.q0[3] == upper
    assert f"{joint} 0.500 -> {upper:.3f}" in viewer.status.messages["q0 bounds"]


@pytest.mark.parametrize("text", ["NaN", "abc", "", "inf"])
def test_text_that_is_not_a_number_is_refused_with_a_message(start_viewer, text) -> None:
    viewer = start_viewer(train=False)
    before = viewer.board.current.p
    box = _box(viewer, "target y (m)")
    type_text(box, text)
    viewer.grasp.targets.commit()
    assert viewer.board.current.p == before
    assert box.value == format_value(before[1]), "the box shows the value in force"
    message = viewer.status.messages[TYPED_TARGET]
    assert "target y (m)" in message and "not a number" in message and f"stays {format_value(before[1])}" in message
    type_text(box, "0.1")
    viewer.grasp.targets.commit()
    assert TYPED_TARGET not in viewer.status.messages, "a commit that refuses nothing clears the message"


def test_a_box_being_typed_in_is_left_alone_by_changes_from_elsewhere(start_viewer) -> None:
    viewer = start_viewer()
    wait_until(lambda: viewer.board.newest_policy is not None, 60, "a snapshot")
    y = _box(viewer, "target y (m)")
    type_text(y, "-0.21")  # not committed yet
    viewer._snapshot(99_999, viewer.board.newest_policy)  # a snapshot's question change
    viewer.set_target(np.array([0.47, 0.1, 0.2]))  # a button: the other boxes follow
    assert y.value == "-0.21", "the typed y was overwritten"
    assert _box(viewer, "target x (m)").value == "0.47" and _box(viewer, "target z (m)").value == "0.2"
    wait_until(lambda: viewer.board.current.p[1] == -0.21, 5 * COMMIT_PAUSE_S, "the typed y to be taken")
    assert viewer.board.current.p == (0.47, -0.21, 0.2)
